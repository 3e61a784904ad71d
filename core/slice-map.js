'use strict'

/**
 * Read-only lookup structure over an assignment: binary search over a typed
 * array of slice starts (paper 4.1). Built once per assignment; lookups do not
 * allocate.
 */
class SliceMap {
  /** @param {object} assignment a validated assignment */
  constructor (assignment) {
    const n = assignment.slices.length
    this.assignment = assignment
    this.generation = assignment.generation
    this.size = n
    this.starts = new Uint32Array(n)
    this.owners = new Array(n)
    this.moving = new Uint8Array(n) // 1: in a fenced handoff, nobody admits it yet
    this.hasMoving = false
    for (let i = 0; i < n; i++) {
      this.starts[i] = assignment.slices[i].start
      this.owners[i] = assignment.slices[i].servers[0]
      if (assignment.slices[i].moving) {
        this.moving[i] = 1
        this.hasMoving = true
      }
    }
  }

  /**
   * Index of the slice holding `key`: the last slice whose start <= key.
   * @param {number} key slice key in [0, 2^32)
   */
  indexOf (key) {
    const starts = this.starts
    let lo = 0
    let hi = this.size - 1
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1
      if (starts[mid] <= key) lo = mid
      else hi = mid - 1
    }
    return lo
  }

  /** Primary owner id of the slice holding `key`. */
  ownerOf (key) {
    return this.owners[this.indexOf(key)]
  }

  /** Base URL of a server id, or undefined. */
  urlOf (serverId) {
    const s = this.assignment.servers[serverId]
    return s && s.url
  }
}

module.exports = { SliceMap }
