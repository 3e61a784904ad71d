'use strict'

/**
 * Waiters with a timeout: each `wait(ms, tag)` resolves true when woken and
 * false when its time ran out first, and is then off the list either way.
 * The routing table wakes everyone on a new map (core/routing-table.js);
 * LC* wakes the oldest waiter of a server whose long job ended
 * (core/replica-router.js). Arrival order is kept: `wakeFirst` serves the
 * oldest match. One timer per waiter, cleared when it is woken.
 */
class WaitList {
  #entries = []

  /** How many wait now. */
  get length () {
    return this.#entries.length
  }

  /**
   * Wait until woken or `ms` passed.
   * @param {number} ms
   * @param {*} [tag] what `wakeFirst`'s predicate sees
   * @returns {Promise<boolean>} true: woken; false: timed out
   */
  wait (ms, tag) {
    return new Promise((resolve) => {
      const entry = {
        tag,
        wake: () => { clearTimeout(entry.timer); resolve(true) },
        timer: setTimeout(() => {
          const at = this.#entries.indexOf(entry)
          if (at !== -1) this.#entries.splice(at, 1)
          resolve(false)
        }, ms)
      }
      this.#entries.push(entry)
    })
  }

  /** Wake every waiter. */
  wakeAll () {
    if (this.#entries.length === 0) return
    for (const entry of this.#entries.splice(0)) entry.wake()
  }

  /**
   * Wake the oldest waiter whose tag `match` accepts.
   * @param {(tag) => boolean} match
   * @returns {boolean} whether one was woken
   */
  wakeFirst (match) {
    for (let k = 0; k < this.#entries.length; k++) {
      if (match(this.#entries[k].tag)) {
        this.#entries.splice(k, 1)[0].wake()
        return true
      }
    }
    return false
  }
}

module.exports = { WaitList }
