'use strict'

const { generate } = require('../../loadgen')
const { createRng, deriveSeed } = require('../../loadgen/prng')

// Every test draws N keys through the real generator with a fixed seed and
// compares the empirical shape with (a) the exact PMF the generator claims to
// sample, by a chi-square test at the 0.999 level, and (b) the textbook
// moments of the named distribution, which do not depend on our PMF code.
const N = 200000
const KEYS = 100

function draw (distribution, { count = KEYS, hot, seed = 12345 } = {}) {
  const w = generate({
    seed,
    phases: [{ name: 'p', duration: 1, rate: N, keys: { count }, distribution, hot, mix: { get: 1 } }]
  })
  const counts = new Float64Array(count)
  const samples = new Float64Array(N)
  let i = 0
  for (const r of w.requests(0)) {
    counts[r.keyIndex]++
    samples[i++] = r.keyIndex
  }
  return { counts, samples, pmf: w.pmf(0) }
}

function moments (samples) {
  let sum = 0
  for (const x of samples) sum += x
  const mean = sum / samples.length
  let ss = 0
  for (const x of samples) ss += (x - mean) ** 2
  return { mean, variance: ss / (samples.length - 1) }
}

// Chi-square goodness of fit against the PMF, pooling bins with expected count < 5.
function chiSquare (counts, pmf) {
  let stat = 0
  let bins = 0
  let pooledObs = 0
  let pooledExp = 0
  for (let k = 0; k < counts.length; k++) {
    pooledObs += counts[k]
    pooledExp += pmf[k] * N
    if (pooledExp >= 5) {
      stat += (pooledObs - pooledExp) ** 2 / pooledExp
      bins++
      pooledObs = 0
      pooledExp = 0
    }
  }
  if (pooledExp > 0) stat += (pooledObs - pooledExp) ** 2 / Math.max(pooledExp, 1e-9)
  const dof = Math.max(1, bins - 1)
  // Wilson-Hilferty approximation of the 0.999 quantile (z = 3.09).
  const critical = dof * (1 - 2 / (9 * dof) + 3.09 * Math.sqrt(2 / (9 * dof))) ** 3
  return { stat, critical, dof }
}

function expectFits ({ counts, pmf }) {
  const { stat, critical } = chiSquare(counts, pmf)
  expect(stat).toBeLessThan(critical)
  // And every draw is a valid key index.
  expect(counts.reduce((a, b) => a + b, 0)).toBe(N)
}

describe('key distributions (seeded, N = 200000 draws over 100 keys)', () => {
  test('uniform: flat; mean 49.5 ± 0.5, variance (n²-1)/12 ± 2%', () => {
    const d = draw('uniform')
    expectFits(d)
    const m = moments(d.samples)
    expect(Math.abs(m.mean - 49.5)).toBeLessThan(0.5)
    expect(Math.abs(m.variance / ((KEYS ** 2 - 1) / 12) - 1)).toBeLessThan(0.02)
    for (const p of d.pmf) expect(p).toBeCloseTo(1 / KEYS, 12)
  })

  test('normal(mean 50, sd 10), rounded: mean ± 0.1, sd ± 1%', () => {
    const d = draw({ type: 'normal', mean: 50, sd: 10 })
    expectFits(d)
    const m = moments(d.samples)
    expect(Math.abs(m.mean - 50)).toBeLessThan(0.1)
    // Rounding to the nearest key adds 1/12 to the variance.
    expect(Math.abs(Math.sqrt(m.variance) / Math.sqrt(100 + 1 / 12) - 1)).toBeLessThan(0.01)
  })

  test('gaussian is accepted as the paper\'s name for normal, and truncation redraws instead of piling up at the edge', () => {
    const d = draw({ type: 'gaussian', mean: 0, sd: 10 })
    expectFits(d)
    // Half the mass would be below key 0: the rest is renormalised, so key 0 is not a spike.
    expect(d.counts[0] / d.counts[1]).toBeLessThan(1.2)
    expect(d.counts[0] / d.counts[1]).toBeGreaterThan(0.85)
  })

  test('poisson(λ 20): mean λ ± 0.5%, variance λ ± 3%', () => {
    const d = draw({ type: 'poisson', lambda: 20 })
    expectFits(d)
    const m = moments(d.samples)
    expect(Math.abs(m.mean / 20 - 1)).toBeLessThan(0.005)
    expect(Math.abs(m.variance / 20 - 1)).toBeLessThan(0.03)
  })

  test('poisson with a large λ (500 over 1000 keys) does not underflow', () => {
    const d = draw({ type: 'poisson', lambda: 500 }, { count: 1000 })
    expectFits(d)
    expect(Math.abs(moments(d.samples).mean / 500 - 1)).toBeLessThan(0.005)
  })

  test('exponential(rate 0.1), floored: geometric mean e^-r/(1-e^-r) ± 1%', () => {
    const d = draw({ type: 'exponential', rate: 0.1 })
    expectFits(d)
    const expected = Math.exp(-0.1) / (1 - Math.exp(-0.1))
    expect(Math.abs(moments(d.samples).mean / expected - 1)).toBeLessThan(0.01)
    // Memorylessness: P(k+1)/P(k) = e^-rate.
    expect(d.counts[11] / d.counts[10]).toBeGreaterThan(Math.exp(-0.1) * 0.93)
    expect(d.counts[11] / d.counts[10]).toBeLessThan(Math.exp(-0.1) * 1.07)
  })

  test('binomial(n 99, p 0.3): mean np ± 0.5%, variance np(1-p) ± 3%', () => {
    const d = draw({ type: 'binomial', n: 99, p: 0.3 })
    expectFits(d)
    const m = moments(d.samples)
    expect(Math.abs(m.mean / 29.7 - 1)).toBeLessThan(0.005)
    expect(Math.abs(m.variance / 20.79 - 1)).toBeLessThan(0.03)
  })

  test('binomial defaults n to count - 1', () => {
    const d = draw({ type: 'binomial', p: 0.5 })
    expectFits(d)
    expect(Math.abs(moments(d.samples).mean - 49.5)).toBeLessThan(0.1)
  })

  test('zipf(s 1.2): count(rank 1)/count(rank 2) = 2^s ± 3%, rank 1 / rank 10 = 10^s ± 10%', () => {
    const d = draw({ type: 'zipf', s: 1.2 })
    expectFits(d)
    expect(Math.abs(d.counts[0] / d.counts[1] / 2 ** 1.2 - 1)).toBeLessThan(0.03)
    expect(Math.abs(d.counts[0] / d.counts[9] / 10 ** 1.2 - 1)).toBeLessThan(0.1)
  })

  test('weights (list): each key gets its weight\'s share ± 0.005', () => {
    const weights = Array.from({ length: 10 }, (_, i) => i + 1) // 1..10, total 55
    const d = draw({ type: 'weights', weights }, { count: 10 })
    expectFits(d)
    weights.forEach((w, i) => expect(Math.abs(d.counts[i] / N - w / 55)).toBeLessThan(0.005))
  })

  test('weights (map by key name, others): unnamed keys share "others"', () => {
    const d = draw({ type: 'weights', weights: { 'key-2': 6, 'key-7': 2 }, others: 0.25 }, { count: 10 })
    expectFits(d)
    const total = 6 + 2 + 8 * 0.25
    expect(Math.abs(d.counts[2] / N - 6 / total)).toBeLessThan(0.005)
    expect(Math.abs(d.counts[7] / N - 2 / total)).toBeLessThan(0.005)
    expect(Math.abs(d.counts[0] / N - 0.25 / total)).toBeLessThan(0.005)
  })

  test('custom pmf function (library use)', () => {
    const d = draw({ type: 'custom', pmf: (k) => (k % 2 === 0 ? 3 : 1) }, { count: 10 })
    expectFits(d)
    expect(Math.abs(d.counts[0] / d.counts[1] - 3)).toBeLessThan(0.15)
  })

  test('hand-set hot keys on top of a distribution take their share ± 0.005 (paper\'s 1000-key test)', () => {
    const hot = { keys: [100, 300, 500, 700, 900], share: 0.25 }
    const d = draw({ type: 'normal', mean: 700, sd: 100 }, { count: 1000, hot })
    expectFits(d)
    const base = draw({ type: 'normal', mean: 700, sd: 100 }, { count: 1000 }).pmf
    for (const k of hot.keys) {
      // share / 5 from the hot overlay plus 0.75 of the base distribution's own mass there.
      const expected = 0.05 + 0.75 * base[k]
      expect(Math.abs(d.counts[k] / N - expected)).toBeLessThan(0.005)
    }
  })

  test('hot keys with their own weights', () => {
    const d = draw('uniform', { count: 10, hot: { keys: ['key-1', 'key-2'], share: 0.6, weights: [2, 1] } })
    expectFits(d)
    expect(Math.abs(d.counts[1] / N - (0.4 + 0.04))).toBeLessThan(0.005)
    expect(Math.abs(d.counts[2] / N - (0.2 + 0.04))).toBeLessThan(0.005)
  })
})

describe('seeded PRNG', () => {
  test('same seed, same stream; labels give independent streams', () => {
    const a = createRng(42)
    const b = createRng(42)
    const xs = Array.from({ length: 100 }, () => a.nextUint32())
    expect(Array.from({ length: 100 }, () => b.nextUint32())).toEqual(xs)
    const c = createRng(deriveSeed(42, 'phase', 'a'))
    const d = createRng(deriveSeed(42, 'phase', 'b'))
    expect(c.nextUint32()).not.toBe(d.nextUint32())
    expect(deriveSeed('seed-as-string')).toBe(deriveSeed('seed-as-string'))
  })

  test('next() is uniform in [0, 1) and int(n) in [0, n)', () => {
    const r = createRng(7)
    const buckets = new Array(10).fill(0)
    let outside = 0
    for (let i = 0; i < 100000; i++) {
      const x = r.next()
      if (!(x >= 0 && x < 1)) outside++
      else buckets[Math.floor(x * 10)]++
    }
    expect(outside).toBe(0)
    for (const b of buckets) expect(Math.abs(b - 10000)).toBeLessThan(500)
    const ints = new Set(Array.from({ length: 1000 }, () => r.int(3)))
    expect([...ints].sort()).toEqual([0, 1, 2])
  })
})
