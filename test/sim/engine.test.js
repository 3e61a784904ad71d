'use strict'

const { createEngine } = require('../../sim/engine')
const { createServiceTime, PARETO_ALPHA } = require('../../sim/service-time')
const { createRng } = require('../../loadgen/prng')
const { InvalidArgumentError } = require('../../core/errors')

describe('sim engine', () => {
  test('runs events in time order, ties in scheduling order', () => {
    const e = createEngine()
    const seen = []
    const push = (label) => seen.push(`${label}@${e.now}`)
    for (const [t, label] of [[5, 'a'], [1, 'b'], [3, 'c'], [3, 'd'], [0.25, 'e'], [9, 'f'], [3, 'g']]) e.at(t, push, label)
    e.run()
    expect(seen).toEqual(['e@0.25', 'b@1', 'c@3', 'd@3', 'g@3', 'a@5', 'f@9'])
  })

  test('events scheduled while running keep the order; run(until) stops and sets the clock', () => {
    const e = createEngine()
    const seen = []
    e.at(1, () => { seen.push('x'); e.after(0, () => seen.push('x0')); e.after(2, () => seen.push('x2')) })
    e.at(1, () => seen.push('y'))
    e.at(10, () => seen.push('late'))
    expect(e.run(5)).toBe(4)
    expect(seen).toEqual(['x', 'y', 'x0', 'x2'])
    expect(e.now).toBe(5)
    expect(e.size).toBe(1)
    expect(() => e.at(4, () => {})).toThrow(InvalidArgumentError)
  })

  test('a large random schedule comes out sorted', () => {
    const e = createEngine()
    const rng = createRng(7)
    const times = []
    for (let i = 0; i < 20000; i++) {
      const t = rng.next() * 1000
      e.at(t, (at) => { expect(e.now).toBe(at); times.push(at) }, t)
    }
    let last = -1
    let sorted = true
    e.run()
    for (const t of times) { if (t < last) sorted = false; last = t }
    expect(times).toHaveLength(20000)
    expect(sorted).toBe(true)
  })
})

describe('service-time distributions', () => {
  const N = 400000
  const sampleMean = (f) => { let s = 0; for (let i = 0; i < N; i++) s += f(); return s / N }

  test('deterministic is the mean', () => {
    const f = createServiceTime({ type: 'deterministic', mean: 4 })
    expect(f()).toBe(4)
  })

  test('exponential: mean within 1 %', () => {
    const f = createServiceTime({ type: 'exponential', mean: 4 }, createRng(1))
    expect(Math.abs(sampleMean(f) / 4 - 1)).toBeLessThan(0.01)
  })

  test('pareto alpha 1.37: median exact to 1 %, heavy-tailed mean within 10 %', () => {
    const mean = 4
    const f = createServiceTime({ type: 'pareto', mean }, createRng(2))
    const xs = new Float64Array(N)
    for (let i = 0; i < N; i++) xs[i] = f()
    const xm = (mean * (PARETO_ALPHA - 1)) / PARETO_ALPHA
    xs.sort()
    expect(Math.min(...xs.subarray(0, 10))).toBeGreaterThanOrEqual(xm)
    expect(Math.abs(xs[N / 2] / (xm * Math.pow(2, 1 / PARETO_ALPHA)) - 1)).toBeLessThan(0.01)
    // infinite variance: the sample mean converges slowly, hence the wider band
    expect(Math.abs(xs.reduce((a, b) => a + b, 0) / N / mean - 1)).toBeLessThan(0.1)
  })

  test('bad options name the option', () => {
    expect(() => createServiceTime({ type: 'weibull' })).toThrow(/service.type/)
    expect(() => createServiceTime({ type: 'pareto', mean: 1, alpha: 1 }, createRng(1))).toThrow(/service.alpha/)
    expect(() => createServiceTime({ mean: -1 })).toThrow(/service.mean/)
  })
})
