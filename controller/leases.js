'use strict'

const { performance } = require('node:perf_hooks')

/**
 * The controller's side of member leases (docs/ownership.md). A grant is
 * measured from when the controller made it, plus a margin for clock-rate
 * drift; the member measures the same lease from when it *sent* the request,
 * which is earlier, so the member always believes its lease ends first. The
 * controller relies on a lapsed lease in two places: a silent member's slices
 * go to others only after it lapsed, and a revoke that a member never
 * acknowledged counts as done once the lease it held at the revoke lapsed.
 */
class LeaseTable {
  /** @param {{ leaseMs: number, marginMs: number, now?: () => number }} options */
  constructor ({ leaseMs, marginMs, now = () => performance.now() }) {
    this.leaseMs = leaseMs
    this.marginMs = marginMs
    this.now = now
    this.expiry = new Map() // id -> controller-clock ms
  }

  /**
   * Grant (or renew) `id`'s lease; returns what the member is told.
   * `terms` (docs/control-plane.md, lease-terms.js) may name a longer lease
   * and the renewal period the member is asked for.
   */
  grant (id, minGeneration, terms) {
    const leaseMs = terms ? terms.leaseMs : this.leaseMs
    this.expiry.set(id, this.now() + leaseMs + this.marginMs)
    return terms ? { leaseMs, renewMs: terms.renewMs, minGeneration } : { leaseMs, minGeneration }
  }

  /** When `id`'s current lease lapses (controller clock); -Infinity when it holds none. */
  expiresAt (id) {
    const t = this.expiry.get(id)
    return t === undefined ? -Infinity : t
  }

  live (id) {
    return this.expiresAt(id) > this.now()
  }

  /** Ids whose lease lapsed by `now`; still listed (the caller confirms, then deletes). */
  lapsed (now = this.now()) {
    const out = []
    for (const [id, t] of this.expiry) if (t <= now) out.push(id)
    return out
  }

  /** Ids whose lease lapsed; they are forgotten. */
  takeExpired () {
    const now = this.now()
    const out = []
    for (const [id, t] of this.expiry) {
      if (t <= now) {
        out.push(id)
        this.expiry.delete(id)
      }
    }
    return out
  }

  /** Milliseconds until `id`'s lease lapses (0 when it has). */
  remaining (id) {
    return Math.max(0, this.expiresAt(id) - this.now())
  }

  delete (id) {
    this.expiry.delete(id)
  }
}

module.exports = { LeaseTable }
