'use strict'

const { performance } = require('node:perf_hooks')
const { choose, leastConnected, checkPolicy, DEFER, ReplicaLoad } = require('./replica-choice')
const { InvalidArgumentError } = require('./errors')
const { WaitList } = require('./wait-list')

/**
 * A router's side of replica choice (the front end's and the client's) (docs/replication.md, "Routing"):
 * which server takes a request, and the per-server counters the policies
 * read (core/replica-choice.js).
 *
 * Servers get small integer slots, stable across maps, so a request that
 * started under one map ends on the right counter under the next. Per map,
 * each slice gets its default target (the primary, or the first holder when
 * the primary does not admit the slice yet; the primary when nobody admits
 * it) and, when several servers admit it, its candidate slots. Reads of a
 * replicated slice choose among the candidates; everything else goes to the
 * target. `pick` allocates nothing.
 *
 * Every forwarding attempt is counted: begin when dispatched, end exactly
 * once when the upstream exchange is over, whatever the outcome
 * (core/forwarder.js calls both). The counters are this process's own:
 * several front ends, or node:cluster workers, do not see each other's
 * requests (the caveat of seed 003). So every answer from an app server
 * carries how many requests that server holds (appserver-lib's
 * X-Chopper-Inflight header), and `report` keeps the part that is not ours;
 * for `reportTtlMs` after it, the policies count it with our own
 * (core/replica-choice.js, ReplicaLoad.seen).
 *
 * LC* defers a long request when every candidate runs a long job: it waits,
 * in arrival order, until a long job on one of its candidates ends or the map
 * changes, then chooses again; at most `maxDeferred` wait, each at most
 * `maxWaitMs`, and after that (or when the queue is full) it goes to the
 * least connected candidate.
 */
class ReplicaRouter {
  /**
   * @param {object} options
   * @param {string} [options.policy] core/replica-choice.js POLICIES
   * @param {(req) => number} [options.sizeOf] a request's estimated size (jsq, lcstar)
   * @param {number} [options.longThreshold] sizes at or above it are long jobs (lcstar)
   * @param {number} [options.maxDeferred] LC*: long requests waiting at once, at most
   * @param {number} [options.maxWaitMs] LC*: how long one waits, at most
   * @param {() => number} [options.rng]
   * @param {number} [options.reportTtlMs] how long a server's report of its requests counts; 0: own counts only
   * @param {boolean} [options.reportDecay] count a report's other requests as done over one answer time (ReplicaLoad)
   */
  constructor ({ policy = 'p2c', sizeOf, longThreshold = Infinity, maxDeferred = 1024, maxWaitMs = 1000, rng = Math.random, reportTtlMs = 250, reportDecay = true } = {}) {
    checkPolicy(policy, 'replicaChoice')
    if (sizeOf !== undefined && typeof sizeOf !== 'function') throw new InvalidArgumentError('invalid sizeOf: expected a function (req) => number')
    if (!Number.isInteger(maxDeferred) || maxDeferred < 0) throw new InvalidArgumentError('invalid lcstarMaxDeferred: expected an integer >= 0')
    if (!Number.isInteger(maxWaitMs) || maxWaitMs < 0) throw new InvalidArgumentError('invalid lcstarMaxWaitMs: expected an integer >= 0')
    this.policy = policy
    if (typeof reportTtlMs !== 'number' || !Number.isFinite(reportTtlMs) || reportTtlMs < 0) throw new InvalidArgumentError('invalid serverReportTtlMs: expected a number of ms >= 0')
    if (typeof reportDecay !== 'boolean') throw new InvalidArgumentError('invalid serverReportDecay: expected true or false')
    this.load = new ReplicaLoad({ longThreshold, reportTtlMs, reportDecay })
    this.reports = false // a server has reported its load: choices read the clock
    // Sizes matter to jsq and lcstar only; the others count every request as 1.
    this.needsSize = sizeOf !== undefined && (policy === 'jsq' || policy === 'lcstar')
    this.sizeOf = sizeOf || one
    this.maxDeferred = maxDeferred
    this.maxWaitMs = maxWaitMs
    this.rng = rng
    this.slots = new Map() // server id -> slot
    this.ids = [] // slot -> server id
    this.free = []
    this.map = null
    this.target = null // Int32Array: slot per slice for writes and single-admitter slices
    this.primary = null // Int32Array: slot of each slice's primary
    this.candidates = null // per slice: Int32Array of admitter slots when >= 2 admit it, else null
    this.waiting = new WaitList() // LC*: deferred long requests, oldest first, tagged with their candidates
    this.stats = { deferred: 0, dispatched: 0, timedOut: 0, overflowed: 0, suspected: 0, avoided: 0 }
    // A replica that refused a connection has nothing in flight, so p2c would
    // keep choosing it until the controller drops it (its lease, 1.5 s): for
    // `suspectMs` after a refusal, reads go to the other replicas instead.
    this.suspectMs = 1000
    this.suspectUntil = new Map() // server id -> Date.now() until which it is avoided
    this.suspectHorizon = 0 // the latest of those: no clock read on the hot path once it passed
    this.toPrimary = null
    this.toOther = null
    this.deferredMetric = null
  }

  /** Count choices and deferrals in the front end's metrics (frontend/metrics.js). */
  attachMetrics (metrics) {
    // Label lookups hash per call in prom-client: keep the children.
    this.toPrimary = metrics.replicaChoices.labels('primary')
    this.toOther = metrics.replicaChoices.labels('other')
    this.deferredMetric = metrics.replicaDeferred
  }

  /** The size of `req` when the policy uses sizes, else 1. */
  sizeFor (req) {
    return this.needsSize ? this.sizeOf(req) : 1
  }

  #slot (id) {
    let s = this.slots.get(id)
    if (s === undefined) {
      s = this.free.length > 0 ? this.free.pop() : this.ids.length
      this.slots.set(id, s)
      this.ids[s] = id
      this.load.ensure(s + 1)
      this.load.reset(s)
    }
    return s
  }

  /** Build the per-map tables (once per map; pushes are rare, requests are not). */
  sync (map) {
    if (map === this.map) return
    const n = map.size
    const target = new Int32Array(n)
    const primary = new Int32Array(n)
    const candidates = new Array(n).fill(null)
    for (let i = 0; i < n; i++) {
      const owner = map.owners[i]
      const admitters = map.admitters[i]
      primary[i] = this.#slot(owner)
      target[i] = admitters.length === 0 || admitters.includes(owner) ? primary[i] : this.#slot(admitters[0])
      if (admitters.length > 1) {
        const c = new Int32Array(admitters.length)
        for (let p = 0; p < admitters.length; p++) c[p] = this.#slot(admitters[p])
        candidates[i] = c
      }
    }
    // Free the slots of servers that left once nothing is in flight on them.
    const live = map.assignment.servers
    for (const [id, s] of this.slots) {
      if (Object.hasOwn(live, id) || this.load.inflight[s] !== 0) continue
      this.slots.delete(id)
      this.ids[s] = undefined
      this.free.push(s)
    }
    this.map = map
    this.target = target
    this.primary = primary
    this.candidates = candidates
    // Waiting requests choose again under the new map.
    this.waiting.wakeAll()
  }

  /**
   * The slot of the server for a request to slice `i` of `map`, or DEFER
   * (LC*: wait with `place`). `avoid`: server ids not to take while another
   * candidate exists (they answered 421 or were unreachable for this request).
   */
  pick (map, i, read, size, avoid) {
    if (map !== this.map) this.sync(map)
    const c = read ? this.candidates[i] : null
    if (c === null) return this.target[i]
    if (this.reports) this.load.now = performance.now()
    let pos = choose(this.policy, c, this.load, size, this.rng)
    if (avoid !== undefined && pos !== DEFER && avoid.includes(this.ids[c[pos]])) {
      const other = this.#other(c, avoid)
      if (other !== -1) pos = other
    }
    if (this.suspectHorizon !== 0 && pos !== DEFER) pos = this.#unsuspected(c, pos, avoid)
    if (pos === DEFER) return DEFER
    const slot = c[pos]
    if (this.toPrimary !== null) (slot === this.primary[i] ? this.toPrimary : this.toOther).inc()
    return slot
  }

  /**
   * The slot of server `id`, one of the current map's servers, for an attempt
   * the map does not choose (a 421's owner hint, core/key-router.js): its
   * requests are counted like any other.
   */
  slotOf (id) {
    return this.#slot(id)
  }

  /** Avoid server `id` for reads of replicated slices for a while: it refused a connection. */
  suspect (id) {
    const until = Date.now() + this.suspectMs
    this.suspectUntil.set(id, until)
    this.suspectHorizon = Math.max(this.suspectHorizon, until)
    this.stats.suspected++
  }

  /** `pos`, or the least connected candidate neither suspected nor in `avoid` when `pos` is suspected (and one exists). */
  #unsuspected (c, pos, avoid) {
    const now = Date.now()
    if (now >= this.suspectHorizon) {
      this.suspectHorizon = 0
      this.suspectUntil.clear()
      return pos
    }
    const bad = (id) => (this.suspectUntil.get(id) || 0) > now
    if (!bad(this.ids[c[pos]])) return pos
    const best = this.#leastConnected(c, (id) => bad(id) || (avoid !== undefined && avoid.includes(id)))
    if (best === -1) return pos
    this.stats.avoided++
    return best
  }

  /** The least connected candidate not in `avoid`, or -1. */
  #other (c, avoid) {
    return this.#leastConnected(c, (id) => avoid.includes(id))
  }

  /** The position of the least connected candidate whose server id `skip` does not reject (ties: first listed), or -1. */
  #leastConnected (c, skip) {
    let best = -1
    for (let p = 0; p < c.length; p++) {
      if (skip(this.ids[c[p]])) continue
      if (best === -1 || this.load.seen(c[p]) < this.load.seen(c[best])) best = p
    }
    return best
  }

  /** Whether `map` may send a request for `key` to a server not in `avoid`. */
  routesElsewhere (map, key, read, avoid) {
    if (map !== this.map) this.sync(map)
    const i = map.indexOf(key)
    const c = read ? this.candidates[i] : null
    if (c === null) return !avoid.includes(this.ids[this.target[i]])
    for (let p = 0; p < c.length; p++) if (!avoid.includes(this.ids[c[p]])) return true
    return false
  }

  /**
   * `pick` for the slow path: when LC* defers, wait (bounded) and choose
   * again; after the wait, or with the queue full, the least connected.
   * @returns {Promise<number>} a slot
   */
  async place (table, key, read, size, avoid) {
    let deadline = 0
    for (;;) {
      const map = table.map
      const i = map.indexOf(key)
      const slot = this.pick(map, i, read, size, avoid)
      if (slot !== DEFER) {
        if (deadline !== 0) this.#count('dispatched')
        return slot
      }
      const now = Date.now()
      if (deadline === 0) {
        deadline = now + this.maxWaitMs
        this.stats.deferred++
      }
      if (this.waiting.length >= this.maxDeferred) return this.#fallback(map, i, 'overflowed', 'overflow')
      if (now >= deadline || !(await this.#wait(this.candidates[i], deadline - now))) return this.#fallback(table.map, table.map.indexOf(key), 'timedOut', 'timeout')
    }
  }

  #count (stat, label = stat) {
    this.stats[stat]++
    if (this.deferredMetric) this.deferredMetric.inc({ outcome: label })
  }

  #fallback (map, i, stat, label) {
    this.#count(stat, label)
    if (map !== this.map) this.sync(map)
    const c = this.candidates[i]
    if (c === null) return this.target[i]
    if (this.reports) this.load.now = performance.now()
    return c[leastConnected(c, this.load)]
  }

  /** Resolves true when woken (a long job ended on a candidate, or a new map), false at the timeout. */
  #wait (candidates, ms) {
    return this.waiting.wait(ms, candidates)
  }

  /**
   * The server in `slot` answered one of our requests (still counted in
   * flight) saying it holds `inSystem` requests, that one included.
   * `sentAt`: performance.now() when that request was sent (its answer time
   * tells how fast the server works through what it holds).
   */
  report (slot, inSystem, sentAt) {
    if (this.load.reportTtlMs === 0) return
    this.reports = true
    const now = performance.now()
    this.load.report(slot, inSystem, now, sentAt > 0 ? now - sentAt : 0)
  }

  /** A request of `size` was dispatched to `slot`. */
  begin (slot, size) {
    this.load.begin(slot, size)
  }

  /** That request's upstream exchange is over (answered, failed or aborted). */
  end (slot, size) {
    this.load.end(slot, size)
    if (this.waiting.length === 0 || size < this.load.longThreshold) return
    // A long job ended: the oldest request waiting for this server goes first.
    this.waiting.wakeFirst((candidates) => candidates.includes(slot))
  }

  /** In-flight requests per server id (servers with none left out), for /metrics and tests. */
  inflight () {
    const out = {}
    for (const [id, s] of this.slots) if (this.load.inflight[s] !== 0) out[id] = this.load.inflight[s]
    return out
  }
}

function one () {
  return 1
}

/**
 * A sizeOf from a query parameter: its numeric value to the power `power`
 * (compute's `n` with power 2: the app's O(n^2) loop). A request without it,
 * or with a value that is not a non-negative number, has size 1.
 */
function sizeFromQuery (param, power = 1) {
  if (typeof param !== 'string' || !/^[A-Za-z0-9_.-]+$/.test(param)) throw new InvalidArgumentError('invalid replicaSizeParam: expected a query parameter name')
  if (typeof power !== 'number' || !(power > 0) || power > 4) throw new InvalidArgumentError('invalid replicaSizePower: expected a number in (0, 4]')
  const prefix = param + '='
  return function sizeOf (req) {
    const url = req.url
    let at = url.indexOf('?')
    while (at !== -1) {
      if (url.startsWith(prefix, at + 1)) {
        let end = url.indexOf('&', at + 1)
        if (end === -1) end = url.length
        const v = Number(url.slice(at + 1 + prefix.length, end))
        return Number.isFinite(v) && v >= 0 ? Math.max(1, v ** power) : 1
      }
      at = url.indexOf('&', at + 1)
    }
    return 1
  }
}

/**
 * The replica router from a router's options (the front end's and the
 * client's share these names: replicaChoice, sizeOf, replicaSizeParam,
 * replicaSizePower, lcstarThreshold, lcstarMaxDeferred, lcstarMaxWaitMs,
 * replicaRng, serverReportTtlMs, serverReportDecay), each checked by name.
 */
function createReplicaRouter (opts) {
  if (opts.sizeOf !== undefined && opts.replicaSizeParam !== undefined) throw new InvalidArgumentError('invalid sizeOf: pass sizeOf or replicaSizeParam, not both')
  const sizeOf = opts.replicaSizeParam !== undefined ? sizeFromQuery(opts.replicaSizeParam, opts.replicaSizePower) : opts.sizeOf
  const t = opts.lcstarThreshold
  if (t !== undefined && (typeof t !== 'number' || !(t > 0))) throw new InvalidArgumentError('invalid lcstarThreshold: expected a number > 0')
  if (opts.replicaRng !== undefined && typeof opts.replicaRng !== 'function') throw new InvalidArgumentError('invalid replicaRng: expected a function () => number in [0, 1)')
  return new ReplicaRouter({
    policy: opts.replicaChoice,
    sizeOf,
    longThreshold: t === undefined ? Infinity : t,
    maxDeferred: opts.lcstarMaxDeferred,
    maxWaitMs: opts.lcstarMaxWaitMs,
    rng: opts.replicaRng,
    reportTtlMs: opts.serverReportTtlMs,
    reportDecay: opts.serverReportDecay
  })
}

module.exports = { ReplicaRouter, createReplicaRouter, sizeFromQuery, DEFER }
