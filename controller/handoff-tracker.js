'use strict'

/**
 * Which servers still have to give up what a revoke took from them before
 * the controller may grant it elsewhere (docs/ownership.md). A loser is done
 * when it reports having drained the revoke generation (its push answer or a
 * lease renewal says so), or when the lease it held at the revoke has lapsed:
 * past that instant it can only admit under a map at least as new as the
 * revoke, because the controller renews leases only for members that hold
 * the current map.
 */
class HandoffTracker {
  constructor () {
    this.waiting = new Map() // id -> { generation, deadline }
  }

  /** `id` must drain `generation`, or its lease must lapse at `deadline` (controller clock). */
  add (id, generation, deadline) {
    const prev = this.waiting.get(id)
    this.waiting.set(id, {
      generation: prev ? Math.max(prev.generation, generation) : generation,
      deadline: prev ? Math.max(prev.deadline, deadline) : deadline
    })
  }

  /** A report from `id`; true when it completed what it owed. */
  ack (id, drainedGeneration) {
    const w = this.waiting.get(id)
    if (!w || !(drainedGeneration >= w.generation)) return false
    this.waiting.delete(id)
    return true
  }

  /** Drop losers whose deadline passed; returns their ids. */
  expire (now) {
    const out = []
    for (const [id, w] of this.waiting) {
      if (w.deadline <= now) {
        out.push(id)
        this.waiting.delete(id)
      }
    }
    return out
  }

  /** Ids of the servers still owing an acknowledgement. */
  ids () {
    return this.waiting.keys()
  }

  get idle () {
    return this.waiting.size === 0
  }

  snapshot (now) {
    return Object.fromEntries([...this.waiting].map(([id, w]) => [id, { generation: w.generation, leaseLapsesInMs: Math.max(0, Math.round(w.deadline - now)) }]))
  }

  clear () {
    this.waiting.clear()
  }
}

module.exports = { HandoffTracker }
