'use strict'

const { generate } = require('../loadgen/workload')
const { aliasSampler } = require('../loadgen/distributions')
const { sliceKey } = require('../core/keyspace')
const { InvalidArgumentError } = require('../core/errors')

const ARRIVALS = ['poisson', 'constant']

/**
 * A loadgen spec compiled for the simulator. loadgen's own generator
 * (loadgen/workload.js) is used for validation, the phase schedule, key
 * names and each phase's exact PMF, so a scenario means the same thing here
 * as against the live cluster. The simulator draws keys from that PMF with
 * loadgen's alias sampler and its own seeded stream, because with
 * `rateScale` != 1 it needs more (or fewer) requests than loadgen would send.
 *
 * Not modelled: the get/set/delete mix and value sizes (every request costs
 * one service time), and the `sequential` distribution's order (it is drawn
 * from its long-run shape, uniform).
 * @param {object} spec loadgen spec (raw or normalised)
 * @param {{ rateScale?: number, arrivals?: 'poisson'|'constant', durationMs?: number }} [o]
 */
function compileWorkload (spec, { rateScale = 1, arrivals = 'poisson', durationMs } = {}) {
  if (!(typeof rateScale === 'number' && rateScale > 0 && Number.isFinite(rateScale))) throw new InvalidArgumentError(`invalid rateScale: expected a number > 0, got ${JSON.stringify(rateScale)}`)
  if (!ARRIVALS.includes(arrivals)) throw new InvalidArgumentError(`invalid arrivals: expected one of ${ARRIVALS.join(', ')}, got ${JSON.stringify(arrivals)}`)
  if (durationMs !== undefined && !(typeof durationMs === 'number' && durationMs > 0)) throw new InvalidArgumentError(`invalid durationMs: expected a number > 0, got ${JSON.stringify(durationMs)}`)
  const w = generate(spec)
  const keyCache = new Map() // key-set identity (first and last names + count) -> slice keys, shared by phases with the same keys
  const phases = []
  for (const p of w.phases) {
    if (durationMs !== undefined && p.startMs >= durationMs) break
    const pmf = w.pmf(p.index)
    const name = (k) => w.keyName(p.index, k)
    const id = `${p.keyCount}\0${name(0)}\0${name(p.keyCount - 1)}`
    let keys = keyCache.get(id)
    if (!keys) {
      keys = new Uint32Array(p.keyCount)
      for (let k = 0; k < p.keyCount; k++) keys[k] = sliceKey(name(k))
      keyCache.set(id, keys)
    }
    const end = durationMs !== undefined ? Math.min(p.startMs + p.durationMs, durationMs) : p.startMs + p.durationMs
    phases.push({
      index: p.index,
      name: p.name,
      startMs: p.startMs,
      endMs: end,
      durationMs: end - p.startMs,
      rate: p.rate * rateScale, // req/s
      keyCount: p.keyCount,
      pmf,
      keyName: name,
      sliceKeys: keys,
      sample: aliasSampler(pmf)
    })
  }
  return {
    name: w.spec.name,
    seed: w.seed,
    arrivals,
    rateScale,
    phases,
    durationMs: phases.length ? phases[phases.length - 1].endMs : 0
  }
}

module.exports = { compileWorkload, ARRIVALS }
