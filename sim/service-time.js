'use strict'

const { InvalidArgumentError } = require('../core/errors')

/** Pareto shape from seed 004 (request sizes in the LC* study). */
const PARETO_ALPHA = 1.37

const TYPES = ['deterministic', 'exponential', 'pareto']

/**
 * A service-time sampler with a given mean (ms).
 *  - deterministic: always `mean`;
 *  - exponential: -mean ln(1 - u);
 *  - pareto: scale xm = mean (alpha - 1) / alpha, x = xm / (1 - u)^(1/alpha)
 *    (alpha must be > 1 for the mean to exist; 1.37 by default, as in seed 004).
 * @param {{ type?: string, mean?: number, alpha?: number }} spec
 * @param {{ next: () => number }} rng loadgen/prng.js createRng
 * @returns {() => number} sampler, ms
 */
function createServiceTime ({ type = 'exponential', mean = 1, alpha = PARETO_ALPHA } = {}, rng) {
  if (!TYPES.includes(type)) throw new InvalidArgumentError(`invalid service.type: expected one of ${TYPES.join(', ')}, got ${JSON.stringify(type)}`)
  if (!(typeof mean === 'number' && Number.isFinite(mean) && mean > 0)) throw new InvalidArgumentError(`invalid service.mean: expected a number of ms > 0, got ${JSON.stringify(mean)}`)
  if (type === 'deterministic') return () => mean
  if (!rng || typeof rng.next !== 'function') throw new InvalidArgumentError('a seeded rng is required for random service times')
  if (type === 'exponential') return () => -mean * Math.log(1 - rng.next())
  if (!(typeof alpha === 'number' && alpha > 1)) throw new InvalidArgumentError(`invalid service.alpha: expected a number > 1 (the mean is infinite otherwise), got ${JSON.stringify(alpha)}`)
  const xm = (mean * (alpha - 1)) / alpha
  const inv = 1 / alpha
  return () => xm / Math.pow(1 - rng.next(), inv)
}

module.exports = { createServiceTime, PARETO_ALPHA, SERVICE_TYPES: TYPES }
