'use strict'

const { lastAtOrBelow } = require('./sorted-search')

const NONE = Object.freeze([])

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
    this.owners = new Array(n) // primary per slice
    this.replicas = new Array(n) // every listed server, primary first
    this.admitters = new Array(n) // servers that may admit it now (docs/replication.md)
    this.moving = new Uint8Array(n) // 1: in a fenced handoff; only its holders admit it
    this.hasMoving = false
    this.hasReplicas = false
    for (let i = 0; i < n; i++) {
      const s = assignment.slices[i]
      this.starts[i] = s.start
      this.owners[i] = s.servers[0]
      this.replicas[i] = s.servers
      if (s.servers.length > 1) this.hasReplicas = true
      if (s.moving) {
        this.moving[i] = 1
        this.hasMoving = true
        this.admitters[i] = s.holders || NONE
      } else {
        this.admitters[i] = s.servers
      }
    }
  }

  /** Whether server `id` may admit slice `i` now. */
  admits (i, id) {
    return this.admitters[i].includes(id)
  }

  /**
   * Index of the slice holding `key`: the last slice whose start <= key.
   * @param {number} key slice key in [0, 2^32)
   */
  indexOf (key) {
    return lastAtOrBelow(this.starts, key, this.size)
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
