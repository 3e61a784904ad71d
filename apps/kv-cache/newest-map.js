'use strict'

const { SliceMap } = require('../../core/slice-map')

/**
 * The newest assignment this server installed, as kv-cache's writes need it
 * (fed by appserver-lib's onAssignment hook, and by onAcquire / onRelease
 * where only those are wired):
 *
 * - `urlOf(id, req)`: where another replica listens. `req.chopperServers`
 *   (the servers of the map that admitted the request) when the shard guard
 *   set it, else the newest map's. A server id is bound to one URL for the
 *   life of a cluster, so an older map still names the right place; one that
 *   joined since the last map seen is not known here (the write then fails
 *   with 503, never silently).
 * - `waitFor(generation, timeoutMs)`: a replica asked to release a write of
 *   a generation it has not installed yet (pushes reach members in any order)
 *   waits for that map before it refuses the release.
 * - `dropped(id, sliceKey, generation)`: whether a write admitted under
 *   `generation` may stop holding and fencing replica `id`. True only when a
 *   newer map lists the key's slice as settled (not moving) without `id`.
 *   The controller issues such a map only once `id` acknowledged the revoke
 *   (it installed a map in which it does not admit the slice; when it gains
 *   it again it distrusts its cache) or its lease lapsed (a strict member then
 *   admits nothing): either way `id` can no longer serve the key, so waiting
 *   for it to answer would only stall the write (docs/replication.md).
 */
class NewestMap {
  constructor () {
    this.map = null
    this.waiters = new Set() // { generation, resolve, timer, signal, onAbort }
  }

  /** @param {{ assignment?: object, map?: SliceMap }} ctx a hook's context */
  learn (ctx) {
    const a = ctx && ctx.assignment
    if (!a || !a.servers || !Array.isArray(a.slices)) return
    if (this.map !== null && !(a.generation > this.map.generation)) return
    this.map = ctx.map instanceof SliceMap && ctx.map.assignment === a ? ctx.map : new SliceMap(a)
    for (const w of this.waiters) if (w.generation <= this.map.generation) this.#settle(w, true)
  }

  /**
   * Resolves true once a map of `generation` or newer is learned, false after
   * `timeoutMs`, when `signal` aborts (the asker went away), or at close.
   * @param {number} generation
   * @param {number} timeoutMs
   * @param {AbortSignal} [signal]
   */
  waitFor (generation, timeoutMs, signal) {
    if (this.generation >= generation) return Promise.resolve(true)
    if (signal && signal.aborted) return Promise.resolve(false)
    return new Promise((resolve) => {
      const w = { generation, resolve, timer: null, signal, onAbort: null }
      w.timer = setTimeout(() => this.#settle(w, false), timeoutMs)
      if (signal) {
        w.onAbort = () => this.#settle(w, false)
        signal.addEventListener('abort', w.onAbort, { once: true })
      }
      this.waiters.add(w)
    })
  }

  #settle (w, reached) {
    if (!this.waiters.delete(w)) return
    clearTimeout(w.timer)
    if (w.onAbort) w.signal.removeEventListener('abort', w.onAbort)
    w.resolve(reached)
  }

  /** Let every waiter go (false). */
  close () {
    for (const w of this.waiters) this.#settle(w, false)
  }

  get generation () {
    return this.map === null ? -1 : this.map.generation
  }

  urlOf (id, req) {
    const fromReq = req && req.chopperServers && req.chopperServers[id]
    if (fromReq && fromReq.url) return fromReq.url
    return this.map === null ? undefined : this.map.urlOf(id)
  }

  dropped (id, sliceKey, generation) {
    const m = this.map
    if (m === null || !(m.generation > generation)) return false
    const i = m.indexOf(sliceKey)
    return m.moving[i] === 0 && !m.replicas[i].includes(id)
  }
}

module.exports = { NewestMap }
