'use strict'

const { createRng, deriveSeed } = require('../../loadgen/prng')
const { uniqueValue } = require('../../history')

/**
 * A linearizable history by construction: `clients` clients each run ops back
 * to back with random gaps and durations, every op takes effect at a random
 * instant inside its interval, and the effects are applied in instant order to
 * a true sequential register per key, which fixes what each get returned.
 * Some writes time out (ok: false) and then land at a random later instant or
 * never; some gets fail (ok: false) and some writes fail definitely ('failed').
 * Everything comes from a seeded xoshiro128** stream, never Math.random.
 */
function simulate ({ seed = 1, ops = 5000, keys = 20, clients = 8, indeterminate = 0.03, failed = 0.02, lateness = 3 } = {}) {
  const rng = createRng(deriveSeed(seed, 'history-sim'))
  const history = []
  const effects = [] // { at, h } in linearization order once sorted
  const perClient = Math.ceil(ops / clients)
  for (let c = 0; c < clients; c++) {
    const client = `c${c}`
    let t = rng.next()
    let seq = 0
    for (let j = 0; j < perClient && history.length < ops; j++) {
      const call = t + rng.next() * 0.5
      const ret = call + 0.05 + rng.next() * rng.next() * 4 // mostly short, a few long
      t = ret
      const key = `k${rng.int(keys)}`
      const r = rng.next()
      const op = r < 0.5 ? 'get' : r < 0.9 ? 'put' : 'delete'
      const h = { client, key, op, value: op === 'put' ? uniqueValue(client, seq++) : op === 'get' ? null : undefined, call, ret, ok: true }
      const fate = rng.next()
      if (fate < failed) {
        h.ok = op === 'get' ? false : 'failed' // a failed get observed nothing; a failed write did nothing
      } else if (fate < failed + indeterminate && op !== 'get') {
        h.ok = false // the client timed out; the write lands later or never
        if (rng.next() < 0.5) effects.push({ at: call + rng.next() * (ret - call) * lateness, h })
      } else {
        effects.push({ at: call + rng.next() * (ret - call), h })
      }
      history.push(h)
    }
  }
  effects.sort((a, b) => a.at - b.at)
  const register = new Map()
  for (const { h } of effects) {
    if (h.op === 'put') register.set(h.key, h.value)
    else if (h.op === 'delete') register.delete(h.key)
    else h.value = register.has(h.key) ? register.get(h.key) : null
  }
  return history
}

/**
 * Plant a stale read: pick a get that started after an acknowledged write W,
 * and make it return the value of a write that had finished before W began.
 * That value is unique, so no linearization can explain the read.
 * @returns {number} index of the mutated get
 */
function plantStaleRead (history, seed = 1) {
  const rng = createRng(deriveSeed(seed, 'plant-stale'))
  const start = rng.int(history.length)
  for (let k = 0; k < history.length; k++) {
    const g = (start + k) % history.length
    const get = history[g]
    if (get.op !== 'get' || get.ok !== true) continue
    const acked = history.filter((w) => w.key === get.key && w.op !== 'get' && w.ok === true && w.ret < get.call)
    for (const w of acked) {
      const old = acked.find((p) => p.op === 'put' && p.ret < w.call && p.value !== get.value)
      if (old) {
        history[g] = { ...get, value: old.value }
        return g
      }
    }
  }
  throw new Error('no get to plant a stale read in')
}

module.exports = { simulate, plantStaleRead }
