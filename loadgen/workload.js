'use strict'

const { validateSpec } = require('./spec')
const { InvalidArgumentError } = require('../core/errors')
const { phasePmf, aliasSampler } = require('./distributions')
const { createKeySet } = require('./key-set')
const { createRng, deriveSeed } = require('./prng')

/** HTTP method for each operation of a phase's mix. */
const METHODS = Object.freeze({ get: 'GET', set: 'PUT', delete: 'DELETE' })

/**
 * Turn a workload spec into a deterministic request sequence.
 *
 * Nothing is materialised up front: a 360 s phase at 3500 req/s is 1.26 M
 * requests, so `requests(phase)` is a generator the driver pulls from on
 * schedule. Each phase has its own PRNG stream seeded by (seed, phase name),
 * so the same spec always yields the same sequence, and editing one phase
 * does not change the others.
 *
 * Request `i` of a phase is due at `offsetMs = phase.startMs + i * 1000 / rate`
 * from the start of the run: the constant-rate schedule the driver keeps.
 * @param {object} spec raw or normalised spec (validated here)
 * @returns {Workload}
 */
function generate (spec) {
  const s = validateSpec(spec)
  let startMs = 0
  const compiled = s.phases.map((p, index) => {
    const keySet = createKeySet(p.keys, s.seed)
    const hot = p.hot && {
      share: p.hot.share,
      weights: p.hot.weights,
      indices: p.hot.keys.map((k) => (typeof k === 'number' ? k : keySet.indexOf(k)))
    }
    const pmf = phasePmf(p.distribution, keySet.count, hot, keySet.indexOf)
    const durationMs = p.duration * 1000
    const phase = {
      index,
      name: p.name,
      rate: p.rate,
      durationMs,
      startMs,
      requests: Math.round(p.duration * p.rate),
      path: p.path,
      contentType: p.contentType,
      keyCount: keySet.count,
      mix: p.mix,
      value: p.value,
      keySet,
      pmf,
      sample: aliasSampler(pmf)
    }
    startMs += durationMs
    return phase
  })

  function * requests (phaseIndex) {
    const ph = compiled[phaseIndex]
    if (!ph) throw new InvalidArgumentError(`invalid phase index: expected 0 to ${compiled.length - 1}, got ${phaseIndex}`)
    const rng = createRng(deriveSeed(s.seed, 'phase', ph.name))
    const getBelow = ph.mix.get
    const setBelow = ph.mix.get + ph.mix.set
    const { min, max } = ph.value
    const intervalMs = 1000 / ph.rate
    // 'sequential' walks the keys in order (key-0, key-1, ...), e.g. to preload every key once before a KV test.
    const sequential = s.phases[phaseIndex].distribution.type === 'sequential'
    for (let seq = 0; seq < ph.requests; seq++) {
      const keyIndex = sequential ? seq % ph.keyCount : ph.sample(rng)
      const u = rng.next()
      const op = u < getBelow ? 'get' : u < setBelow || ph.mix.delete === 0 ? 'set' : 'delete'
      const key = ph.keySet.name(keyIndex)
      yield {
        phase: phaseIndex,
        seq,
        offsetMs: ph.startMs + seq * intervalMs,
        method: METHODS[op],
        key,
        keyIndex,
        valueSize: op === 'set' ? min + rng.int(max - min + 1) : 0,
        path: ph.path.replaceAll('{key}', encodeURIComponent(key))
      }
    }
  }

  return {
    spec: s,
    seed: s.seed,
    /** Public per-phase facts (schedule, sizes); no samplers. */
    phases: compiled.map(({ keySet, pmf, sample, ...pub }) => pub),
    durationMs: startMs,
    totalRequests: compiled.reduce((n, p) => n + p.requests, 0),
    requests,
    /** The exact probability of each key index in a phase (for tests and `loadgen validate`). */
    pmf: (phaseIndex) => compiled[phaseIndex].pmf,
    keyName: (phaseIndex, keyIndex) => compiled[phaseIndex].keySet.name(keyIndex),
    * [Symbol.iterator] () {
      for (let i = 0; i < compiled.length; i++) yield * requests(i)
    }
  }
}

/**
 * @typedef {object} Workload
 * @property {object} spec normalised spec
 * @property {Array<{index:number,name:string,rate:number,durationMs:number,startMs:number,requests:number,path:string,contentType:string,keyCount:number,mix:object,value:object}>} phases
 * @property {number} durationMs
 * @property {number} totalRequests
 * @property {(phase: number) => Generator<Request>} requests
 * @property {(phase: number) => Float64Array} pmf
 * @property {(phase: number, keyIndex: number) => string} keyName
 */

/**
 * @typedef {object} Request
 * @property {number} phase
 * @property {number} seq index within the phase
 * @property {number} offsetMs intended send time from the start of the run
 * @property {'GET'|'PUT'|'DELETE'} method
 * @property {string} key
 * @property {number} keyIndex
 * @property {number} valueSize body bytes (PUT only, else 0)
 * @property {string} path
 */

module.exports = { generate, METHODS }
