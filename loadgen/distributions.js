'use strict'

/**
 * Key distributions over key indices [0, count).
 *
 * Each distribution is turned into an explicit probability mass function over
 * the finite key set and sampled with an alias table (Vose), which is exact
 * and O(1) per draw. Truncation to [0, count) is therefore "redraw until in
 * range" done analytically: mass outside the key set is dropped and the rest
 * renormalised. Hand-set hot keys are mixed in on top (paper 6.4.1: "we
 * manually assigned high hotness to the 5 keys after specifying the
 * probability distributions").
 */

const { InvalidArgumentError } = require('../core/errors')

/** Every `distribution.type` a spec may name (plus the alias `gaussian` for normal). */
const DISTRIBUTION_TYPES = Object.freeze(['uniform', 'sequential', 'normal', 'poisson', 'exponential', 'binomial', 'zipf', 'weights', 'custom'])

/**
 * Unnormalised weights for one distribution over `count` key indices.
 * Parameters are assumed validated (see spec.js).
 * @param {object} dist `{ type, ...params }`
 * @param {number} count
 * @param {(name: string) => number} [indexOf] resolves key names used by `weights` maps
 * @returns {Float64Array}
 */
function baseWeights (dist, count, indexOf) {
  const w = new Float64Array(count)
  switch (dist.type) {
    case 'uniform':
    case 'sequential': // not sampled (workload.js walks the keys in order), but its long-run shape is uniform
      w.fill(1)
      break
    case 'normal': {
      // Rounded normal: key k gets P(k - 0.5 <= X < k + 0.5).
      const mean = dist.mean ?? (count - 1) / 2
      for (let k = 0; k < count; k++) w[k] = normalMass((k - 0.5 - mean) / dist.sd, (k + 0.5 - mean) / dist.sd)
      break
    }
    case 'poisson':
      // log p(k) = log p(k-1) + ln(lambda) - ln(k); exponentiate relative to the mode so large lambda does not underflow.
      fillFromLog(w, (k, prev) => (k === 0 ? -dist.lambda : prev + Math.log(dist.lambda) - Math.log(k)))
      break
    case 'exponential':
      // floor(X) for X ~ Exp(rate) is geometric: P(k) proportional to e^(-rate k).
      for (let k = 0; k < count; k++) w[k] = Math.exp(-dist.rate * k)
      break
    case 'binomial': {
      const n = dist.n ?? count - 1
      const p = dist.p
      if (p === 0) w[0] = 1
      else if (p === 1) { if (n < count) w[n] = 1 } else {
        const logOdds = Math.log(p / (1 - p))
        const upto = Math.min(n, count - 1)
        const logs = new Float64Array(upto + 1)
        logs[0] = n * Math.log(1 - p)
        for (let k = 1; k <= upto; k++) logs[k] = logs[k - 1] + Math.log((n - k + 1) / k) + logOdds
        let max = -Infinity
        for (let k = 0; k <= upto; k++) if (logs[k] > max) max = logs[k]
        for (let k = 0; k <= upto; k++) w[k] = Math.exp(logs[k] - max)
      }
      break
    }
    case 'zipf':
      // Rank r = k + 1 has weight r^-s; key 0 is the most popular.
      for (let k = 0; k < count; k++) w[k] = Math.pow(k + 1, -dist.s)
      break
    case 'weights':
      if (Array.isArray(dist.weights)) {
        for (let k = 0; k < count; k++) w[k] = dist.weights[k]
      } else {
        w.fill(dist.others ?? 0)
        for (const [name, weight] of Object.entries(dist.weights)) w[indexOf(name)] = weight
      }
      break
    case 'custom':
      for (let k = 0; k < count; k++) w[k] = dist.pmf(k, count)
      break
    default:
      throw new InvalidArgumentError(`invalid distribution: unknown type ${dist.type}`)
  }
  return w

  function fillFromLog (out, step) {
    const logs = new Float64Array(count)
    let max = -Infinity
    for (let k = 0; k < count; k++) {
      logs[k] = step(k, k === 0 ? 0 : logs[k - 1])
      if (logs[k] > max) max = logs[k]
    }
    for (let k = 0; k < count; k++) out[k] = Math.exp(logs[k] - max)
  }
}

/**
 * The normalised PMF a phase samples from: the base distribution, plus
 * optional hot keys taking `share` of all requests (split by `weights`).
 * @param {object} dist
 * @param {number} count
 * @param {{ indices: number[], share: number, weights?: number[] } | null} hot
 * @param {(name: string) => number} [indexOf]
 * @returns {Float64Array} sums to 1
 */
function phasePmf (dist, count, hot, indexOf) {
  const base = normalise(baseWeights(dist, count, indexOf))
  if (!hot || hot.share === 0) return base
  const hotW = new Float64Array(count)
  hot.indices.forEach((k, i) => { hotW[k] += hot.weights ? hot.weights[i] : 1 })
  const h = normalise(hotW)
  const out = new Float64Array(count)
  for (let k = 0; k < count; k++) out[k] = (1 - hot.share) * base[k] + hot.share * h[k]
  return out
}

/** Total mass of unnormalised weights (0 means the distribution misses the key set entirely). */
function totalMass (w) {
  let s = 0
  for (let k = 0; k < w.length; k++) s += w[k]
  return s
}

function normalise (w) {
  const s = totalMass(w)
  const out = new Float64Array(w.length)
  for (let k = 0; k < w.length; k++) out[k] = w[k] / s
  return out
}

/**
 * Vose's alias method: O(n) build, two uniform draws per sample.
 * @param {Float64Array} pmf sums to 1
 * @returns {(rng: { next: () => number }) => number} sampler returning a key index
 */
function aliasSampler (pmf) {
  const n = pmf.length
  const prob = new Float64Array(n)
  const alias = new Uint32Array(n)
  const scaled = new Float64Array(n)
  const small = []
  const large = []
  for (let i = 0; i < n; i++) {
    scaled[i] = pmf[i] * n
    ;(scaled[i] < 1 ? small : large).push(i)
  }
  while (small.length && large.length) {
    const s = small.pop()
    const l = large.pop()
    prob[s] = scaled[s]
    alias[s] = l
    scaled[l] = scaled[l] + scaled[s] - 1
    ;(scaled[l] < 1 ? small : large).push(l)
  }
  // Leftovers are 1 up to rounding error.
  for (const i of large) prob[i] = 1
  for (const i of small) prob[i] = 1
  return function sample (rng) {
    const column = Math.min(n - 1, Math.floor(rng.next() * n))
    return rng.next() < prob[column] ? column : alias[column]
  }
}

/** Standard normal mass between z-scores a < b, accurate in both tails. */
function normalMass (a, b) {
  // Use the upper tail where it is small, so far-tail masses do not cancel to 0.
  if (a >= 0) return (erfc(a / Math.SQRT2) - erfc(b / Math.SQRT2)) / 2
  if (b <= 0) return (erfc(-b / Math.SQRT2) - erfc(-a / Math.SQRT2)) / 2
  return 1 - (erfc(-a / Math.SQRT2) + erfc(b / Math.SQRT2)) / 2
}

/** Complementary error function (Numerical Recipes erfcc, fractional error < 1.2e-7). */
function erfc (x) {
  const z = Math.abs(x)
  const t = 1 / (1 + 0.5 * z)
  const r = t * Math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
    t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
    t * (-0.82215223 + t * 0.17087277)))))))))
  return x >= 0 ? r : 2 - r
}

module.exports = { DISTRIBUTION_TYPES, baseWeights, phasePmf, totalMass, aliasSampler }
