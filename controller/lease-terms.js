'use strict'

/**
 * The lease a grant carries and the renewal period it asks for, by cluster
 * size (docs/control-plane.md, "Heartbeats"). Up to `largeClusterAt`
 * members: leaseMs and renewMs; from it on, the longer largeLeaseMs and
 * largeRenewMs, so that renewals per second stay bounded (5,000 members at
 * one a second) while a silent member is still found within
 * largeLeaseMs + leaseMarginMs.
 * @param {number} members registered app servers
 * @param {{ leaseMs: number, renewMs: number, largeClusterAt: number, largeLeaseMs: number, largeRenewMs: number }} opts
 * @returns {{ leaseMs: number, renewMs: number }}
 */
function leaseTerms (members, opts) {
  return members >= opts.largeClusterAt
    ? { leaseMs: opts.largeLeaseMs, renewMs: opts.largeRenewMs }
    : { leaseMs: opts.leaseMs, renewMs: opts.renewMs }
}

module.exports = { leaseTerms }
