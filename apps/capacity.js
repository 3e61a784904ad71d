'use strict'

const { InvalidArgumentError, UpstreamUnavailableError } = require('../core/errors')

/**
 * The capacity model (issue 5): what makes each app server an independent
 * server with a fixed service rate on a machine where several of them share
 * two cores.
 *
 * - `mode: 'cpu'` (the default) is the paper's setup: the app does its real
 *   work on the CPU (compute burns n² iterations). On a shared machine, servers
 *   borrow each other's idle CPU time, which blurs the imbalance being measured.
 * - `mode: 'model'`: each app server is a FIFO single-server queue. A request's
 *   service time comes from its work (see computeServiceMs and kvServiceMs) and
 *   is completed on a timer, not by burning the shared CPU. Arrivals at a busy
 *   server wait their turn, so an overloaded server's queue grows exactly as a
 *   real one with that service rate would.
 *
 * The default figures put one modelled server at about 250 req/s for the
 * paper's workloads (compute with n = 1000: 4 ms; KV with 80 % cached gets:
 * 0.8 × 3 ms + 0.2 × 8 ms = 4 ms). bench/experiments/README.md states the
 * scale factor against the paper's AWS servers.
 */
const defaults = Object.freeze({
  mode: 'cpu', // 'cpu' | 'model'
  computeMsPerMillionOps: 4, // compute: service time = n² / 1e6 × this (n = 1000 → 4 ms)
  kvHitMs: 3, // KV: a GET answered from the cache
  kvStoreMs: 5, // KV: added to a hit's time when DynamoDB is involved (a miss's read, a write)
  maxQueue: 100000 // requests waiting at one server; past it the server refuses (memory guard, not a policy)
})

const MODES = ['cpu', 'model']

/**
 * Validate capacity options (merged over `defaults`); throws
 * InvalidArgumentError naming the option.
 * @param {object} [options]
 * @returns {typeof defaults}
 */
function resolveCapacityOptions (options = {}) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new InvalidArgumentError('invalid capacity: expected an object like { mode: \'model\' }')
  for (const k of Object.keys(options)) {
    if (!(k in defaults)) throw new InvalidArgumentError(`invalid capacity.${k}: unknown option (expected one of ${Object.keys(defaults).join(', ')})`)
  }
  const o = { ...defaults, ...withoutUndefined(options) }
  if (!MODES.includes(o.mode)) throw new InvalidArgumentError(`invalid capacity.mode: expected one of ${MODES.join(', ')}, got ${JSON.stringify(o.mode)}`)
  for (const k of ['computeMsPerMillionOps', 'kvHitMs', 'kvStoreMs']) {
    if (!(typeof o[k] === 'number' && Number.isFinite(o[k]) && o[k] >= 0)) throw new InvalidArgumentError(`invalid capacity.${k}: expected a number of milliseconds >= 0, got ${JSON.stringify(o[k])}`)
  }
  if (!(Number.isInteger(o.maxQueue) && o.maxQueue >= 1)) throw new InvalidArgumentError(`invalid capacity.maxQueue: expected an integer >= 1, got ${JSON.stringify(o.maxQueue)}`)
  return o
}

/** Modelled service time of GET /compute?n=N: the paper's O(N²) loop. */
function computeServiceMs (n, o) {
  return (n * n / 1e6) * o.computeMsPerMillionOps
}

/**
 * Modelled service time of one KV request: a cache hit, or a hit plus the
 * store's latency for a miss (DynamoDB read) or a write (DynamoDB write).
 * @param {'hit'|'miss'|'write'} outcome
 */
function kvServiceMs (outcome, o) {
  return outcome === 'hit' ? o.kvHitMs : o.kvHitMs + o.kvStoreMs
}

/**
 * One modelled server: a FIFO single-server queue.
 *
 * Completion times are computed, not measured: job i finishes at
 * max(arrival_i, finish_{i-1}) + service_i. One timer waits for the head; when
 * it fires (possibly late, on a busy event loop) it completes every job whose
 * finish time has passed, in order. So a late timer delays a response but never
 * lowers the service rate, and responses leave in arrival order.
 */
class FifoServer {
  /**
   * @param {object} [options]
   * @param {number} [options.maxQueue]
   * @param {() => number} [options.now] clock in ms (tests may inject one)
   */
  constructor ({ maxQueue = defaults.maxQueue, now = () => performance.now() } = {}) {
    this.maxQueue = maxQueue
    this.now = now
    this.queue = [] // { finish, resolve }
    this.head = 0
    this.lastFinish = 0
    this.timer = null
    this.stats = { served: 0, refused: 0, busyMs: 0, peakQueue: 0 }
  }

  /** Requests admitted and not yet completed (including the one in service). */
  get length () {
    return this.queue.length - this.head
  }

  /**
   * Occupy the server for `serviceMs` after every request ahead of this one.
   * @param {number} serviceMs
   * @returns {Promise<{ waitMs: number, serviceMs: number }>} resolves on completion;
   *   rejects with UpstreamUnavailableError (503) past maxQueue
   */
  serve (serviceMs) {
    if (this.length >= this.maxQueue) {
      this.stats.refused++
      return Promise.reject(new UpstreamUnavailableError(`server over capacity: ${this.length} requests queued (capacity.maxQueue)`))
    }
    const arrival = this.now()
    const start = Math.max(arrival, this.lastFinish)
    const finish = start + serviceMs
    this.lastFinish = finish
    this.stats.busyMs += serviceMs
    return new Promise((resolve) => {
      this.queue.push({ finish, resolve, waitMs: start - arrival, serviceMs })
      if (this.length > this.stats.peakQueue) this.stats.peakQueue = this.length
      if (this.length === 1) this.#arm()
    })
  }

  #arm () {
    const job = this.queue[this.head]
    this.timer = setTimeout(() => this.#drain(), Math.max(0, job.finish - this.now()))
  }

  #drain () {
    this.timer = null
    const now = this.now()
    // A timer can fire a little early against performance.now(); a job not yet due is re-armed (never completed early).
    while (this.head < this.queue.length && this.queue[this.head].finish <= now + 0.01) {
      const job = this.queue[this.head++]
      this.stats.served++
      job.resolve({ waitMs: job.waitMs, serviceMs: job.serviceMs })
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head)
      this.head = 0
    }
    if (this.length > 0) this.#arm()
  }

  /** Complete everything still queued at once (on shutdown, so no request hangs). */
  flush () {
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
    while (this.head < this.queue.length) this.queue[this.head++].resolve({ waitMs: 0, serviceMs: 0, flushed: true })
    this.queue = []
    this.head = 0
    this.lastFinish = 0
  }
}

/**
 * The capacity an app instance runs with.
 * @param {object} [options] see `defaults`
 * @returns {{ options, modelled: boolean, server: FifoServer|null, serve: (ms: number) => Promise<void>, close: () => void }}
 *   `serve` resolves at once in cpu mode
 */
function createCapacity (options) {
  const o = resolveCapacityOptions(options)
  if (o.mode === 'cpu') return { options: o, modelled: false, server: null, serve: async () => {}, close () {} }
  const server = new FifoServer({ maxQueue: o.maxQueue })
  return { options: o, modelled: true, server, serve: (ms) => server.serve(ms), close: () => server.flush() }
}

function withoutUndefined (o) {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined))
}

module.exports = { defaults, resolveCapacityOptions, createCapacity, computeServiceMs, kvServiceMs, FifoServer }
