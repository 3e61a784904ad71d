'use strict'

const { performance } = require('node:perf_hooks')
const { SliceMap } = require('../core/slice-map')
const { sliceKey } = require('../core/keyspace')
const { acceptsUpdate, ownedRanges } = require('../core/assignment')
const { subtract } = require('../core/ranges')
const { NotOwnerError, LeaseExpiredError, InvalidArgumentError } = require('../core/errors')
const { silent } = require('../core/logger')
const { LoadLedger } = require('./load-ledger')
const { vote } = require('../core/hot-keys')
const { WaitList } = require('../core/wait-list')

const noop = () => {}
const CONSISTENCY = ['strict', 'available']
const HANDOFF_DRAIN = ['writes', 'all']

/**
 * The framework-free core of appserver-lib: holds this server's view of the
 * assignment, decides admission per key, tracks in-flight requests per map
 * generation (for fenced handoff), holds the lease (strict mode), and counts
 * requests and their cost (busy ms) per slice.
 *
 * Admission needs three things (docs/ownership.md): the key's slice names this
 * server first, the slice is not `moving` (a handoff in progress), and, in
 * `strict` mode once leases are in force, the lease has not run out.
 *
 * Counting is allocation-free on the request path: one Float64Array slot per
 * slice of the current map. Counts of an older map are folded into range
 * entries of the load ledger when a new map arrives, so a report always
 * describes real ranges even when the layout changed mid-period. Costs are
 * known only when a request ends, possibly under a later map: they go to a
 * Float64Array on the in-flight token of the map that admitted the request
 * (`begin()`), and reach the ledger as ranges of that map.
 */
class ShardGuard {
  /**
   * @param {object} options
   * @param {string} options.serverId this server's id, as registered
   * @param {(ranges, ctx) => any} [options.onAcquire] called with ranges gained
   * @param {(ranges, ctx) => any} [options.onRelease] called with ranges lost
   * @param {(ctx) => void} [options.onAssignment] called synchronously with every map installed,
   *   whether or not this server's ranges changed (an app that must follow the newest map:
   *   kv-cache stops fencing a replica that map no longer lists). Errors are logged, never thrown.
   *   Every hook's ctx is { generation, assignment, map } (map: the new assignment's SliceMap, which the
   *   guard checks requests against once the install completes; onRelease runs just before the switch)
   * @param {'strict'|'available'} [options.consistency] strict: admit only under a live lease (once leases are in force)
   * @param {boolean} [options.leases] leases are in force from the start (a controller grants them); else from the first grant
   * @param {number} [options.holdMs] how long a request for a slice in handoff (or routed with a newer generation) waits for the map that decides it
   * @param {'writes'|'all'} [options.handoffDrain] which requests admitted under an older map a handoff
   *   waits for: 'writes' (default: requests that may change state; a read admitted before the revoke
   *   is concurrent with every write the next owner admits, see docs/ownership.md) or 'all'
   * @param {() => number} [options.now] monotonic clock in ms (performance.now)
   * @param {import('pino').Logger} [options.logger]
   */
  constructor ({ serverId, onAcquire = noop, onRelease = noop, onAssignment = noop, consistency = 'available', leases = false, holdMs = 2000, handoffDrain = 'writes', now = () => performance.now(), logger = silent } = {}) {
    if (typeof serverId !== 'string' || serverId.length === 0) throw new InvalidArgumentError('invalid serverId: expected a non-empty string')
    if (typeof onAcquire !== 'function') throw new InvalidArgumentError('invalid onAcquire: expected a function')
    if (typeof onRelease !== 'function') throw new InvalidArgumentError('invalid onRelease: expected a function')
    if (typeof onAssignment !== 'function') throw new InvalidArgumentError('invalid onAssignment: expected a function')
    if (!CONSISTENCY.includes(consistency)) throw new InvalidArgumentError(`invalid consistency: expected one of ${CONSISTENCY.join(', ')}, got ${JSON.stringify(consistency)}`)
    if (!Number.isInteger(holdMs) || holdMs < 0) throw new InvalidArgumentError('invalid holdMs: expected an integer >= 0')
    if (!HANDOFF_DRAIN.includes(handoffDrain)) throw new InvalidArgumentError(`invalid handoffDrain: expected one of ${HANDOFF_DRAIN.join(', ')}, got ${JSON.stringify(handoffDrain)}`)
    this.drainAll = handoffDrain === 'all'
    this.serverId = serverId
    this.onAcquire = onAcquire
    this.onRelease = onRelease
    this.onAssignment = onAssignment
    this.consistency = consistency
    this.holdMs = holdMs
    this.now = now
    this.logger = logger
    this.map = null
    this.owned = new Uint8Array(0)
    this.counts = new Float64Array(0)
    // per slice of the current map, the majority vote over the keys admitted (core/hot-keys.js)
    this.hotKeys = new Float64Array(0)
    this.hotVotes = new Float64Array(0)
    this.ledger = new LoadLedger()
    // Leases: with a controller, enforced (strict mode) from the start, so a
    // map pushed before the first grant admits nothing; without one, from the
    // first grant (a server with no controller has nobody to grant one).
    this.leasesEnforced = leases === true
    this.leaseExpiresAt = -Infinity
    // In-flight requests per map: { generation, inflight }; older ones that
    // still have requests running, oldest first.
    this.current = null
    this.older = []
    this.drainWaiters = new WaitList()
    this.mapWaiters = new WaitList()
    this.running = 0 // admitted requests whose responses have not closed, under any map (X-Chopper-Inflight)
    this.stats = { admitted: 0, misdirected: 0, staleRouted: 0, held: 0, leaseRefused: 0, assignmentsAccepted: 0, assignmentsRejected: 0, staleLeases: 0 }
  }

  /** The epoch of the controller that issued the current map (0: none, or a controller without leader election). */
  get epoch () {
    return (this.map && this.map.assignment.epoch) || 0
  }

  /** Current generation, 0 before the first assignment. */
  get generation () {
    return this.map ? this.map.generation : 0
  }

  /**
   * The highest generation g such that no request admitted under a map older
   * than g is still running: what the controller waits for before it grants a
   * revoked slice to its next owner.
   */
  get drainedGeneration () {
    for (const t of this.older) if (this.#pending(t)) return t.generation
    return this.generation
  }

  /** Whether a handoff still waits for requests admitted under `token`'s map. */
  #pending (token) {
    return (this.drainAll ? token.inflight : token.writes) > 0
  }

  /** True while leases are enforced and the lease is live. */
  leaseValid () {
    return this.now() < this.leaseExpiresAt
  }

  /**
   * A lease grant from the controller. `sentAt` is when the request that
   * produced it left (this clock): the controller measures from when it
   * granted, which is later, so this server's lease always ends first.
   * The grant counts only when this server holds `minGeneration` or newer.
   * @returns {boolean} whether the lease was extended
   */
  applyLease ({ leaseMs, minGeneration = 0, epoch = 0 }, sentAt) {
    if (!Number.isFinite(leaseMs) || leaseMs <= 0 || !Number.isFinite(sentAt)) return false
    if (this.generation < minGeneration) return false
    // A deposed controller (docs/controller-ha.md) grants under a lower epoch
    // than the map we hold: its lease means nothing.
    if (!Number.isSafeInteger(epoch) || epoch < this.epoch) {
      this.stats.staleLeases++
      return false
    }
    this.leasesEnforced = true
    this.leaseExpiresAt = Math.max(this.leaseExpiresAt, sentAt + leaseMs)
    if (this.leaseValid()) this.mapWaiters.wakeAll() // requests held for a lease (a controller failover)
    return true
  }

  /** Give up the lease at once (drain, shutdown). */
  dropLease () {
    this.leaseExpiresAt = -Infinity
  }

  /**
   * Install a new assignment. Invalid ones throw (InvalidAssignmentError /
   * StaleGenerationError) and the old map is kept. Re-sending the current
   * generation with the same layout is a no-op (pushes are retried).
   * @returns {{ changed: boolean, acquired, released, hooks: Promise }}
   */
  setAssignment (assignment) {
    let changed
    try {
      changed = acceptsUpdate(this.map && this.map.assignment, assignment)
    } catch (err) {
      this.stats.assignmentsRejected++
      throw err
    }
    if (!changed) return { changed: false, acquired: [], released: [], hooks: Promise.resolve() }
    const before = this.map ? ownedRanges(this.map.assignment, this.serverId) : []
    const after = ownedRanges(assignment, this.serverId)
    const released = subtract(before, after)
    const acquired = subtract(after, before)

    this.#flushCounts()
    const map = new SliceMap(assignment)
    const owned = new Uint8Array(map.size)
    for (let i = 0; i < map.size; i++) owned[i] = map.admits(i, this.serverId) ? 1 : 0
    // Hooks run synchronously around the switch so that no request is checked
    // against the new map before the app has seen what changed (race-free).
    const ctx = { generation: assignment.generation, assignment, map }
    const results = []
    if (released.length) results.push(this.#callHook('onRelease', released, ctx))
    if (this.current && this.current.inflight > 0) this.older.push(this.current)
    this.current = inflightToken(assignment.generation, map)
    this.map = map
    this.owned = owned
    this.counts = new Float64Array(map.size)
    this.hotKeys = new Float64Array(map.size).fill(-1)
    this.hotVotes = new Float64Array(map.size)
    this.#notifyAssignment(ctx)
    if (acquired.length) results.push(this.#callHook('onAcquire', acquired, ctx))
    this.stats.assignmentsAccepted++
    this.logger.info({ generation: assignment.generation, slices: map.size, acquired: acquired.length, released: released.length, moving: map.hasMoving }, 'assignment installed')
    this.mapWaiters.wakeAll()
    if (this.older.length === 0) this.drainWaiters.wakeAll()
    return { changed: true, acquired, released, hooks: Promise.all(results) }
  }

  /** onAssignment: not awaited; a throw or a rejected promise is logged, never propagated. */
  #notifyAssignment (ctx) {
    const failed = (err) => this.logger.error({ err, hook: 'onAssignment' }, 'assignment hook failed')
    try {
      Promise.resolve(this.onAssignment(ctx)).catch(failed)
    } catch (err) {
      failed(err)
    }
  }

  #callHook (name, ranges, ctx) {
    try {
      return Promise.resolve(this[name](ranges, ctx)).catch((err) => {
        this.logger.error({ err, hook: name }, 'assignment hook failed')
        throw err
      })
    } catch (err) {
      this.logger.error({ err, hook: name }, 'assignment hook failed')
      return Promise.reject(err)
    }
  }

  /**
   * Fold counts (current map) and costs (every map with requests still
   * running) into ledger ranges of the map each was admitted under.
   */
  #flushCounts () {
    if (!this.map) return
    this.#flushToken(this.current, this.counts)
    for (const t of this.older) this.#flushToken(t, null)
    this.hotKeys.fill(-1)
    this.hotVotes.fill(0)
  }

  #flushToken (token, counts) {
    const slices = token.map.assignment.slices
    const { costs, done } = token
    for (let i = 0; i < costs.length; i++) {
      const n = counts === null ? 0 : counts[i]
      // counts are the current map's, and so are its hot-key votes
      const hot = counts !== null && this.hotVotes[i] > 0 ? { key: this.hotKeys[i], votes: this.hotVotes[i] } : undefined
      if (n > 0 || done[i] > 0) this.ledger.add(slices[i].start, slices[i].end, n, costs[i], done[i], hot)
    }
    if (counts !== null) counts.fill(0)
    costs.fill(0)
    done.fill(0)
  }

  /**
   * Index of the slice holding `key` (a slice key) when this server may admit
   * it now, or -1. Counts the request either way. Callers that admit must call
   * `begin()` and later `end(token)` so a handoff can wait for the request.
   *
   * `joining`: also admit it when this server is joining its slice (the slice
   * is moving and lists this server, which does not admit it until the
   * grant). Only for requests the app says are safe to take before the grant
   * (createAppServer's `admitJoining`), such as kv-cache's write holds: a hold
   * placed now still holds the key when the grant lands, where waiting for
   * the grant would stall the write.
   */
  admitSliceKey (key, joining = false) {
    if (this.map === null) {
      this.stats.misdirected++
      return -1
    }
    const i = this.map.indexOf(key)
    if (this.owned[i] === 0) {
      // Joining (no lease needed: nothing of the slice is served here until the grant), or not ours.
      if (!(joining && this.map.moving[i] === 1 && this.map.replicas[i].includes(this.serverId))) {
        this.stats.misdirected++
        return -1
      }
    } else if (this.consistency === 'strict' && this.leasesEnforced && !this.leaseValid()) {
      this.stats.leaseRefused++
      return -2
    }
    this.counts[i]++
    vote(this.hotKeys, this.hotVotes, i, key)
    this.stats.admitted++
    return i
  }

  /**
   * Mark a request admitted under the current map as running; returns the
   * token for `end`. The token is shared by every request of that map and
   * carries it (`token.map`: the slice's `replicas[i]`, its range for cost).
   */
  begin (write = false) {
    const t = this.current
    this.running++
    t.inflight++
    if (write) t.writes++
    return t
  }

  /**
   * A request admitted under `token`'s map finished. `slice` (the index
   * `admitSliceKey` returned) and `costMs` add its busy time to that slice's
   * range in the map it was admitted under, even when the map changed since.
   */
  /** A write admitted under `token`'s map has applied its effects: a handoff stops waiting for it (its `end` then passes write = false). */
  settle (token) {
    if (--token.writes === 0 && token !== this.current && !this.drainAll) this.drainWaiters.wakeAll()
  }

  end (token, slice = -1, costMs = 0, write = false) {
    if (slice >= 0) {
      token.done[slice]++
      if (costMs > 0) token.costs[slice] += costMs
    }
    this.running--
    token.inflight--
    if (write) this.settle(token)
    if (token.inflight > 0 || token === this.current) return
    const at = this.older.indexOf(token)
    if (at === -1) return
    this.#flushToken(token, null) // its last request: nothing will add to it again
    this.older.splice(at, 1)
    if (this.older.length === 0 || at === 0) this.drainWaiters.wakeAll()
  }

  /**
   * Whether a request this server refused should wait for a newer map rather
   * than be refused now: it was routed with a newer generation than ours (the
   * map that decides it is on its way), or its slice is ours but still moving
   * (the grant is on its way).
   */
  shouldHold (key, routedGeneration) {
    if (this.holdMs === 0) return false
    if (routedGeneration > this.generation) return true
    if (this.map === null) return false
    const i = this.map.indexOf(key)
    return this.map.moving[i] === 1 && this.map.replicas[i].includes(this.serverId)
  }

  /**
   * Admit slice key `key`, waiting (up to holdMs) for the map that decides it
   * when `shouldHold` says so, or for a lease renewal when the lease lapsed
   * (strict; a controller failover outlasts a lease). Resolves the slice
   * index, -1 (not ours, or `abandoned()` became true: the client went away)
   * or -2 (lease expired). `joining`: as admitSliceKey's, so it is admitted
   * as soon as this server joins its slice, without waiting for the grant.
   */
  async admitOrHold (key, routedGeneration, abandoned = () => false, joining = false) {
    const deadline = this.now() + this.holdMs
    let held = false
    for (;;) {
      if (abandoned()) return -1
      const i = this.admitSliceKey(key, joining)
      if (i >= 0) return i
      const left = deadline - this.now()
      if (left <= 0 || this.holdMs === 0 || (i === -1 && !this.shouldHold(key, routedGeneration))) return i
      if (!held) this.stats.held++
      held = true
      if (i === -1) this.stats.misdirected-- // counted again when it is finally decided
      else this.stats.leaseRefused--
      await this.mapWaiters.wait(left)
    }
  }

  /**
   * Resolves true once every request a handoff waits for (see handoffDrain)
   * admitted under maps before the current one finished, false on timeout.
   */
  async waitDrained (timeoutMs) {
    const deadline = this.now() + timeoutMs
    while (this.older.some((t) => this.#pending(t))) {
      const left = deadline - this.now()
      if (left <= 0) return false
      await this.drainWaiters.wait(left)
    }
    return true
  }

  /**
   * Check and count an application key. Returns its slice key when this server
   * may admit it; throws NotOwnerError or LeaseExpiredError (421) otherwise.
   * (No in-flight tracking: for callers that do their own.)
   */
  admit (appKey) {
    const key = sliceKey(appKey)
    const i = this.admitSliceKey(key)
    if (i === -1) throw this.notOwnerError(appKey)
    if (i === -2) throw this.leaseExpiredError()
    return key
  }

  /**
   * The servers our map lists for slice key `key`, primary first, or null
   * without a map: what a 421 names as the key's owners (OWNER_HINT,
   * core/http.js). The map's own array: read it, do not change it.
   */
  serversOf (key) {
    return this.map === null ? null : this.map.replicas[this.map.indexOf(key)]
  }

  /** The 421 error for a key this server does not own, carrying our generation. */
  notOwnerError (appKey) {
    const err = new NotOwnerError(`server ${this.serverId} does not own key ${JSON.stringify(appKey)} at generation ${this.generation}`)
    err.generation = this.generation
    return err
  }

  /** The 421 for a strict server whose lease ran out: it cannot know whether it still owns anything. */
  leaseExpiredError () {
    const err = new LeaseExpiredError(`server ${this.serverId} has no live lease from the controller; it admits nothing until it renews`)
    err.generation = this.generation
    return err
  }

  /** Note the generation a front end routed with (ringpop-style checksum). */
  observeRoutedGeneration (generation) {
    if (generation < this.generation) this.stats.staleRouted++
  }

  /**
   * Per-range request counts and cost (busy ms) not yet acknowledged by the
   * controller (appserver-lib/load-ledger.js). Reading does not lose
   * anything: pass the last report the controller used as `ack`. The cost of
   * a request still running is reported once it finished.
   * @param {{ instance?: string, seq?: number }} [ack]
   * @returns {{ serverId, generation, instance, seq, frames, entries: {start,end,count,cost,done?,hot?}[] }}
   *   hot: `{ key, votes }`, the slice's majority vote over its requests' slice keys (core/hot-keys.js)
   */
  report (ack) {
    this.#flushCounts()
    return { serverId: this.serverId, generation: this.generation, ...this.ledger.read(ack) }
  }
}

/** What `begin()` returns: one per installed map, shared by its requests. */
function inflightToken (generation, map) {
  return { generation, inflight: 0, writes: 0, map, costs: new Float64Array(map.size), done: new Float64Array(map.size) }
}

module.exports = { ShardGuard, CONSISTENCY, HANDOFF_DRAIN }
