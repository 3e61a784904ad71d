'use strict'

const { SliceMap } = require('../core/slice-map')
const { sliceKey } = require('../core/keyspace')
const { acceptsUpdate, ownedRanges } = require('../core/assignment')
const { subtract } = require('../core/ranges')
const { NotOwnerError, InvalidArgumentError } = require('../core/errors')
const { silent } = require('../core/logger')

const noop = () => {}

/**
 * The framework-free core of appserver-lib: holds this server's view of the
 * assignment, decides ownership per key, and counts requests per slice.
 *
 * Counting is allocation-free on the request path: one Float64Array slot per
 * slice of the current map. Counts of an older map are folded into range
 * entries when a new map arrives, so a report always describes real ranges
 * even when the layout changed mid-period; the controller spreads them over
 * its current slices (core/assignment.js spreadLoads).
 */
class ShardGuard {
  /**
   * @param {object} options
   * @param {string} options.serverId this server's id, as registered
   * @param {(ranges, ctx) => any} [options.onAcquire] called with ranges gained
   * @param {(ranges, ctx) => any} [options.onRelease] called with ranges lost
   * @param {import('pino').Logger} [options.logger]
   */
  constructor ({ serverId, onAcquire = noop, onRelease = noop, logger = silent } = {}) {
    if (typeof serverId !== 'string' || serverId.length === 0) throw new InvalidArgumentError('invalid serverId: expected a non-empty string')
    if (typeof onAcquire !== 'function') throw new InvalidArgumentError('invalid onAcquire: expected a function')
    if (typeof onRelease !== 'function') throw new InvalidArgumentError('invalid onRelease: expected a function')
    this.serverId = serverId
    this.onAcquire = onAcquire
    this.onRelease = onRelease
    this.logger = logger
    this.map = null
    this.owned = new Uint8Array(0)
    this.counts = new Float64Array(0)
    this.pending = [] // { start, end, count } from earlier maps, not yet reported
    this.stats = { admitted: 0, misdirected: 0, staleRouted: 0, assignmentsAccepted: 0, assignmentsRejected: 0 }
  }

  /** Current generation, 0 before the first assignment. */
  get generation () {
    return this.map ? this.map.generation : 0
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
    for (let i = 0; i < map.size; i++) owned[i] = map.owners[i] === this.serverId ? 1 : 0
    // Hooks run synchronously around the switch so that no request is checked
    // against the new map before the app has seen what changed (race-free).
    const ctx = { generation: assignment.generation, assignment }
    const results = []
    if (released.length) results.push(this.#callHook('onRelease', released, ctx))
    this.map = map
    this.owned = owned
    this.counts = new Float64Array(map.size)
    if (acquired.length) results.push(this.#callHook('onAcquire', acquired, ctx))
    this.stats.assignmentsAccepted++
    this.logger.info({ generation: assignment.generation, slices: map.size, acquired: acquired.length, released: released.length }, 'assignment installed')
    return { changed: true, acquired, released, hooks: Promise.all(results) }
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

  #flushCounts () {
    if (!this.map) return
    const slices = this.map.assignment.slices
    for (let i = 0; i < this.counts.length; i++) {
      if (this.counts[i] > 0) this.pending.push({ start: slices[i].start, end: slices[i].end, count: this.counts[i] })
    }
  }

  /**
   * Index of the owned slice holding `key` (a slice key), or -1 when this
   * server does not own it. Counts the request either way.
   */
  admitSliceKey (key) {
    if (this.map === null) {
      this.stats.misdirected++
      return -1
    }
    const i = this.map.indexOf(key)
    if (this.owned[i] === 0) {
      this.stats.misdirected++
      return -1
    }
    this.counts[i]++
    this.stats.admitted++
    return i
  }

  /**
   * Check and count an application key. Returns its slice key when this server
   * owns it; throws NotOwnerError (421) otherwise.
   */
  admit (appKey) {
    const key = sliceKey(appKey)
    if (this.admitSliceKey(key) === -1) throw this.notOwnerError(appKey)
    return key
  }

  /** The 421 error for a key this server does not own, carrying our generation. */
  notOwnerError (appKey) {
    const err = new NotOwnerError(`server ${this.serverId} does not own key ${JSON.stringify(appKey)} at generation ${this.generation}`)
    err.generation = this.generation
    return err
  }

  /** Note the generation a front end routed with (ringpop-style checksum). */
  observeRoutedGeneration (generation) {
    if (generation < this.generation) this.stats.staleRouted++
  }

  /**
   * Per-range request counts since the last report; resets the counters.
   * @returns {{ serverId, generation, entries: {start,end,count}[] }}
   */
  report () {
    this.#flushCounts()
    if (this.map) this.counts.fill(0)
    const entries = this.pending
    this.pending = []
    return { serverId: this.serverId, generation: this.generation, entries }
  }
}

module.exports = { ShardGuard }
