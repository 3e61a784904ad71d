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
 * Several holds on one key (two writers during a change of primary, or a
 * key's next write whose hold overtook the last one's release) nest: the key
 * stays held until the last is lifted or lapsed. A wait (waitLifted) is for
 * the holds standing when it began, not for ones added later.
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
    this.keys = new Map() // key -> Map(id -> { timer, meta, at (added or retried), tries, lifted })
    this.waiters = new Map() // key -> Set of { holds, done }: waiting for those holds to be lifted
  }

  /**
   * Resolves true once every hold standing on `key` now has been lifted
   * (or lapsed), at once when none stands; false after `timeoutMs`. Holds
   * added meanwhile are not waited for: they are of writes that began after
   * the caller did (kv-reader.js, "reads wait for the writes before them").
   * Nor are holds that have stood `maxAgeMs` or longer (the caller no longer
   * waits for those: heldLongerThan tells whether one still stands).
   */
  waitLifted (key, timeoutMs, maxAgeMs = Infinity) {
    const ids = this.keys.get(key)
    if (!ids) return Promise.resolve(true)
    const now = performance.now()
    const holds = [...ids.values()].filter((h) => now - h.at < maxAgeMs)
    if (holds.length === 0) return Promise.resolve(true)
    return new Promise((resolve) => {
      let set = this.waiters.get(key)
      if (!set) this.waiters.set(key, (set = new Set()))
      const waiter = { holds, done }
      const timer = setTimeout(() => {
        set.delete(waiter)
        if (set.size === 0 && this.waiters.get(key) === set) this.waiters.delete(key)
        resolve(false)
      }, timeoutMs)
      function done () {
        clearTimeout(timer)
        resolve(true)
      }
      set.add(waiter)
    })
  }

  /**
   * Hold `key` for write `id` (idempotent: a retried hold restarts its lapse).
   * @param {any} [meta] handed to onLapse
   */
  add (key, id, meta) {
    let ids = this.keys.get(key)
    if (!ids) this.keys.set(key, (ids = new Map()))
    // A retry is the same write: the same hold (whoever waits for it still
    // does), with its lapse and age restarted.
    let hold = ids.get(id)
    if (hold) clearTimeout(hold.timer)
    else ids.set(id, (hold = { timer: null, meta, at: 0, tries: 0, lifted: false }))
    hold.meta = meta
    hold.at = performance.now()
    const tries = ++hold.tries
    hold.timer = setTimeout(() => this.#lapse(key, id, hold, tries), this.lapseMs)
    hold.timer.unref()
  }

  /** Lift write `id`'s hold on `key`; false when it was not held (lapsed, or never arrived). */
  remove (key, id) {
    const ids = this.keys.get(key)
    if (!ids || !ids.has(id)) return false
    clearTimeout(ids.get(id).timer)
    return this.#drop(key, id)
  }

  /** The `meta` of write `id`'s hold on `key`, or undefined when it does not hold it. */
  metaOf (key, id) {
    const ids = this.keys.get(key)
    const hold = ids && ids.get(id)
    return hold ? hold.meta : undefined
  }

  /** Call `fn(key, id, meta)` for every hold standing now. */
  each (fn) {
    for (const [key, ids] of this.keys) for (const [id, hold] of ids) fn(key, id, hold.meta)
  }

  /** Whether write `id` holds `key` now. */
  has (key, id) {
    const ids = this.keys.get(key)
    return ids !== undefined && ids.has(id)
  }

  /** Whether a hold on `key` has stood `ms` or longer (a retried hold counts from its retry). */
  heldLongerThan (key, ms) {
    const ids = this.keys.get(key)
    if (!ids) return false
    const now = performance.now()
    for (const h of ids.values()) if (now - h.at >= ms) return true
    return false
  }

  /** Whether any write holds `key` now. */
  held (key) {
    return this.keys.has(key)
  }

  /**
   * How long the youngest hold on `key` has stood, in ms (a retried hold
   * counts from its retry), or -1 when nothing holds it.
   * @param {string} key
   * @returns {number}
   */
  age (key) {
    const ids = this.keys.get(key)
    if (!ids) return -1
    let at = -Infinity
    for (const h of ids.values()) if (h.at > at) at = h.at
    return performance.now() - at
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
    for (const ids of this.keys.values()) for (const h of ids.values()) { clearTimeout(h.timer); h.lifted = true }
    this.keys.clear()
    for (const set of this.waiters.values()) for (const w of set) w.done()
    this.waiters.clear()
  }

  async #lapse (key, id, hold, tries) {
    try {
      await this.onLapse(key, id, hold.meta)
    } catch {
      // the caller reports its own failures; the hold is lifted regardless
    }
    const ids = this.keys.get(key)
    if (ids && ids.get(id) === hold && hold.tries === tries) this.#drop(key, id) // not lifted, nor retried, meanwhile
  }

  #drop (key, id) {
    const ids = this.keys.get(key)
    const hold = ids && ids.get(id)
    if (!hold) return false
    ids.delete(id)
    hold.lifted = true
    if (ids.size === 0) this.keys.delete(key)
    const set = this.waiters.get(key)
    if (set) {
      for (const w of set) {
        if (w.holds.every((h) => h.lifted)) {
          set.delete(w)
          w.done()
        }
      }
      if (set.size === 0) this.waiters.delete(key)
    }
    return true
  }
}

module.exports = { KeyHolds }
