'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { lastAtOrBelow } = require('../../core/sorted-search')

/**
 * Which cache entries this server may still trust, per slice-key range.
 *
 * The paper relied on the 10 s TTL alone, which lets a server serve a stale
 * value when a slice moves A -> B -> A within the TTL and B took a write in
 * between. Instead every cache entry carries the tag `now()` returned when
 * the operation that produced it started, and an entry is trusted only when
 * its tag is at least the epoch at which this server last gained the range
 * holding its key. Regaining a range therefore retires, in O(1) and
 * synchronously (before any request is checked against the new map), every
 * entry cached before the range was lost, however slow the background clean-up
 * of Redis is. Released ranges trust nothing until they are gained again, so
 * a request admitted just before the switch cannot read a value the new owner
 * may already have overwritten.
 *
 * `invalidateAll()` raises a floor under every range: used when a cache write
 * failed, so an entry we could not overwrite or delete is never served.
 */
class OwnershipEpochs {
  constructor () {
    this.counter = 0
    this.floor = 0
    // Segments tiling [0, 2^32): starts[i] .. starts[i+1] has epochs[i].
    // Before any hook call everything is epoch 0, i.e. trusted (standalone use).
    this.starts = [0]
    this.epochs = [0]
  }

  /** Tag for an operation starting now. */
  now () {
    return this.counter
  }

  /** This server just gained `ranges` (normalized `{start, end}`). */
  acquire (ranges) {
    this.#assign(ranges, ++this.counter)
  }

  /** This server just lost `ranges`: trust nothing there until regained. */
  release (ranges) {
    this.#assign(ranges, Infinity)
  }

  /** Distrust every entry tagged before now. */
  invalidateAll () {
    this.floor = ++this.counter
  }

  /** Lowest tag a cache entry for slice key `key` needs to be served. */
  required (key) {
    return Math.max(this.floor, this.epochs[lastAtOrBelow(this.starts, key)])
  }

  /** True when an entry with `tag` for slice key `key` may be served. */
  trusts (tag, key) {
    return tag >= this.required(key)
  }

  /** Number of segments (bounded by the number of owned pieces, not by history). */
  get size () {
    return this.starts.length
  }

  #assign (ranges, epoch) {
    if (ranges.length === 0) return
    // Expand to explicit segments, overwrite, then merge equal neighbours.
    let segs = this.starts.map((start, i) => ({
      start,
      end: i + 1 < this.starts.length ? this.starts[i + 1] : KEYSPACE_SIZE,
      epoch: this.epochs[i]
    }))
    for (const r of ranges) {
      const next = []
      for (const s of segs) {
        if (s.end <= r.start || s.start >= r.end) {
          next.push(s)
          continue
        }
        if (s.start < r.start) next.push({ start: s.start, end: r.start, epoch: s.epoch })
        if (s.end > r.end) next.push({ start: r.end, end: s.end, epoch: s.epoch })
      }
      next.push({ start: r.start, end: r.end, epoch })
      next.sort((a, b) => a.start - b.start)
      segs = next
    }
    const starts = []
    const epochs = []
    for (const s of segs) {
      if (epochs.length > 0 && epochs[epochs.length - 1] === s.epoch) continue
      starts.push(s.start)
      epochs.push(s.epoch)
    }
    this.starts = starts
    this.epochs = epochs
  }
}

module.exports = { OwnershipEpochs }
