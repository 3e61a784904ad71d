'use strict'

const http = require('node:http')
const os = require('node:os')
const express = require('express')
const { Registry, Counter, Gauge } = require('prom-client')
const { Pusher } = require('./pusher')
const { LoadCollector, roundWaitMs } = require('./load-collector')
const { LeaseTable } = require('./leases')
const { HandoffTracker } = require('./handoff-tracker')
const { planHandoff } = require('./handoff-plan')
const { LeaderElection } = require('./leader-election')
const { getStrategy } = require('./strategies')
const { sameLayout, serverLoads, imbalance, keyChurn, withoutMoving, ownedRanges, checkPlausible } = require('../core/assignment')
const { validateLoadMetric, spreadMetric, totals } = require('../core/load-metric')
const { hotKeysOf } = require('../core/hot-keys')
const { overlap } = require('../core/ranges')
const { KEYSPACE_SIZE, sliceKey } = require('../core/keyspace')
const { jsonErrorHandler, notFound, listen, close } = require('../core/http')
const { InvalidArgumentError, NoAssignmentError, UnknownServerError, LastServerError, NotLeaderError, DeposedError, MemberConflictError, describeValue } = require('../core/errors')
const { silent } = require('../core/logger')
const { RequestVerifier, verifyMiddleware, jsonWithRawBody, validateToken, warnUnauthenticated } = require('../core/cluster-auth')
const { pollUntil } = require('../core/poll')
const { keyspaceColumn, replicaCounts } = require('./dashboard/keyspace-view')
const { SseHub } = require('./dashboard/sse-hub')
const { dashboardRoutes } = require('./dashboard/routes')

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
  // the new map to everyone at once (the old behaviour; for comparison).
  handoff: 'fenced',
  leaseMs: 1500, // member lease; a silent member's slices move once it lapsed (plus the margin)
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
// printable ASCII host[:port], no path: a control character is no part of a host (found by fuzz/)
const URL_RE = /^https?:\/\/[\x21-\x2e\x30-\x7e]+$/

/**
 * The controller: membership, the periodic balancing round, assignment
 * pushes, and status. `runRound()` is exposed so tests can drive rounds
 * without waiting for the timer.
 */
function createController (options = {}) {
  const opts = { ...defaults, ...options }
  if (!Number.isInteger(opts.periodMs) || opts.periodMs < 10) throw new InvalidArgumentError('invalid periodMs: expected an integer >= 10')
  if (!Number.isInteger(opts.evictAfterFailures) || opts.evictAfterFailures < 1) throw new InvalidArgumentError('invalid evictAfterFailures: expected an integer >= 1')
  if (typeof opts.quietBelow !== 'number' || !(opts.quietBelow >= 0 && opts.quietBelow <= 1)) throw new InvalidArgumentError('invalid quietBelow: expected a fraction of the period from 0 to 1')
  if (!['fenced', 'none'].includes(opts.handoff)) throw new InvalidArgumentError('invalid handoff: expected "fenced" or "none"')
  const loadMetric = validateLoadMetric(opts.loadMetric)
  for (const k of ['leaseMs', 'leaseCheckMs']) {
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
  const store = opts.store
  const startupFenceMs = opts.startupFenceMs === undefined ? opts.leaseMs + opts.leaseMarginMs : opts.startupFenceMs
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
  const log = opts.logger.child({ component: 'controller' })
  const clusterToken = validateToken(opts.clusterToken)
  if (clusterToken === undefined) warnUnauthenticated(log)

  const servers = new Map() // id -> { url, controlUrl, failures, draining, generation, drainedGeneration }
  const frontends = new Map() // id -> { controlUrl }
  // Failed-collection counts outlive a server's record: re-registering resets
  // nothing (a server the controller cannot reach but that can reach the
  // controller must still be evicted). Cleared by a successful collection.
  const failureCounts = new Map()
  const newPusher = () => new Pusher({ timeoutMs: opts.requestTimeoutMs, logger: log, onAck: onPushAck, clusterToken })
  let pusher = newPusher()
  // A round waits half a period for load reports; a slower answer is taken the
  // next round, and only a collection that fails within requestTimeoutMs counts
  // towards eviction (controller/load-collector.js).
  const collector = new LoadCollector({ timeoutMs: opts.requestTimeoutMs, waitMs: roundWaitMs(opts.periodMs), clusterToken })
  const leases = new LeaseTable({ leaseMs: opts.leaseMs, marginMs: opts.leaseMarginMs })
  const handoff = new HandoffTracker()
  const fenced = opts.handoff === 'fenced'
  const history = []
  const columns = [] // heatmap: one keyspaceColumn per round, beside `history` (kept out of /v1/status: 2 KB each)
  const events = new SseHub({ maxClients: opts.eventClients, heartbeatMs: opts.eventHeartbeatMs, logger: log })
  // `assignment` is the newest map issued (a revoke map while a handoff is in
  // progress); `target` is the layout a handoff in progress will grant.
  let assignment = null
  let target = null
  const handoffs = { revokes: 0, grants: 0, direct: 0, leaseLapses: 0 }
  const lastEntries = new Map() // server id -> its last successful load report (stand-in while its load is unknown)
  const costlessWarned = new Set() // servers whose reports carry no cost (an older appserver-lib), warned about once
  // No member admits under a lease granted before this instant (controller
  // clock): the first assignment after none waits for it. A controller cannot
  // know a predecessor's grants, so at start it is one lease (startupFenceMs)
  // after the start; later it follows this controller's own grants.
  let leaseHorizon = -Infinity
  let deferTimer = null
  let pristine = true // no traffic seen yet: membership changes re-lay the keyspace evenly
  // Highest generation any member reported holding. After a controller restart
  // members hold generations this process never issued; numbering above them
  // keeps their stale-generation check from refusing every new push.
  let generationFloor = generationBase
  let round = 0
  let timer = null
  let running = null
  let lastLoads = null
  // What members may hold: the newest assignment saved to the store (when
  // there is one) and handed to the pusher. Registration and lease answers
  // carry it, never an assignment not saved yet, so a successor controller
  // resumes from a layout at least as new as any member's.
  let published = null
  let epoch = 0 // the leader lease's epoch; 0 without a store
  let active = !store // leading: running rounds and answering members
  let election = null
  // Leading right now: elected, and the leader lease not lapsed by our own
  // clock (it may lapse before the election notices and steps us down).
  const leading = () => active && (!election || election.leading)
  const persistence = { saving: false, dirty: false, saves: 0, failures: 0, lastError: null, lastBytes: 0, lastParts: 0 }
  let saveLoop = null // the latest save loop, which close() lets finish before releasing the lease

  const registry = new Registry()
  const registers = [registry]
  const m = {
    rounds: new Counter({ name: 'chopper_controller_rounds_total', help: 'Balancing rounds run', registers }),
    quietRounds: new Counter({ name: 'chopper_controller_quiet_rounds_total', help: 'Rounds that ran no strategy because no app server was busy for quietBelow of the period', registers }),
    saveFailures: new Counter({ name: 'chopper_controller_state_save_failures_total', help: 'Failed saves of the controller state (pushes wait for the save)', registers }),
    elections: new Counter({ name: 'chopper_controller_elections_total', help: 'Times this controller became the leader', registers }),
    depositions: new Counter({ name: 'chopper_controller_depositions_total', help: 'Times this controller stopped leading (lease lost or state claimed by a newer epoch)', registers }),
    churn: new Counter({ name: 'chopper_controller_key_churn_total', help: 'Key-range length moved between servers', registers }),
    collectFailures: new Counter({ name: 'chopper_controller_load_collection_failures_total', help: 'Failed load collections', labelNames: ['server'], registers }),
    collectSlow: new Counter({ name: 'chopper_controller_load_collection_slow_total', help: 'Rounds that went on without a server\'s load report, still in flight (its load unknown that round)', labelNames: ['server'], registers }),
    evictions: new Counter({ name: 'chopper_controller_evictions_total', help: 'Servers dropped after failing load collection', registers }),
    leaseExpiries: new Counter({ name: 'chopper_controller_lease_expiries_total', help: 'Servers dropped because their lease lapsed (silent: killed, hung or cut off)', registers }),
    handoffs: new Counter({ name: 'chopper_controller_handoffs_total', help: 'Fenced handoffs by outcome: acked (every loser drained) or lapsed (some loser\'s lease lapsed first)', labelNames: ['outcome'], registers }),
    imbalance: new Gauge({ name: 'chopper_controller_imbalance', help: 'Imbalance (max/mean server load) of the last period', registers })
  }
  new Gauge({ name: 'chopper_controller_generation', help: 'Current assignment generation', registers, collect () { this.set(assignment ? assignment.generation : 0) } }) // eslint-disable-line no-new
  new Gauge({ name: 'chopper_controller_push_failures', help: 'Failed assignment pushes (retried)', registers, collect () { this.set(pusher.stats.failures) } }) // eslint-disable-line no-new
  new Gauge({ name: 'chopper_controller_servers', help: 'Registered app servers', registers, collect () { this.set(servers.size) } }) // eslint-disable-line no-new
  new Gauge({ name: 'chopper_controller_leader', help: '1 while this controller leads', registers, collect () { this.set(leading() ? 1 : 0) } }) // eslint-disable-line no-new
  new Gauge({ name: 'chopper_controller_epoch', help: 'Epoch of the leader lease this controller holds (0: none)', registers, collect () { this.set(leading() ? epoch : 0) } }) // eslint-disable-line no-new

  function serverMap () {
    const out = {}
    for (const [id, s] of servers) if (!s.draining) out[id] = { url: s.url }
    return out
  }

  /** The layout strategies work from: the target of a handoff in progress, else the current map. */
  function layout () {
    return target || (assignment && withoutMoving(assignment))
  }

  function nextGeneration () {
    return Math.max(assignment ? assignment.generation : 0, generationFloor) + 1
  }

  function issue (a, reason, phase) {
    assignment = a
    log.info({ generation: a.generation, reason, phase, slices: a.slices.length }, 'new assignment')
    persist()
    changed()
  }

  /** Hand `a` (the newest saved assignment, or null) to the pusher. */
  function publish (a) {
    if (!a) {
      published = null
      return
    }
    if (published && published.generation >= a.generation) return
    published = store ? { ...a, epoch } : a
    pusher.publish(published)
  }

  /** What a successor needs to resume exactly where this controller is. */
  function snapshot () {
    return {
      assignment,
      target,
      pristine,
      generationFloor,
      servers: [...servers].map(([id, s]) => ({ id, url: s.url, controlUrl: s.controlUrl, draining: s.draining })),
      frontends: [...frontends].map(([id, f]) => ({ id, controlUrl: f.controlUrl }))
    }
  }

  /**
   * Save the state, then publish its assignment. Without a store, publish at
   * once. Saves are serialized and coalesced (each writes the newest state);
   * a failed save is retried and pushes wait for it: members keep the last
   * saved map meanwhile. A refused save means a newer leader: step down.
   */
  function persist () {
    if (!store) return publish(assignment)
    if (!active) return
    persistence.dirty = true
    if (persistence.saving) return
    persistence.saving = true
    saveLoop = (async () => {
      let backoff = 50
      while (persistence.dirty) {
        if (!active) break // stepped down meanwhile
        persistence.dirty = false
        const snap = snapshot()
        const mine = epoch
        try {
          const out = await store.saveState({ epoch: mine, generation: Math.max(snap.assignment ? snap.assignment.generation : 0, snap.generationFloor), state: snap })
          persistence.saves++
          persistence.lastBytes = out.bytes
          persistence.lastParts = out.parts
          persistence.lastError = null
          backoff = 50
        } catch (err) {
          persistence.failures++
          persistence.lastError = err.message
          m.saveFailures.inc()
          if (err instanceof DeposedError) {
            if (election) await election.deposed(err.message)
            break
          }
          log.error({ err: { code: err.code, message: err.message }, retryMs: backoff }, 'could not save the controller state; pushes wait until it is saved')
          persistence.dirty = true
          await new Promise((resolve) => setTimeout(resolve, backoff))
          backoff = Math.min(backoff * 2, 2000)
          continue
        }
        if (leading() && epoch === mine) publish(snap.assignment)
      }
      persistence.saving = false
    })()
  }

  /** Tell dashboard clients that membership, the assignment or push state changed (coalesced). */
  function changed () {
    events.coalesce('state', () => ({ state: state() }), opts.eventCoalesceMs)
  }

  /**
   * Make `next` the layout. Fenced (docs/ownership.md): when some server that
   * may admit a range now does not own it in `next`, first issue the revoke
   * map (moving slices, nobody admits them), and grant `next` once every such
   * loser has drained it or its lease has lapsed. Otherwise, and with
   * handoff 'none', issue `next` at once.
   */
  function commit (next, reason) {
    const current = layout()
    if (current && next && sameLayout(next, current)) return false
    if (!next) {
      assignment = null
      target = null
      handoff.clear()
      persist()
      changed()
      return true
    }
    if (!assignment && fenced && leases.now() < leaseHorizon) {
      // Members may still hold leases on maps this controller never saw
      // (a restart, or every server just left): issue nothing until they lapsed.
      deferFirstAssignment(reason)
      return true
    }
    if (!fenced || !assignment) {
      issue({ ...next, generation: nextGeneration() }, reason, 'direct')
      return true
    }
    const plan = planHandoff(assignment, next)
    const revokeGeneration = nextGeneration()
    const now = leases.now()
    for (const id of plan.losers) {
      // A loser whose lease already lapsed admits nothing: no need to wait for it.
      const deadline = leases.expiresAt(id)
      if (deadline > now) handoff.add(id, revokeGeneration, deadline)
    }
    if (handoff.idle) {
      target = null
      handoffs.direct++
      issue({ ...next, generation: revokeGeneration }, reason, 'direct')
      return true
    }
    target = next
    handoffs.revokes++
    issue({ ...plan.revoke, generation: revokeGeneration }, reason, 'revoke')
    return true
  }

  function deferFirstAssignment (reason) {
    if (deferTimer) return
    const wait = Math.ceil(leaseHorizon - leases.now())
    log.warn({ waitMs: wait, reason }, 'members may hold leases from before: the first assignment waits until they lapsed')
    deferTimer = setTimeout(() => {
      deferTimer = null
      if (!assignment && Object.keys(serverMap()).length > 0) commit(strategy.initial(serverMap(), strategyOptions), `${reason} (after the lease horizon)`)
    }, wait)
  }

  /** Record a lease grant; it is returned to the member only while an assignment exists. */
  function grantLease (id) {
    const lease = leases.grant(id, published ? published.generation : 0)
    if (!published) return undefined
    leaseHorizon = Math.max(leaseHorizon, leases.expiresAt(id))
    return store ? { ...lease, epoch } : lease
  }

  /** Every loser is done: grant the target layout. */
  function maybeGrant (outcome) {
    if (!target || !handoff.idle) return
    const next = target
    target = null
    handoffs.grants++
    m.handoffs.inc({ outcome })
    issue({ ...next, generation: nextGeneration() }, 'grant', 'grant')
  }

  /** A member reported the generation it has drained (push answer or lease renewal). */
  function noteDrained (id, drainedGeneration) {
    if (!Number.isSafeInteger(drainedGeneration)) return
    const s = servers.get(id)
    if (s) s.drainedGeneration = Math.max(s.drainedGeneration || 0, drainedGeneration)
    if (handoff.ack(id, drainedGeneration)) maybeGrant('acked')
  }

  function onPushAck (key, body) {
    if (!key.startsWith('server:') || !body) return
    const id = key.slice('server:'.length)
    const s = servers.get(id)
    if (s && Number.isSafeInteger(body.generation)) s.generation = body.generation
    changed()
    if (Number.isSafeInteger(body.drainedGeneration) && Number.isSafeInteger(body.generation)) {
      noteDrained(id, Math.min(body.drainedGeneration, body.generation, assignment ? assignment.generation : 0))
    }
  }

  /** Periodic: drop members whose lease lapsed; settle revokes whose losers' leases lapsed. */
  function checkLeases () {
    if (!active) return
    const now = leases.now()
    const lapsed = handoff.expire(now)
    if (lapsed.length) {
      handoffs.leaseLapses += lapsed.length
      log.warn({ servers: lapsed }, 'revoke not acknowledged before the lease lapsed; granting anyway')
      maybeGrant('lapsed')
    }
    for (const id of leases.takeExpired()) {
      if (!servers.has(id)) continue
      m.leaseExpiries.inc()
      log.error({ server: id, leaseMs: opts.leaseMs }, 'lease lapsed: the server stopped renewing; moving its slices')
      removeServer(id, 'lease-lapsed')
    }
  }

  /**
   * Note a member's generation; re-issue the current layout above it when it
   * is one this controller never issued (strictly above our current one: the
   * generations we issued are all at or below it, and members report them back).
   */
  function noteGeneration (generation) {
    if (!Number.isSafeInteger(generation)) return
    // A member claiming a generation from the far future would make us number
    // above it, and every member would then refuse our pushes as implausible.
    checkPlausible(generation, Math.max(generationFloor, assignment ? assignment.generation : 0), 'generation')
    if (generation <= generationFloor) return
    generationFloor = generation
    if (assignment && assignment.generation < generationFloor) {
      assignment = { ...assignment, generation: generationFloor + 1 }
      persist()
      changed()
      log.info({ generation: assignment.generation }, 'members hold newer generations (controller restart?): re-issued the assignment above them')
    }
  }

  function addServer (id, url, controlUrl, generation) {
    const known = servers.get(id)
    const same = known && known.url === url // a re-registration, not a new incarnation
    servers.set(id, {
      url,
      controlUrl,
      failures: failureCounts.get(id) || 0,
      draining: same ? known.draining : false,
      loadUnknown: same ? known.loadUnknown : false,
      generation,
      drainedGeneration: same ? known.drainedGeneration : 0
    })
    pusher.addTarget(`server:${id}`, controlUrl)
    changed()
    if (!same || known.controlUrl !== controlUrl) persist() // membership is part of the saved state
    if (same) return
    const current = layout()
    const active = Object.keys(serverMap()).length
    if (!current || pristine) {
      if (active > 0) commit(strategy.initial(serverMap(), strategyOptions), `join ${id}`)
    } else if (Object.hasOwn(current.servers, id)) {
      commit({ ...current, servers: serverMap() }, `url change ${id}`)
    } else {
      commit(strategy.addServer(current, id, url, lastLoadsFor(current), strategyOptions, inputsFor(current)), `join ${id}`)
    }
  }

  /** Take `id`'s slices away (leave, eviction, lapsed lease, drain). */
  function reassignAway (id, reason) {
    const current = layout()
    if (!current || !Object.hasOwn(current.servers, id)) return
    if (Object.keys(serverMap()).every((x) => x === id)) {
      // Keep numbering above what members hold when servers come back.
      generationFloor = Math.max(generationFloor, assignment ? assignment.generation : 0)
      commit(null)
      log.warn({ server: id }, 'last app server left; no assignment')
    } else if (pristine) {
      commit(strategy.initial(serverMap(), strategyOptions), `${reason} ${id}`)
    } else {
      // Slices of a leaving server are reassigned at once, not at the next round.
      const next = strategy.removeServer(current, id, lastLoadsFor(current), strategyOptions, inputsFor(current, id))
      commit(next, `${reason} ${id}`)
    }
  }

  function removeServer (id, reason) {
    if (!servers.has(id)) return false
    servers.delete(id)
    reassignAway(id, reason)
    pusher.removeTarget(`server:${id}`)
    collector.forget(id)
    lastEntries.delete(id)
    leases.delete(id)
    persist()
    changed()
    return true
  }

  function lastLoadsFor (a) {
    return lastLoads ? spreadMetric(a, lastLoads, loadMetric) : new Float64Array(a.slices.length)
  }

  /**
   * Whether this round's load is too light for balance to matter (quietBelow):
   * with loadMetric 'cost', every server's own reported busy time is below
   * quietBelow x the period, every server's load is known this round, and
   * every server holds a slice (a server that joined gets its slices at any
   * load).
   */
  function isQuiet (a, costs, unknown) {
    if (loadMetric !== 'cost' || opts.quietBelow === 0 || unknown.length > 0) return false
    const limit = opts.quietBelow * opts.periodMs
    for (const id of Object.keys(a.servers)) if (!((costs[id] || 0) < limit)) return false
    const holding = new Set()
    for (const s of a.slices) for (const id of s.servers) holding.add(id)
    for (const id of Object.keys(a.servers)) if (!holding.has(id)) return false
    return true
  }

  /**
   * Strategy inputs: servers whose load is unknown (failed collection) never
   * receive slices; `requests`, when given, is how many requests the period's
   * loads were measured over (the loads may be costs), for chopper's noise floor.
   */
  function inputsFor (a, except, requests) {
    const unknownServers = []
    for (const [id, s] of servers) {
      if (id !== except && s.loadUnknown && Object.hasOwn(a.servers, id)) unknownServers.push(id)
    }
    return requests === undefined ? { unknownServers } : { unknownServers, requests }
  }

  /** One balancing period: collect, rebalance, bump, push (paper 4.3). */
  async function runRound () {
    if (running) return running
    running = (async () => {
      const t0 = process.hrtime.bigint()
      round++
      if (!leading() || !assignment) return null
      const { reports, failed, slow, costless } = await collector.collect(servers)
      for (const id of costless) {
        if (loadMetric !== 'cost' || costlessWarned.has(id)) continue
        costlessWarned.add(id)
        log.warn({ server: id }, 'load report without cost (an older appserver-lib?): its load counts as 0 under loadMetric cost')
      }
      const unknown = []
      for (const f of failed) {
        const s = servers.get(f.id)
        m.collectFailures.inc({ server: f.id })
        if (!s) continue
        s.failures++
        s.loadUnknown = true
        failureCounts.set(f.id, s.failures)
        unknown.push(f.id)
        log.warn({ server: f.id, failures: s.failures, err: f.error }, 'load collection failed; its load is unknown this round')
        if (s.failures >= opts.evictAfterFailures) {
          m.evictions.inc()
          log.error({ server: f.id, failures: s.failures }, 'evicting unreachable app server')
          removeServer(f.id, 'evict')
        }
      }
      for (const id of slow) {
        const s = servers.get(id)
        if (!s) continue
        m.collectSlow.inc({ server: id })
        s.loadUnknown = true
        unknown.push(id)
        log.warn({ server: id, waitedMs: collector.waitMs }, 'load collection slow: its load is unknown this round; its answer is taken next round')
      }
      for (const [id, entries] of reports) {
        const s = servers.get(id)
        if (!s) continue
        s.failures = 0
        s.loadUnknown = false
        failureCounts.delete(id)
        lastEntries.set(id, entries)
      }
      if (!assignment) return null

      // A server whose load is unknown keeps its last known report (never
      // zero: a failed collection must not look like the coolest server).
      const before = layout()
      const entries = []
      // Per server, from its own report: with replicated slices a slice's
      // load is served by several servers, so attributing slices to servers
      // would only guess each one's share.
      const own = {}
      for (const [id, s] of servers) {
        const fresh = reports.get(id)
        let mine = null
        if (fresh) mine = fresh
        else if (s.loadUnknown && lastEntries.has(id)) {
          // Its last known counts, only over what it still owns (ranges moved
          // off it since are counted by their new owners' fresh reports).
          mine = clip(lastEntries.get(id), ownedRanges(before, id))
        }
        if (mine === null) continue
        for (const x of mine) entries.push(x)
        own[id] = totals(mine)
      }
      const loads = spreadMetric(before, entries, loadMetric)
      lastLoads = entries
      const total = loads.reduce((x, y) => x + y, 0)
      const perServerLoad = {}
      const perServerRequests = {}
      const perServerCost = {}
      let requests = 0 // fresh reports only: the strategy divides it among the servers whose load is known
      for (const id of Object.keys(before.servers)) {
        const o = own[id] || { requests: 0, cost: 0 }
        perServerLoad[id] = loadMetric === 'cost' ? o.cost : o.requests
        perServerRequests[id] = o.requests
        perServerCost[id] = o.cost
        if (reports.has(id)) requests += o.requests
      }
      const imb = imbalance(perServerLoad)
      let churn = 0
      let changed = false
      // A round held by a handoff in progress is not quiet: the handoff is what ran no strategy.
      const quiet = total > 0 && !target && isQuiet(before, perServerCost, unknown)
      if (total > 0) {
        pristine = false
        if (target) {
          // A handoff is still in progress: balance again once it is granted.
        } else if (quiet) {
          // No server is busy enough for balance to matter: nothing to gain, caches to lose.
          m.quietRounds.inc()
        } else {
          // each slice's hottest key, for splits that cut it out (core/hot-keys.js)
          const hotKeys = hotKeysOf(before, entries, loads, spreadMetric(before, entries, 'requests'))
          const next = strategy.rebalance(before, loads, strategyOptions, { ...inputsFor(before, undefined, requests), hotKeys })
          churn = keyChurn(before, next)
          changed = commit(next, `round ${round}`)
        }
      }
      m.rounds.inc()
      m.churn.inc(churn)
      m.imbalance.set(imb)
      const entry = {
        round,
        at: Date.now(),
        generation: assignment ? assignment.generation : 0,
        loadMetric,
        totalLoad: total,
        perServer: perServerLoad, // in loadMetric
        perServerRequests,
        perServerCost, // ms
        imbalance: imb,
        unknown,
        quiet,
        changed,
        churn,
        churnFraction: churn / KEYSPACE_SIZE,
        slices: assignment ? assignment.slices.length : 0,
        durationMs: Number(process.hrtime.bigint() - t0) / 1e6
      }
      history.push(entry)
      if (history.length > opts.historySize) history.shift()
      const column = { round, at: entry.at, generation: entry.generation, ...keyspaceColumn(before, loads, { buckets: opts.heatmapBuckets, previous: columns[columns.length - 1] }) }
      columns.push(column)
      if (columns.length > opts.historySize) columns.shift()
      events.broadcast('round', () => ({ round: entry, column, state: state() }))
      return entry
    })()
    try {
      return await running
    } finally {
      running = null
    }
  }

  function schedule () {
    timer = setTimeout(async () => {
      try {
        await runRound()
      } catch (err) {
        log.error({ err }, 'balancing round failed')
      }
      if (timer && active) schedule()
    }, opts.periodMs)
  }

  // ---- HTTP API (control plane only) ----
  const app = express()
  app.disable('x-powered-by')
  app.use(jsonWithRawBody('1mb')) // keeps the exact bytes, which the signature covers

  const bad = (msg) => { throw new InvalidArgumentError(msg) }
  // Only the leader answers members and operators' changes; a standby names
  // the leader it last saw (X-Chopper-Leader), and members move to it.
  app.use(['/v1/servers', '/v1/frontends', '/v1/move', '/v1/assignment'], (req, res, next) => {
    if (leading()) return next()
    const leader = election && election.leader && election.leader.url !== url ? election.leader.url : null
    if (leader) res.set('X-Chopper-Leader', leader)
    next(new NotLeaderError(`controller ${controllerId} is a standby${leader ? `; the leader is ${leader}` : ''}`))
  })
  // With a cluster token, the member and operator routes (every change, and
  // the assignment) take signed calls only; status, health, metrics and the
  // dashboard stay open, read-only (docs/security.md). A standby refuses
  // them all before this, naming the leader, which /v1/status shows anyway.
  app.use(['/v1/servers', '/v1/frontends', '/v1/move', '/v1/assignment'], verifyMiddleware(clusterToken === undefined ? null : new RequestVerifier({ token: clusterToken })))
  app.post('/v1/servers', (req, res) => {
    const { id, url, controlUrl, generation = 0 } = req.body || {}
    if (typeof id !== 'string' || !ID.test(id)) bad('invalid id: expected 1-128 characters of [A-Za-z0-9._-]')
    if (!Number.isSafeInteger(generation) || generation < 0) bad('invalid generation: expected a non-negative integer')
    if (typeof url !== 'string' || !URL_RE.test(url)) bad('invalid url: expected http(s)://host:port')
    if (typeof controlUrl !== 'string' || !URL_RE.test(controlUrl)) bad('invalid controlUrl: expected http(s)://host:port')
    if (url === controlUrl) bad('invalid controlUrl: the control plane must listen on its own port')
    // An id belongs to the member holding its lease: another process cannot
    // take it (and its traffic) over with other URLs until that lease lapsed
    // or the member deregistered. A restarted member retries until then.
    const known = servers.get(id)
    if (known && (known.url !== url || known.controlUrl !== controlUrl) && leases.remaining(id) > 0) {
      throw new MemberConflictError(`server id ${id} is held by a live member at other URLs: register again once its lease lapsed (in ${Math.ceil(leases.remaining(id))} ms) or it deregistered`)
    }
    noteGeneration(generation)
    addServer(id, url, controlUrl, generation)
    // The registration answer carries a lease: the member holds the current
    // map once it installs this answer's assignment.
    res.status(201).json({ assignment: published, lease: grantLease(id) })
  })
  app.post('/v1/servers/:id/lease', (req, res) => {
    const id = req.params.id
    const s = servers.get(id)
    if (!s) throw new UnknownServerError(`unknown app server ${id}: register first`)
    const { generation, drainedGeneration } = req.body || {}
    if (!Number.isSafeInteger(generation) || generation < 0) bad('invalid generation: expected a non-negative integer')
    if (!Number.isSafeInteger(drainedGeneration) || drainedGeneration < 0) bad('invalid drainedGeneration: expected a non-negative integer')
    s.generation = generation
    // Nobody drains a generation it does not hold, nor one not issued yet.
    noteDrained(id, Math.min(drainedGeneration, generation, assignment ? assignment.generation : 0))
    // Renewed only for a member that holds the current map: the answer carries
    // it when the member is behind, and the member installs it first.
    const current = published ? published.generation : 0
    res.json({ lease: grantLease(id), assignment: published && generation < current ? published : undefined })
  })
  app.post('/v1/servers/:id/drain', (req, res) => {
    const id = req.params.id
    const s = servers.get(id)
    if (!s) throw new UnknownServerError(`unknown app server ${id}`)
    if (!s.draining) {
      const current = layout()
      if (current && Object.hasOwn(current.servers, id) && Object.keys(serverMap()).every((x) => x === id)) {
        throw new LastServerError(`cannot drain ${id}: it is the last app server; its keys would have nowhere to go`)
      }
      s.draining = true
      log.info({ server: id }, 'draining: moving its slices to other servers')
      reassignAway(id, 'drain')
      persist()
      changed()
    }
    res.json({ draining: id, generation: assignment ? assignment.generation : 0 })
  })
  app.post('/v1/move', async (req, res) => {
    const { key, sliceKey: sk, to, wait = false } = req.body || {}
    if (key !== undefined && (typeof key !== 'string' || key.length === 0)) bad('invalid key: expected a non-empty string')
    if (sk !== undefined && (!Number.isInteger(sk) || sk < 0 || sk >= KEYSPACE_SIZE)) bad('invalid sliceKey: expected an integer in [0, 2^32)')
    if ((key === undefined) === (sk === undefined)) bad('pass exactly one of key and sliceKey')
    if (typeof wait !== 'boolean') bad('invalid wait: expected a boolean')
    const out = moveSlice(key !== undefined ? sliceKey(key) : sk, to)
    if (wait) await settled(Math.max(5000, 4 * opts.leaseMs))
    res.json({ ...out, generation: assignment ? assignment.generation : 0, settled: target === null })
  })
  app.delete('/v1/servers/:id', (req, res) => {
    if (!removeServer(req.params.id, 'leave')) throw new UnknownServerError(`unknown app server ${req.params.id}`)
    failureCounts.delete(req.params.id) // a graceful leave: a later process with this id starts afresh
    res.json({ removed: req.params.id, generation: assignment ? assignment.generation : 0 })
  })
  app.post('/v1/frontends', (req, res) => {
    const { id, controlUrl, generation = 0 } = req.body || {}
    if (typeof id !== 'string' || !ID.test(id)) bad('invalid id: expected 1-128 characters of [A-Za-z0-9._-]')
    if (typeof controlUrl !== 'string' || !URL_RE.test(controlUrl)) bad('invalid controlUrl: expected http(s)://host:port')
    if (!Number.isSafeInteger(generation) || generation < 0) bad('invalid generation: expected a non-negative integer')
    noteGeneration(generation)
    const known = frontends.get(id)
    frontends.set(id, { controlUrl })
    pusher.addTarget(`frontend:${id}`, controlUrl)
    if (!known || known.controlUrl !== controlUrl) persist()
    changed()
    res.status(201).json({ assignment: published })
  })
  app.delete('/v1/frontends/:id', (req, res) => {
    if (!frontends.delete(req.params.id)) throw new UnknownServerError(`unknown front end ${req.params.id}`)
    pusher.removeTarget(`frontend:${req.params.id}`)
    persist()
    changed()
    res.json({ removed: req.params.id })
  })
  app.get('/v1/assignment', (req, res) => {
    if (!published) throw new NoAssignmentError('no assignment: no app server has registered')
    res.json(published)
  })
  app.get('/v1/status', (req, res) => res.json(status()))
  app.get('/healthz', (req, res) => res.json({ ok: true, generation: assignment ? assignment.generation : 0 }))
  app.get('/metrics', async (req, res) => {
    res.set('Content-Type', registry.contentType).send(await registry.metrics())
  })
  app.use(dashboardRoutes({ hub: events, snapshot: dashboardSnapshot }))
  app.use(notFound(), jsonErrorHandler(log))

  /**
   * Hand the slice holding slice key `k` to server `to` (an operator's move;
   * the tests drive many of them). Fenced like any other change.
   */
  function moveSlice (k, to) {
    const current = layout()
    if (!current) throw new NoAssignmentError('no assignment: no app server has registered')
    if (typeof to !== 'string' || !Object.hasOwn(current.servers, to)) throw new UnknownServerError(`unknown or draining app server ${describeValue(to)}`)
    let i = 0
    while (current.slices[i].end <= k) i++
    const slice = current.slices[i]
    const out = { start: slice.start, end: slice.end, from: slice.servers[0], to, changed: slice.servers[0] !== to }
    if (!out.changed) return out
    pristine = false
    const slices = current.slices.slice()
    slices[i] = { start: slice.start, end: slice.end, servers: [to] }
    commit({ ...current, slices }, `move ${slice.start}-${slice.end} ${slice.servers[0]}->${to}`)
    return out
  }

  /** Resolves true when no handoff is in progress, false after `timeoutMs`. */
  function settled (timeoutMs) {
    // Granted means published too: with a state store, saved and handed to the pusher.
    const done = () => target === null && (assignment === null || (published !== null && published.generation === assignment.generation))
    return pollUntil(done, { timeoutMs, intervalMs: 2, what: 'the handoff to be granted' }).then(() => true, () => false)
  }

  /** Everything status() reports but the rounds. */
  function state () {
    const share = assignment ? serverLoads(assignment, new Float64Array(assignment.slices.length)) : {}
    const replicas = assignment ? replicaCounts(assignment) : {}
    const last = history[history.length - 1]
    const lagging = new Map(pusher.lagging().map((l) => [l.target, l]))
    // A target that is not lagging has acknowledged the newest assignment.
    const pushState = (key) => {
      const l = lagging.get(key)
      return l ? { acked: l.acked, lagging: true, failures: l.failures } : { acked: pusher.latest ? pusher.latest.generation : 0, lagging: false, failures: 0 }
    }
    return {
      controllerId,
      role: leading() ? 'leader' : 'standby',
      epoch: leading() ? epoch : 0,
      leader: election ? election.leader : null,
      store: store ? { name: store.describe(), saves: persistence.saves, failures: persistence.failures, lastError: persistence.lastError, lastBytes: persistence.lastBytes, lastParts: persistence.lastParts } : null,
      strategy: strategy.name,
      strategyOptions: { ...effectiveStrategyOptions },
      loadMetric,
      periodMs: opts.periodMs,
      generation: assignment ? assignment.generation : 0,
      servers: Object.fromEntries([...servers].map(([id, s]) => [id, {
        url: s.url,
        controlUrl: s.controlUrl,
        slices: share[id] ? share[id].slices : 0,
        replicas: replicas[id] || 0,
        keyspaceShare: share[id] ? share[id].keys / KEYSPACE_SIZE : 0,
        lastLoad: last && last.perServer[id] !== undefined && !s.loadUnknown ? last.perServer[id] : null, // in loadMetric
        lastRequests: last && last.perServerRequests[id] !== undefined && !s.loadUnknown ? last.perServerRequests[id] : null,
        lastCost: last && last.perServerCost[id] !== undefined && !s.loadUnknown ? last.perServerCost[id] : null,
        loadUnknown: Boolean(s.loadUnknown),
        collectionFailures: s.failures,
        draining: s.draining,
        generation: s.generation,
        drainedGeneration: s.drainedGeneration,
        leaseRemainingMs: Math.round(leases.remaining(id)),
        push: pushState(`server:${id}`)
      }])),
      handoff: { mode: opts.handoff, inProgress: target !== null, waitingFor: handoff.snapshot(leases.now()), ...handoffs },
      leaseMs: opts.leaseMs,
      frontends: Object.fromEntries([...frontends].map(([id, f]) => [id, { controlUrl: f.controlUrl, push: pushState(`frontend:${id}`) }])),
      pushes: { ...pusher.stats, lagging: [...lagging.values()] }
    }
  }

  function status () {
    return { ...state(), rounds: history.slice() }
  }

  /** The dashboard's first event: the state, every round kept and its heatmap column. */
  function dashboardSnapshot () {
    return {
      keyspaceSize: KEYSPACE_SIZE,
      buckets: opts.heatmapBuckets,
      historySize: opts.historySize,
      state: state(),
      rounds: history.slice(),
      columns: columns.slice()
    }
  }

  /**
   * Elected (docs/controller-ha.md): claim the saved state for our epoch
   * (from then on the previous leader cannot save, hence cannot push), resume
   * it exactly, and re-issue the same layout under a new generation and the
   * new epoch. No slice changes hands; members that install it refuse the
   * old leader's pushes and lease grants from then on.
   */
  async function takeOver (lease) {
    epoch = lease.epoch
    await store.claimState(epoch)
    const saved = await store.loadState()
    restore(saved ? saved.state : null)
    active = true
    m.elections.inc()
    log.info({ epoch, resumed: Boolean(assignment), servers: servers.size, frontends: frontends.size, generation: assignment ? assignment.generation : 0 }, 'leading: state resumed')
    schedule()
    if (assignment) {
      issue({ ...assignment, generation: nextGeneration() }, 'takeover', target ? 'revoke' : 'direct')
      // A handoff was in progress: which servers it waited for is not saved;
      // wait for every one of them (each acknowledges at once, or its lease lapses).
      if (target) {
        for (const id of servers.keys()) handoff.add(id, assignment.generation, leases.expiresAt(id))
      }
    } else {
      persist()
    }
    changed()
  }

  /** Forget this process's view and take the saved one (null: a cluster without state yet). */
  function restore (saved) {
    for (const id of servers.keys()) {
      leases.delete(id)
      collector.forget(id)
    }
    servers.clear()
    frontends.clear()
    failureCounts.clear()
    lastEntries.clear()
    handoff.clear()
    pusher.close()
    pusher = newPusher()
    assignment = null
    target = null
    published = null
    lastLoads = null
    pristine = true
    if (!saved) {
      leaseHorizon = Math.max(leaseHorizon, leases.now() + startupFenceMs)
      return
    }
    for (const s of saved.servers) {
      servers.set(s.id, { url: s.url, controlUrl: s.controlUrl, failures: 0, draining: Boolean(s.draining), loadUnknown: false, generation: 0, drainedGeneration: 0 })
      // Each gets a lease from now: a member that died meanwhile is dropped
      // once it lapses, like any silent member.
      leases.grant(s.id, 0)
      pusher.addTarget(`server:${s.id}`, s.controlUrl)
    }
    for (const f of saved.frontends) {
      frontends.set(f.id, { controlUrl: f.controlUrl })
      pusher.addTarget(`frontend:${f.id}`, f.controlUrl)
    }
    assignment = saved.assignment
    target = saved.target
    pristine = saved.pristine
    generationFloor = Math.max(generationFloor, saved.generationFloor || 0)
    // Members hold leases the previous leader granted on this layout: a
    // first assignment after none waits for them like after a restart.
    leaseHorizon = Math.max(leaseHorizon, leases.now() + opts.leaseMs + opts.leaseMarginMs)
  }

  /** No longer the leader: stop rounds and pushes, forget the layout (the successor owns it). */
  function stepDown (reason) {
    if (!active) return
    active = false
    m.depositions.inc()
    clearTimeout(timer)
    timer = null
    clearTimeout(deferTimer)
    deferTimer = null
    pusher.close()
    pusher = newPusher()
    handoff.clear()
    assignment = null
    target = null
    published = null
    log.error({ reason, epoch }, 'stepped down: now a standby')
    changed()
  }

  /** Stop every timer and the pusher (close and crash). */
  function shutdown () {
    active = false
    clearTimeout(timer)
    clearInterval(leaseTimer)
    clearTimeout(deferTimer)
    timer = null
    pusher.close()
    events.close() // open streams would keep server.close() waiting
  }

  const server = http.createServer(app)
  let url = null
  let leaseTimer = null
  return {
    app,
    async start () {
      const port = await listen(server, opts.port, opts.host)
      url = `http://${opts.advertiseHost}:${port}`
      leaseTimer = setInterval(checkLeases, opts.leaseCheckMs)
      if (store) {
        await store.ensureTable()
        election = new LeaderElection({
          store,
          id: controllerId,
          url,
          leaseMs: opts.electionLeaseMs,
          checkMs: opts.electionCheckMs,
          marginMs: opts.electionMarginMs,
          onElected: takeOver,
          onDeposed: stepDown,
          logger: log
        })
        election.start()
      } else {
        leaseHorizon = Math.max(leaseHorizon, leases.now() + startupFenceMs)
        schedule()
      }
      log.info({ url, strategy: strategy.name, loadMetric, periodMs: opts.periodMs, controllerId, store: store ? store.describe() : 'memory' }, 'controller listening')
      return { url }
    },
    async close () {
      shutdown() // no more rounds, pushes or saves
      if (running) await running.catch(() => {})
      if (saveLoop) await saveLoop // a save under way ends first: no write after the lease is gone
      if (election) await election.stop() // releases the lease: a standby takes over at once
      await close(server)
      await collector.close()
    },
    /** Die as a killed process would: no lease released, no goodbye (tests, chaos). */
    async crash () {
      if (election) election.abandon()
      shutdown()
      server.closeAllConnections()
      await close(server)
      await collector.close()
    },
    runRound,
    status,
    get leading () { return leading() },
    get epoch () { return leading() ? epoch : 0 },
    moveSlice,
    settled,
    registry,
    get assignment () { return assignment },
    /** The newest assignment saved and handed to the pusher (what members may hold). */
    get published () { return published },
    get url () { return url }
  }
}

/** Load entries restricted to `ranges` (normalized), counts and cost scaled by the overlap. */
function clip (entries, ranges) {
  const out = []
  for (const e of entries) {
    const len = e.end - e.start
    for (const r of ranges) {
      const o = overlap(e, r)
      if (o > 0) {
        const part = { start: Math.max(e.start, r.start), end: Math.min(e.end, r.end), count: e.count * o / len, cost: e.cost * o / len }
        if (e.done !== undefined) part.done = e.done * o / len
        out.push(part)
      }
    }
  }
  return out
}

module.exports = { createController, defaults }
