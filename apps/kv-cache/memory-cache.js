'use strict'

const { contains } = require('../../core/ranges')

/**
 * In-process TTL cache: the fallback when no Redis is configured and no
 * redis-server binary is installed. Same contract as RedisCache (entries are
 * `{ tag, ver, contentType, value }`, the TTL restarts on every read, a set
 * never replaces a newer version) but bound to this process, so it is never
 * "degraded" and never reconnects.
 */
class MemoryCache {
  /** @param {{ ttlMs: number, now?: () => number }} options */
  constructor ({ ttlMs, now = Date.now }) {
    this.backend = 'memory'
    this.ttlMs = ttlMs
    this.now = now
    this.entries = new Map() // key -> { sliceKey, tag, ver, contentType, value, expiresAt }
    // Expired entries are also dropped lazily on read; the sweep bounds memory
    // for keys nobody reads again.
    this.sweeper = setInterval(() => this.sweep(), Math.max(ttlMs, 1000))
    this.sweeper.unref()
  }

  get healthy () {
    return true
  }

  /** Part of the cache contract; an in-process cache never loses its connection. */
  onReconnect () {}

  async get (key) {
    const e = this.entries.get(key)
    if (!e) return null
    const t = this.now()
    if (e.expiresAt <= t) {
      this.entries.delete(key)
      return null
    }
    e.expiresAt = t + this.ttlMs
    return { tag: e.tag, ver: e.ver, contentType: e.contentType, value: e.value }
  }

  /** @returns {Promise<boolean>} false when a newer version was kept */
  async set (key, sliceKey, { tag, ver, contentType, value }) {
    const held = this.entries.get(key)
    const t = this.now()
    if (held && held.expiresAt > t && held.ver > ver) return false
    this.entries.set(key, { sliceKey, tag, ver, contentType, value, expiresAt: t + this.ttlMs })
    return true
  }

  async del (key) {
    return this.entries.delete(key) ? 1 : 0
  }

  /** Drop every entry whose slice key lies in the normalized `ranges`; returns how many. */
  async dropRanges (ranges) {
    let n = 0
    for (const [key, e] of this.entries) {
      if (contains(ranges, e.sliceKey)) {
        this.entries.delete(key)
        n++
      }
    }
    return n
  }

  sweep () {
    const t = this.now()
    for (const [key, e] of this.entries) if (e.expiresAt <= t) this.entries.delete(key)
  }

  async close () {
    clearInterval(this.sweeper)
    this.entries.clear()
  }
}

module.exports = { MemoryCache }
