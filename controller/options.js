'use strict'

const os = require('node:os')
const { getStrategy } = require('./strategies')
const { validateLoadMetric } = require('../core/load-metric')
const { InvalidArgumentError } = require('../core/errors')
const { silent } = require('../core/logger')
const { validateToken } = require('../core/cluster-auth')

/** Every option of createController and its default. */
const defaults = Object.freeze({
  host: '127.0.0.1',
  port: 0,
  advertiseHost: '127.0.0.1',
  strategy: 'chopper', // 'chopper' | 'consistent-hash'
  strategyOptions: {}, // thresholds, see docs/algorithm.md
  // What the strategy balances (core/load-metric.js): 'cost', the busy ms the
  // app servers report per range, or 'requests', their request counts.
  loadMetric: 'cost',
  // A quiet cluster is left as it is: with loadMetric 'cost', a round whose
  // busiest server reported less than this fraction of the period as busy
  // time (and in which every server holds a slice) runs no strategy, so light
  // load does not churn caches on noise. 0: balance at any load.
  quietBelow: 0.5,
  periodMs: 5000,
  historySize: 120, // rounds kept for /v1/status
  evictAfterFailures: 3, // consecutive failed load collections before a server is dropped (re-registering does not reset the count)
  requestTimeoutMs: 2000, // pushes and load collection
  // Fenced handoff (docs/ownership.md): 'fenced' revokes, waits for the old
  // owner's acknowledgement (or its lease to lapse), then grants; 'none' pushes
  // the new map to everyone at once: unsafe, a comparison switch for
  // test/integration/fencing.test.js and bench/state-saves.js.
  handoff: 'fenced',
  leaseMs: 1500, // member lease; a silent member's slices move once it lapsed (plus the margin)
  // The renewal period lease grants ask members for (appserver-lib follows it
  // unless given its own). undefined = min(250, leaseMs / 4).
  renewMs: undefined,
  // Large clusters (docs/control-plane.md): from this many members on, grants
  // carry the longer lease and renewal period below, so renewals cost a
  // bounded share of a core while a silent member is still detected within 3 s.
  largeClusterAt: 50,
  largeLeaseMs: undefined, // undefined = 2500 with the default leaseMs, else leaseMs (no change at scale)
  largeRenewMs: undefined, // undefined = largeLeaseMs / 2.5
  // Membership changes (joins, leaves, drains, lapses) in batches
  // (controller/membership.js): a batch goes out when no handoff is in
  // progress and the last went out at least membershipBatchMaxMs ago
  // (membershipBatchMs for a batch with a leave): after a quiet spell at once,
  // while changes keep coming once a window.
  membershipBatchMs: 50,
  membershipBatchMaxMs: 500,
  // A storm: this many membership changes within membershipBatchMaxMs. Its
  // changes wait up to four windows (else one) for a handoff in progress to
  // be granted before they supersede it.
  membershipStormAt: 16,
  // While no traffic was seen, a batch in a cluster of up to this many servers
  // re-lays the keyspace evenly; above it (or once traffic came) joiners take
  // their share from the servers holding most (controller/join-placement.js).
  pristineRelayUpTo: 64,
  // Pushes in flight at most, by HTTP and over lease streams (the rest queue;
  // renewals are answered meanwhile), and generations kept to send diffs
  // from (older holders get the full map).
  pushConcurrency: 64,
  streamPushConcurrency: 64,
  pushHistory: 64,
  leaseMarginMs: 100, // added on the controller's side for clock-rate drift
  leaseCheckMs: 50, // how often lapsed leases and handoff deadlines are checked
  // A new controller cannot know what a predecessor granted: it issues its
  // first assignment only this long after it started, when every earlier lease
  // has lapsed. undefined = leaseMs + leaseMarginMs; 0 only for a cluster that
  // certainly had no controller before (cluster/local-cluster.js).
  startupFenceMs: undefined,
  // Generations start above this, so they keep rising across controller
  // restarts (a DynamoDB item's version carries the generation that wrote it).
  // undefined = the wall clock in ms at creation.
  generationBase: undefined,
  // The dashboard (GET /dashboard) and its live feed (GET /v1/events, docs in controller/dashboard/).
  heatmapBuckets: 256, // the keyspace cut into this many equal buckets per round, for the heatmap
  eventClients: 32, // concurrent /v1/events streams; more get a JSON 503
  eventHeartbeatMs: 15000, // comment line on an idle stream
  eventCoalesceMs: 250, // membership and push changes are sent at most this often
  // High availability (docs/controller-ha.md). With a state store the
  // assignment, generation and membership persist in it (every assignment is
  // saved before it is pushed), and the controllers sharing it elect one
  // leader. Without one this controller leads alone and its state lives in memory.
  store: undefined, // a DynamoStateStore (controller/state-store.js)
  controllerId: undefined, // this controller's name in the leader lease; undefined = hostname-pid
  electionLeaseMs: 2000, // the leader lease; a standby takes over this long (plus the margin) after the leader's last renewal
  electionCheckMs: 200, // how often a standby reads the lease
  electionMarginMs: 200, // added to a standby's wait, for clock-rate drift between controllers
  // The shared cluster secret (docs/security.md): with it every member and
  // operator call that changes state, and GET /v1/assignment, must be signed,
  // and pushes and load collection are signed. undefined: unauthenticated.
  clusterToken: undefined,
  logger: silent
})

const ID = /^[A-Za-z0-9._-]{1,128}$/

/**
 * Every option validated, with what derives from them: the strategy and its
 * options in force, the controller id, the startup fence and the generation
 * base. Throws InvalidArgumentError naming the first wrong option.
 */
function resolveOptions (options = {}) {
  const opts = { ...defaults, ...options }
  if (opts.renewMs === undefined && Number.isInteger(opts.leaseMs)) opts.renewMs = Math.max(1, Math.min(250, Math.floor(opts.leaseMs / 4)))
  if (opts.largeLeaseMs === undefined) opts.largeLeaseMs = options.leaseMs === undefined ? 2500 : opts.leaseMs
  if (opts.largeRenewMs === undefined && Number.isInteger(opts.largeLeaseMs)) opts.largeRenewMs = Math.max(1, Math.floor(opts.largeLeaseMs / 2.5))
  if (!Number.isInteger(opts.periodMs) || opts.periodMs < 10) throw new InvalidArgumentError('invalid periodMs: expected an integer >= 10')
  if (!Number.isInteger(opts.evictAfterFailures) || opts.evictAfterFailures < 1) throw new InvalidArgumentError('invalid evictAfterFailures: expected an integer >= 1')
  if (typeof opts.quietBelow !== 'number' || !(opts.quietBelow >= 0 && opts.quietBelow <= 1)) throw new InvalidArgumentError('invalid quietBelow: expected a fraction of the period from 0 to 1')
  if (!['fenced', 'none'].includes(opts.handoff)) throw new InvalidArgumentError('invalid handoff: expected "fenced" or "none"')
  const loadMetric = validateLoadMetric(opts.loadMetric)
  for (const k of ['leaseMs', 'leaseCheckMs', 'renewMs', 'largeClusterAt', 'largeLeaseMs', 'largeRenewMs', 'membershipBatchMs', 'membershipBatchMaxMs', 'pushConcurrency', 'streamPushConcurrency', 'pushHistory', 'pristineRelayUpTo', 'membershipStormAt']) {
    if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new InvalidArgumentError(`invalid ${k}: expected an integer >= 1`)
  }
  if (!Number.isInteger(opts.leaseMarginMs) || opts.leaseMarginMs < 0) throw new InvalidArgumentError('invalid leaseMarginMs: expected an integer >= 0')
  if (!Number.isInteger(opts.historySize) || opts.historySize < 1) throw new InvalidArgumentError('invalid historySize: expected an integer >= 1')
  if (!Number.isInteger(opts.heatmapBuckets) || opts.heatmapBuckets < 1 || opts.heatmapBuckets > 4096) throw new InvalidArgumentError('invalid heatmapBuckets: expected an integer from 1 to 4096')
  for (const k of ['eventClients', 'eventHeartbeatMs', 'eventCoalesceMs']) {
    if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new InvalidArgumentError(`invalid ${k}: expected an integer >= 1`)
  }
  for (const k of ['electionLeaseMs', 'electionCheckMs']) {
    if (!Number.isInteger(opts[k]) || opts[k] < 10) throw new InvalidArgumentError(`invalid ${k}: expected an integer >= 10`)
  }
  if (!Number.isInteger(opts.electionMarginMs) || opts.electionMarginMs < 0) throw new InvalidArgumentError('invalid electionMarginMs: expected an integer >= 0')
  if (opts.store !== undefined && (opts.store === null || typeof opts.store.saveState !== 'function' || typeof opts.store.readLease !== 'function')) {
    throw new InvalidArgumentError('invalid store: expected a state store (controller/state-store.js)')
  }
  const controllerId = opts.controllerId === undefined ? `${os.hostname()}-${process.pid}` : opts.controllerId
  if (typeof controllerId !== 'string' || !ID.test(controllerId)) throw new InvalidArgumentError('invalid controllerId: expected 1-128 characters of [A-Za-z0-9._-]')
  // A predecessor may have granted either lease: wait out the longer.
  const startupFenceMs = opts.startupFenceMs === undefined ? Math.max(opts.leaseMs, opts.largeLeaseMs) + opts.leaseMarginMs : opts.startupFenceMs
  if (!Number.isInteger(startupFenceMs) || startupFenceMs < 0) throw new InvalidArgumentError('invalid startupFenceMs: expected an integer >= 0')
  const generationBase = opts.generationBase === undefined ? Date.now() : opts.generationBase
  if (!Number.isSafeInteger(generationBase) || generationBase < 0 || generationBase > Number.MAX_SAFE_INTEGER / 2) throw new InvalidArgumentError('invalid generationBase: expected a non-negative integer below 2^52')
  const strategy = getStrategy(opts.strategy)
  const strategyOptions = { ...opts.strategyOptions }
  // Validate the strategy options now rather than at the first round.
  strategy.initial({ probe: { url: 'http://127.0.0.1:1' } }, strategyOptions)
  // What status shows: every option in force, defaults included.
  const effectiveStrategyOptions = { ...strategy.defaults }
  for (const [k, v] of Object.entries(strategyOptions)) if (v !== undefined) effectiveStrategyOptions[k] = v
  if (opts.renewMs * 2 > opts.leaseMs || opts.largeRenewMs * 2 > opts.largeLeaseMs) throw new InvalidArgumentError('invalid renewMs: a lease must span at least two renewals (renewMs, largeRenewMs)')
  if (opts.membershipBatchMaxMs < opts.membershipBatchMs) throw new InvalidArgumentError('invalid membershipBatchMaxMs: expected at least membershipBatchMs')
  return { ...opts, controllerId, startupFenceMs, generationBase, strategy, strategyOptions, effectiveStrategyOptions, loadMetric, clusterToken: validateToken(opts.clusterToken) }
}

module.exports = { defaults, resolveOptions, ID }
