'use strict'

const { InvalidArgumentError, UpstreamUnavailableError } = require('../../core/errors')
const appserverLib = require('../../appserver-lib/index.js')
const { defaults: computeDefaults } = require('../../apps/compute')

/**
 * The experiments' capacity model (issues 5 and 10): what makes each app
 * server an independent server with a fixed service rate on a machine where
 * several of them share two cores. It lives here, in bench/, and WRAPS an app
 * (withCapacity): the production apps know nothing about it.
 *
 * - `mode: 'cpu'` is the paper's setup: the app does its real work on the CPU
 *   (compute burns n² iterations) and nothing is wrapped. On a shared machine,
 *   servers borrow each other's idle CPU time, which blurs the imbalance being
 *   measured.
 * - `mode: 'model'`: each app server is a FIFO single-server queue. The real
 *   app runs on arrival (kv-cache really reads its cache and DynamoDB; compute
 *   is created with `work: false`, so it answers without its loop); the
 *   response is held and released at the modelled completion time
 *   max(arrival, previous finish) + service time, where the service time comes
 *   from the request and the app's answer (see MODELS). Arrivals at a busy
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
 * store's latency for a miss (DynamoDB read) or a write (DynamoDB write). A
 * shared miss (answered by a DynamoDB read another GET of the key started)
 * made no store call of its own: it costs what a hit costs.
 * @param {'hit'|'miss'|'shared'|'write'} outcome
 */
function kvServiceMs (outcome, o) {
  return outcome === 'hit' || outcome === 'shared' ? o.kvHitMs : o.kvHitMs + o.kvStoreMs
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
   * @param {number} [arrival] when the request arrived (default: now); never later than now
   * @returns {Promise<{ waitMs: number, serviceMs: number }>} resolves on completion;
   *   rejects with UpstreamUnavailableError (503) past maxQueue
   */
  serve (serviceMs, arrival = this.now()) {
    if (this.length >= this.maxQueue) {
      this.stats.refused++
      return Promise.reject(new UpstreamUnavailableError(`server over capacity: ${this.length} requests queued (capacity.maxQueue)`))
    }
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
 * What a KV response cost: the app's own `X-KV-Outcome` header (hit, miss,
 * shared, write) when it set one. Without it: a GET answered 200 is a hit or a miss by
 * `X-Chopper-Cache`; a GET answered 404 (a key nobody wrote) went to the store,
 * so it is a miss; a 2xx write is a write. Anything else (421 refusals, 4xx,
 * 5xx) is refused without the store and costs nothing.
 * @returns {'hit'|'miss'|'shared'|'write'|null}
 */
function kvOutcome (req, res) {
  const h = res.getHeader('x-kv-outcome')
  if (h === 'hit' || h === 'miss' || h === 'shared' || h === 'write') return h
  // A replica's fence (hold or release of one key around a write on the
  // primary: apps/kv-cache/key-holds.js) is a Redis-only step of someone
  // else's write: no modelled work of its own, so it skips the queue.
  if (h === 'fence') return null
  const status = res.statusCode
  if (req.method === 'GET' || req.method === 'HEAD') {
    if (status === 200) return res.getHeader('x-chopper-cache') === 'hit' ? 'hit' : 'miss'
    return status === 404 ? 'miss' : null
  }
  return status >= 200 && status < 300 ? 'write' : null
}

/** n of GET /compute?n=N (the app's default when absent). */
function computeN (req) {
  const raw = new URL(req.originalUrl || req.url, 'http://x').searchParams.get('n')
  return raw === null ? computeDefaults.defaultN : Number(raw)
}

/**
 * Per app: the service time of a finished request (0 = released at once,
 * outside the queue: a refusal or an error does no modelled work), and the
 * app options that turn off the app's own simulated work in model mode.
 */
const MODELS = Object.freeze({
  compute: Object.freeze({
    serviceMs: (req, res, o) => (res.statusCode === 200 ? computeServiceMs(computeN(req), o) : 0),
    appOptions: Object.freeze({ work: false }) // the modelled server is busy for the loop's time; the shared CPU is not
  }),
  'kv-cache': Object.freeze({
    serviceMs: (req, res, o) => {
      const outcome = kvOutcome(req, res)
      return outcome === null ? 0 : kvServiceMs(outcome, o)
    },
    appOptions: Object.freeze({})
  })
})

// appserver-lib's per-request cost (issue 10, load as busy time). Without it,
// the load reports would count the modelled queueing wait as busy time.
const setRequestCost = typeof appserverLib.setRequestCost === 'function' ? appserverLib.setRequestCost : null
// The app's work is done when it ends its response; only the answer waits for
// the modelled completion, so a handoff need not wait for it either.
const { settleRequest } = appserverLib

/**
 * Wrap an app's request handler so its server is one modelled FIFO server.
 *
 * The wrapper runs in front of the app (behind appserver-lib's shard guard, so
 * a 421 from the guard is never queued). On arrival it stamps the time and
 * lets the app run at once; it intercepts `res.end`, computes the request's
 * service time from the request and the finished response, and releases the
 * response at max(arrival, previous finish) + service time (FifoServer). The
 * modelled service time is also the request's cost for appserver-lib's load
 * reports (setRequestCost). Past `maxQueue` requests in the system, a new one
 * is refused with 503 before the app runs.
 *
 * Jobs enter the queue when the app has answered, not when they arrive, so two
 * requests whose real work finishes in the opposite order of their arrival
 * are served in the order they finished; the formula still uses each one's
 * arrival, so the real work's own time is hidden inside the modelled time.
 *
 * @param {Function} handler the app (an Express app or router)
 * @param {object} options
 * @param {string} [options.app] a key of MODELS (ignored when serviceMs is given)
 * @param {(req, res, o) => number} [options.serviceMs] custom service time in ms
 * @param {object} [options.capacity] capacity options (mode is taken as 'model')
 * @param {() => number} [options.now] clock in ms
 * @param {(req, ms: number) => void|null} [options.reportCost] default: appserver-lib's setRequestCost when it exists
 * @returns {{ app: Function, server: FifoServer, options: object, stats: () => object, close: () => void }}
 */
function withCapacity (handler, { app, serviceMs, capacity = {}, now = () => performance.now(), reportCost = setRequestCost } = {}) {
  if (typeof handler !== 'function') throw new InvalidArgumentError('invalid handler: expected an Express app or request handler')
  const cost = serviceMs || (Object.hasOwn(MODELS, app) ? MODELS[app].serviceMs : null)
  if (typeof cost !== 'function') throw new InvalidArgumentError(`invalid app: expected one of ${Object.keys(MODELS).join(', ')} or a serviceMs function, got ${JSON.stringify(app)}`)
  const o = resolveCapacityOptions({ ...capacity, mode: 'model' })
  const server = new FifoServer({ maxQueue: o.maxQueue, now })
  let inSystem = 0 // admitted, not yet released (in the app, or queued)
  let refused = 0

  function capacityModel (req, res, next) {
    if (inSystem >= o.maxQueue) {
      refused++
      return next(new UpstreamUnavailableError(`server over capacity: ${inSystem} requests in the system (capacity.maxQueue)`))
    }
    const arrival = now()
    inSystem++
    let left = false
    const leave = () => { if (!left) { left = true; inSystem-- } }
    res.once('close', leave) // the client went away: the modelled job still runs, but no longer counts here
    const end = res.end
    res.end = function endAtModelledCompletion (...args) {
      res.end = end // once: whatever end() does next is the real one
      const ms = cost(req, res, o)
      if (reportCost) reportCost(req, ms > 0 ? ms : 0)
      settleRequest(req)
      if (!(ms > 0)) {
        leave()
        return end.apply(res, args)
      }
      const release = () => {
        leave()
        // The time in this server, from arrival to release (its queue, its service, a late timer):
        // the load generator subtracts it to find the time outside the servers (loadgen/server-timing.js).
        if (!res.headersSent) res.setHeader('Server-Timing', `capacity;dur=${(now() - arrival).toFixed(2)}`)
        end.apply(res, args)
      }
      server.serve(ms, arrival).then(release, release)
      return res
    }
    handler(req, res, next)
  }

  return {
    app: capacityModel,
    server,
    options: o,
    stats: () => ({ ...server.stats, refused: server.stats.refused + refused, inSystem }),
    close: () => server.flush()
  }
}

function withoutUndefined (o) {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined))
}

module.exports = { defaults, MODELS, resolveCapacityOptions, computeServiceMs, kvServiceMs, kvOutcome, FifoServer, withCapacity }
