'use strict'

const { InvalidArgumentError } = require('../core/errors')
const { createServiceTime } = require('./service-time')

/** Every default of a modelled app server, in one place. */
const SERVER_DEFAULTS = Object.freeze({
  capacity: 1, // parallel service slots; requests beyond them wait in one FIFO queue
  service: Object.freeze({ type: 'exponential', mean: 1 }), // ms; see service-time.js
  missCost: 3, // a cold key's request takes missCost x its sampled service time
  warmAfter: 1, // requests a key needs on this server before it is warm
  warmKeys: 100000 // bound on the warm set (least recently used keys are forgotten first)
})

/**
 * A modelled app server in virtual time. Key churn cost: a key this server
 * has not served (recently) is cold, so its first `warmAfter` requests run at
 * `missCost` times the sampled service time; the warm set is a bounded LRU
 * (a Map in insertion order, re-inserted on each hit). A key whose slice moves
 * to this server is therefore cold here; a key that moves away and back is
 * still warm if it has not been evicted (a cache that was not flushed).
 */
class SimServer {
  /**
   * @param {object} o
   * @param {string} o.id
   * @param {import('./engine').Engine} o.engine
   * @param {{ next: () => number }} o.rng
   * @param {(req: object, server: SimServer) => void} [o.onComplete]
   */
  constructor ({ id, engine, rng, onComplete = () => {}, ...opts }) {
    const o = resolveServerOptions(opts)
    this.id = id
    this.engine = engine
    this.capacity = o.capacity
    this.missCost = o.missCost
    this.warmAfter = o.warmAfter
    this.warmKeys = o.warmKeys
    this.sample = createServiceTime(o.service, rng)
    this.onComplete = onComplete
    this.busy = 0
    this.queue = [] // FIFO; head index avoids O(n) shifts
    this.head = 0
    this.warm = new Map() // key -> requests served here
    this.served = 0
    this.misses = 0
    this.busyMs = 0
    this._done = (req) => this._complete(req)
  }

  /** Requests waiting, not in service. */
  get queued () { return this.queue.length - this.head }

  /** A request arrives now: `{ key, arrivedAt }` (other fields are kept). */
  arrive (req) {
    if (this.busy < this.capacity) this._start(req)
    else this.queue.push(req)
  }

  _start (req) {
    this.busy++
    let t = this.sample()
    const n = this.warm.get(req.key)
    if (n === undefined || n < this.warmAfter) {
      t *= this.missCost
      req.miss = true
      this.misses++
    }
    // LRU touch
    if (n !== undefined) this.warm.delete(req.key)
    this.warm.set(req.key, (n || 0) + 1)
    if (this.warm.size > this.warmKeys) this.warm.delete(this.warm.keys().next().value)
    req.startedAt = this.engine.now
    req.serviceMs = t
    this.busyMs += t
    this.engine.after(t, this._done, req)
  }

  _complete (req) {
    this.busy--
    this.served++
    req.doneAt = this.engine.now
    this.onComplete(req, this)
    if (this.head < this.queue.length) {
      const next = this.queue[this.head]
      this.queue[this.head++] = undefined
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head)
        this.head = 0
      }
      this._start(next)
    }
  }
}

/** Merge and validate server options; errors name the option. */
function resolveServerOptions (opts = {}) {
  const o = { ...SERVER_DEFAULTS, ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)) }
  o.service = { ...SERVER_DEFAULTS.service, ...(opts.service || {}) }
  for (const k of Object.keys(o)) if (!Object.hasOwn(SERVER_DEFAULTS, k)) throw new InvalidArgumentError(`unknown server option ${k} (valid options: ${Object.keys(SERVER_DEFAULTS).join(', ')})`)
  if (!(Number.isInteger(o.capacity) && o.capacity >= 1)) throw new InvalidArgumentError(`invalid server option capacity: expected an integer >= 1, got ${JSON.stringify(o.capacity)}`)
  if (!(typeof o.missCost === 'number' && o.missCost >= 1)) throw new InvalidArgumentError(`invalid server option missCost: expected a number >= 1, got ${JSON.stringify(o.missCost)}`)
  if (!(Number.isInteger(o.warmAfter) && o.warmAfter >= 0)) throw new InvalidArgumentError(`invalid server option warmAfter: expected an integer >= 0, got ${JSON.stringify(o.warmAfter)}`)
  if (!(Number.isInteger(o.warmKeys) && o.warmKeys >= 1)) throw new InvalidArgumentError(`invalid server option warmKeys: expected an integer >= 1, got ${JSON.stringify(o.warmKeys)}`)
  return o
}

module.exports = { SimServer, SERVER_DEFAULTS, resolveServerOptions }
