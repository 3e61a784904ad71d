'use strict'

const { InvalidArgumentError } = require('../../core/errors')

/**
 * Per-key write holds on one server (docs/replication.md, kv-cache): while a
 * key is held, a write to it is in progress somewhere, so this server must
 * not answer from its cache nor fill its cache; reads of the key go straight
 * to DynamoDB (a strongly consistent read, which is linearizable by itself).
 *
 * A hold is placed by the writing primary *before* its DynamoDB write and
 * lifted after it (with the new version, which the caller caches first). If
 * the lift never comes (the primary died, the network broke, or the write's
 * outcome is unknown), the hold lapses after `lapseMs`; the writer makes sure
 * that is longer than any DynamoDB write it will still acknowledge, so by
 * then the store holds the new value and a fill reads it. A lapse first runs
 * `onLapse` (the caller drops what it cached while the key was held) and
 * lifts the hold only once that settled.
 *
 * Several holds on one key (two writers during a change of primary) nest:
 * the key stays held until the last is lifted or lapsed.
 */
class KeyHolds {
  /**
   * @param {{ lapseMs: number, onLapse?: (key: string, id: string, meta: any) => void|Promise<void> }} options
   *   onLapse: the key stays held until what it returns settles
   */
  constructor ({ lapseMs, onLapse = () => {} }) {
    if (!Number.isInteger(lapseMs) || lapseMs < 1) throw new InvalidArgumentError('invalid lapseMs: expected an integer >= 1')
    this.lapseMs = lapseMs
    this.onLapse = onLapse
    this.keys = new Map() // key -> Map(id -> { timer, meta })
    this.waiters = new Map() // key -> [resolve] waiting for the key to be lifted
  }

  /**
   * Resolves true once nothing holds `key` (at once when nothing does), false
   * after `timeoutMs`.
   */
  waitLifted (key, timeoutMs) {
    if (!this.keys.has(key)) return Promise.resolve(true)
    return new Promise((resolve) => {
      let list = this.waiters.get(key)
      if (!list) this.waiters.set(key, (list = []))
      const timer = setTimeout(() => {
        const at = list.indexOf(done)
        if (at !== -1) list.splice(at, 1)
        if (list.length === 0 && this.waiters.get(key) === list) this.waiters.delete(key)
        resolve(false)
      }, timeoutMs)
      function done () {
        clearTimeout(timer)
        resolve(true)
      }
      list.push(done)
    })
  }

  /**
   * Hold `key` for write `id` (idempotent: a retried hold restarts its lapse).
   * @param {any} [meta] handed to onLapse
   */
  add (key, id, meta) {
    let ids = this.keys.get(key)
    if (!ids) this.keys.set(key, (ids = new Map()))
    const before = ids.get(id)
    if (before) clearTimeout(before.timer)
    const hold = { timer: null, meta }
    hold.timer = setTimeout(() => this.#lapse(key, id, hold), this.lapseMs)
    hold.timer.unref()
    ids.set(id, hold)
  }

  /** Lift write `id`'s hold on `key`; false when it was not held (lapsed, or never arrived). */
  remove (key, id) {
    const ids = this.keys.get(key)
    if (!ids || !ids.has(id)) return false
    clearTimeout(ids.get(id).timer)
    return this.#drop(key, id)
  }

  /** Whether any write holds `key` now. */
  held (key) {
    return this.keys.has(key)
  }

  /**
   * The `meta` of the newest hold on `key` (the last one added) for which
   * `test(meta)` is true (every hold when not given), or undefined.
   * @param {string} key
   * @param {(meta: any) => boolean} [test]
   */
  newest (key, test = () => true) {
    const ids = this.keys.get(key)
    if (!ids) return undefined
    let last
    for (const h of ids.values()) if (test(h.meta)) last = h.meta
    return last
  }

  /** Number of keys held now. */
  get size () {
    return this.keys.size
  }

  /** Lift everything (on close). */
  clear () {
    for (const ids of this.keys.values()) for (const h of ids.values()) clearTimeout(h.timer)
    this.keys.clear()
    for (const list of this.waiters.values()) for (const done of list) done()
    this.waiters.clear()
  }

  async #lapse (key, id, hold) {
    try {
      await this.onLapse(key, id, hold.meta)
    } catch {
      // the caller reports its own failures; the hold is lifted regardless
    }
    const ids = this.keys.get(key)
    if (ids && ids.get(id) === hold) this.#drop(key, id) // not lifted, nor retried, meanwhile
  }

  #drop (key, id) {
    const ids = this.keys.get(key)
    if (!ids || !ids.delete(id)) return false
    if (ids.size === 0) {
      this.keys.delete(key)
      const list = this.waiters.get(key)
      if (list) {
        this.waiters.delete(key)
        for (const done of list) done()
      }
    }
    return true
  }
}

module.exports = { KeyHolds }
