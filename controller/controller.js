'use strict'

const http = require('node:http')
const { Pusher } = require('./pusher')
const { LoadCollector, roundWaitMs } = require('./load-collector')
const { LeaseTable } = require('./leases')
const { HandoffTracker } = require('./handoff-tracker')
const { LeaderElection } = require('./leader-election')
const { defaults, resolveOptions } = require('./options')
const { createControllerMetrics } = require('./metrics')
const { installHandoff } = require('./handoff')
const { installMembership } = require('./membership')
const { installPersistence } = require('./persistence')
const { installRounds } = require('./rounds')
const { installStatus } = require('./status')
const { createRoutes } = require('./routes')
const { listen, close } = require('../core/http')
const { NoAssignmentError, UnknownServerError, describeValue } = require('../core/errors')
const { warnUnauthenticated } = require('../core/cluster-auth')
const { SseHub } = require('./dashboard/sse-hub')

/**
 * The controller (docs/control-plane.md): membership in batches, the
 * periodic balancing round, fenced handoff, versioned map distribution, and
 * status. This file only wires the parts, each a concept of its own file, around
 * one shared state `c`; `runRound()` is exposed so tests can drive rounds
 * without waiting for the timer.
 */
function createController (options = {}) {
  const opts = resolveOptions(options)
  const log = opts.logger.child({ component: 'controller' })
  if (opts.clusterToken === undefined) warnUnauthenticated(log)

  const c = {
    opts,
    log,
    store: opts.store,
    strategy: opts.strategy,
    strategyOptions: opts.strategyOptions,
    effectiveStrategyOptions: opts.effectiveStrategyOptions,
    loadMetric: opts.loadMetric,
    controllerId: opts.controllerId,
    fenced: opts.handoff === 'fenced',
    servers: new Map(), // id -> { url, controlUrl, failures, draining, loadUnknown, generation, drainedGeneration }
    frontends: new Map(), // id -> { controlUrl }
    // Failed-collection counts outlive a server's record: re-registering resets
    // nothing (a server the controller cannot reach but that can reach the
    // controller must still be evicted). Cleared by a successful collection.
    failureCounts: new Map(),
    lastEntries: new Map(), // server id -> its last successful load report (stand-in while its load is unknown)
    costlessWarned: new Set(), // servers whose reports carry no cost (an older appserver-lib), warned about once
    // A round waits half a period for load reports; a slower answer is taken the
    // next round, and only a collection that fails within requestTimeoutMs counts
    // towards eviction (controller/load-collector.js).
    collector: new LoadCollector({ timeoutMs: opts.requestTimeoutMs, waitMs: roundWaitMs(opts.periodMs), clusterToken: opts.clusterToken }),
    leases: new LeaseTable({ leaseMs: opts.leaseMs, marginMs: opts.leaseMarginMs }),
    handoff: new HandoffTracker(),
    handoffs: { revokes: 0, grants: 0, direct: 0, leaseLapses: 0 },
    counts: { renewals: 0, registrations: 0, leaseExpiries: 0, evictions: 0, batches: 0, generations: {} }, // generations: issued, by phase
    history: [],
    columns: [], // heatmap: one keyspaceColumn per round, beside `history` (kept out of /v1/status: 2 KB each)
    events: new SseHub({ maxClients: opts.eventClients, heartbeatMs: opts.eventHeartbeatMs, logger: log }),
    // `assignment` is the newest map issued (a revoke map while a handoff is in
    // progress); `target` is the layout a handoff in progress will grant.
    assignment: null,
    target: null,
    // What members may hold: the newest assignment saved to the store (when
    // there is one) and handed to the pusher. Registration and lease answers
    // carry it, never an assignment not saved yet, so a successor controller
    // resumes from a layout at least as new as any member's.
    published: null,
    // No member admits under a lease granted before this instant (controller
    // clock): the first assignment after none waits for it.
    leaseHorizon: -Infinity,
    pristine: true, // no traffic seen yet: membership batches re-lay a small cluster evenly
    // Highest generation any member reported holding. After a controller restart
    // members hold generations this process never issued; numbering above them
    // keeps their stale-generation check from refusing every new push.
    generationFloor: opts.generationBase,
    round: 0,
    lastLoads: null,
    epoch: 0, // the leader lease's epoch; 0 without a store
    active: !opts.store, // leading: running rounds and answering members
    election: null,
    url: null,
    timer: null,
    deferTimer: null,
    running: null,
    saveLoop: null // the latest save loop, which close() lets finish before releasing the lease
  }
  // Leading right now: elected, and the leader lease not lapsed by our own
  // clock (it may lapse before the election notices and steps us down).
  c.leading = () => c.active && (!c.election || c.election.leading)
  c.resetPusher = () => {
    if (c.pusher) c.pusher.close()
    c.pusher = new Pusher({ timeoutMs: opts.requestTimeoutMs, concurrency: opts.pushConcurrency, streamConcurrency: opts.streamPushConcurrency, canStream: (id) => c.streams.canPush(id), historySize: opts.pushHistory, selectiveAbove: opts.largeClusterAt, logger: log, onAck: (key, body) => c.onPushAck(key, body), viaStream: (id, b, ms) => c.streams.requestPush(id, b, ms), clusterToken: opts.clusterToken })
  }
  c.resetPusher()
  const { registry, m } = createControllerMetrics(c)
  c.registry = registry
  c.m = m
  installStatus(c)
  installHandoff(c)
  installPersistence(c)
  installMembership(c)
  installRounds(c)

  /**
   * Hand the slice holding slice key `k` to server `to` (an operator's move;
   * the tests drive many of them). Fenced like any other change.
   */
  c.moveSlice = function moveSlice (k, to) {
    const current = c.layout()
    if (!current) throw new NoAssignmentError('no assignment: no app server has registered')
    if (typeof to !== 'string' || !Object.hasOwn(current.servers, to)) throw new UnknownServerError(`unknown or draining app server ${describeValue(to)}`)
    let i = 0
    while (current.slices[i].end <= k) i++
    const slice = current.slices[i]
    const out = { start: slice.start, end: slice.end, from: slice.servers[0], to, changed: slice.servers[0] !== to }
    if (!out.changed) return out
    c.pristine = false
    const slices = current.slices.slice()
    slices[i] = { start: slice.start, end: slice.end, servers: [to] }
    c.commit({ ...current, slices }, `move ${slice.start}-${slice.end} ${slice.servers[0]}->${to}`)
    return out
  }

  /** Stop every timer and the pusher (close and crash). */
  function shutdown () {
    c.active = false
    clearTimeout(c.timer)
    clearInterval(leaseTimer)
    clearTimeout(c.deferTimer)
    c.clearPending()
    c.timer = null
    c.pusher.close()
    c.events.close() // open streams would keep server.close() waiting
    c.streams.close() // lease streams too
  }

  const routes = createRoutes(c)
  const server = http.createServer(routes.listener)
  server.on('upgrade', routes.streams.upgrade)
  c.streams = routes.streams
  c.collector.viaStream = (id, ack, timeoutMs) => c.streams.requestLoad(id, ack, timeoutMs)
  let leaseTimer = null
  return {
    async start () {
      // Thousands of members may connect at once (a join storm, a controller
      // restart): a short accept queue drops their SYNs, and each retries a second later.
      const port = await listen(server, opts.port, opts.host, { backlog: 4096 })
      c.url = `http://${opts.advertiseHost}:${port}`
      leaseTimer = setInterval(c.checkLeases, opts.leaseCheckMs)
      if (c.store) {
        await c.store.ensureTable()
        c.election = new LeaderElection({
          store: c.store,
          id: c.controllerId,
          url: c.url,
          leaseMs: opts.electionLeaseMs,
          checkMs: opts.electionCheckMs,
          marginMs: opts.electionMarginMs,
          onElected: c.takeOver,
          onDeposed: c.stepDown,
          logger: log
        })
        c.election.start()
      } else {
        c.leaseHorizon = Math.max(c.leaseHorizon, c.leases.now() + opts.startupFenceMs)
        c.schedule()
      }
      log.info({ url: c.url, strategy: c.strategy.name, loadMetric: c.loadMetric, periodMs: opts.periodMs, controllerId: c.controllerId, store: c.store ? c.store.describe() : 'memory' }, 'controller listening')
      return { url: c.url }
    },
    async close () {
      shutdown() // no more rounds, pushes or saves
      if (c.running) await c.running.catch(() => {})
      if (c.saveLoop) await c.saveLoop // a save under way ends first: no write after the lease is gone
      if (c.election) await c.election.stop() // releases the lease: a standby takes over at once
      await close(server)
      await c.collector.close()
    },
    /** Die as a killed process would: no lease released, no goodbye (tests, chaos). */
    async crash () {
      if (c.election) c.election.abandon()
      shutdown()
      server.closeAllConnections()
      await close(server)
      await c.collector.close()
    },
    runRound: () => c.runRound(),
    status: () => c.status(),
    /** Counters cheap enough to poll at thousands of members (controller/status.js). */
    stats: () => c.stats(),
    get leading () { return c.leading() },
    get epoch () { return c.leading() ? c.epoch : 0 },
    moveSlice: (k, to) => c.moveSlice(k, to),
    settled: (timeoutMs) => c.settled(timeoutMs),
    registry,
    get assignment () { return c.assignment },
    /** The newest assignment saved and handed to the pusher (what members may hold). */
    get published () { return c.published },
    get url () { return c.url }
  }
}

module.exports = { createController, defaults }
