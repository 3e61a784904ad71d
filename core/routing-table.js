'use strict'

const { SliceMap } = require('./slice-map')
const { acceptsUpdate } = require('./assignment')
const { silent } = require('./logger')
const { WaitList } = require('./wait-list')

/**
 * A router's current slice map (the front end's and the client's). Pushes
 * and pulls both land here; an
 * invalid or stale assignment is rejected and the old map kept. Concurrent
 * refreshes (many requests hitting 421 at once) share one pull.
 */
class RoutingTable {
  /**
   * @param {{ pull?: () => Promise<object>, logger?, onChange?: (map) => void }} options
   */
  constructor ({ pull, logger = silent, onChange = () => {} } = {}) {
    this.pull = pull
    this.logger = logger
    this.onChange = onChange
    this.map = null
    this.inflight = null
    this.waiters = new WaitList() // woken by every new map
    this.stats = { accepted: 0, rejected: 0, unchanged: 0, pullFailures: 0 }
    // The last pull failed (the controller is unreachable): a router then
    // tries a 421's owner hint at once rather than wait (core/key-router.js).
    this.pullFailing = false
  }

  get generation () {
    return this.map ? this.map.generation : 0
  }

  /**
   * Install an assignment if it is valid and newer; throws otherwise.
   * @returns {boolean} whether the map changed
   */
  set (assignment) {
    let changed
    try {
      changed = acceptsUpdate(this.map && this.map.assignment, assignment)
    } catch (err) {
      this.stats.rejected++
      throw err
    }
    if (!changed) {
      this.stats.unchanged++
      return false
    }
    this.map = new SliceMap(assignment)
    this.stats.accepted++
    this.logger.info({ generation: assignment.generation, slices: this.map.size }, 'assignment installed')
    this.onChange(this.map)
    this.waiters.wakeAll()
    return true
  }

  /**
   * Wait until the map is newer than `generation`: woken by a push, and
   * pulling every `pullEveryMs` meanwhile (a push may be in backoff).
   * Resolves the current map (possibly not newer, at the deadline).
   */
  async waitNewer (generation, { timeoutMs, pullEveryMs = 100 }) {
    const deadline = Date.now() + timeoutMs
    while (this.generation <= generation) {
      const left = deadline - Date.now()
      if (left <= 0) break
      await this.waiters.wait(Math.min(left, pullEveryMs))
      // Not awaited: a pull that hangs (the controller cut off) must not hold
      // us past the deadline; a newer map it brings wakes the waiters.
      if (this.generation <= generation) this.refresh()
    }
    return this.map
  }

  /** Pull the controller's assignment (deduplicated). Resolves to the current map. */
  refresh () {
    if (!this.pull) return Promise.resolve(this.map)
    if (this.inflight) return this.inflight
    this.inflight = (async () => {
      try {
        const assignment = await this.pull()
        this.pullFailing = false
        if (assignment && (!this.map || assignment.generation > this.map.generation)) this.set(assignment)
      } catch (err) {
        this.pullFailing = true
        this.stats.pullFailures++
        this.logger.warn({ err }, 'assignment pull failed')
      } finally {
        this.inflight = null
      }
      return this.map
    })()
    return this.inflight
  }
}

module.exports = { RoutingTable }
