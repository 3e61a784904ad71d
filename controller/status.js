'use strict'

const { serverLoads } = require('../core/assignment')
const { KEYSPACE_SIZE } = require('../core/keyspace')
const { replicaCounts } = require('./dashboard/keyspace-view')
const { summarizeState, summarizeRound, summarizeColumn, summarizeSnapshot } = require('./dashboard/state-summary')

/**
 * What the controller reports, over the shared state `c`: `state()` and
 * `status()` (GET /v1/status, the dashboard), and `stats()`, a few counters
 * cheap enough to poll at thousands of members (benches, tests).
 * Installs its functions on `c`.
 */
function installStatus (c) {
  /** Everything status() reports but the rounds. */
  c.state = function state () {
    const { assignment } = c
    const share = assignment ? serverLoads(assignment, new Float64Array(assignment.slices.length)) : {}
    const replicas = assignment ? replicaCounts(assignment) : {}
    const last = c.history[c.history.length - 1]
    const lagging = new Map(c.pusher.lagging().map((l) => [l.target, l]))
    // A target that is not lagging holds what it must: a front end the newest assignment, an app server the last that changed its slices.
    const pushState = (key) => {
      const l = lagging.get(key)
      return l ? { acked: l.acked, lagging: true, failures: l.failures } : { acked: c.pusher.ackedBy(key), lagging: false, failures: 0 }
    }
    const p = c.persistence
    return {
      controllerId: c.controllerId,
      role: c.leading() ? 'leader' : 'standby',
      epoch: c.leading() ? c.epoch : 0,
      leader: c.election ? c.election.leader : null,
      store: c.store ? { name: c.store.describe(), saves: p.saves, failures: p.failures, lastError: p.lastError, lastBytes: p.lastBytes, lastParts: p.lastParts, bytes: p.bytes } : null,
      strategy: c.strategy.name,
      strategyOptions: { ...c.effectiveStrategyOptions },
      loadMetric: c.loadMetric,
      periodMs: c.opts.periodMs,
      generation: assignment ? assignment.generation : 0,
      servers: Object.fromEntries([...c.servers].map(([id, s]) => [id, {
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
        leaseRemainingMs: Math.round(c.leases.remaining(id)),
        leaseStream: c.streams ? c.streams.has(id) : false, // renews, reports and takes pushes over a lease stream
        push: pushState(`server:${id}`)
      }])),
      // A membership batch waiting for its window is a handoff about to start: not settled.
      handoff: { mode: c.opts.handoff, inProgress: c.target !== null || c.batchPending(), batchPending: c.batchPending(), waitingFor: c.handoff.snapshot(c.leases.now()), ...c.handoffs },
      leaseMs: c.opts.leaseMs,
      frontends: Object.fromEntries([...c.frontends].map(([id, f]) => [id, { controlUrl: f.controlUrl, push: pushState(`frontend:${id}`) }])),
      pushes: { ...c.pusher.stats, lagging: [...lagging.values()] },
      renewals: c.counts.renewals,
      leaseStreams: c.streams ? c.streams.size : 0
    }
  }

  c.status = function status () {
    return { ...c.state(), rounds: c.history.slice() }
  }

  let owning = { generation: -1, count: 0 }
  /**
   * Counters cheap enough to poll at thousands of members: no per-member
   * rows. `owning` (members holding a slice) is counted once per generation.
   */
  c.stats = function stats () {
    const a = c.assignment
    if (a && owning.generation !== a.generation) {
      const ids = new Set()
      for (const s of a.slices) for (const id of s.servers) ids.add(id)
      owning = { generation: a.generation, count: ids.size }
    }
    const ps = c.pusher.stats
    return {
      role: c.leading() ? 'leader' : 'standby',
      generation: a ? a.generation : 0,
      published: c.published ? c.published.generation : 0,
      members: c.servers.size,
      frontends: c.frontends.size,
      owning: a ? owning.count : 0,
      slices: a ? a.slices.length : 0,
      lagging: c.pusher.laggingCount(),
      handoffInProgress: c.target !== null || c.batchPending(),
      leaseExpiries: c.counts.leaseExpiries,
      evictions: c.counts.evictions,
      registrations: c.counts.registrations,
      renewals: c.counts.renewals,
      streams: { open: c.streams ? c.streams.size : 0, ...c.counts.streams, refusedBy: { ...c.counts.streams.refusedBy } },
      loadCollections: { ...c.collector.stats }, // by how: over lease streams or by HTTP
      batches: c.counts.batches,
      generations: { ...c.counts.generations },
      pushes: { messages: ps.pushes, streamed: ps.streamed, bytes: ps.bytes, full: ps.full, diffs: ps.diffs, fullBytes: ps.fullBytes, diffBytes: ps.diffBytes, failures: ps.failures, queued: c.pusher.queued },
      saves: c.store ? { saves: c.persistence.saves, bytes: c.persistence.bytes, failures: c.persistence.failures } : null
    }
  }

  /** The dashboard's first event: the state, every round kept and its heatmap column. */
  c.dashboardSnapshot = function dashboardSnapshot () {
    // Above 50 members, summaries rather than a row each (dashboard/state-summary.js).
    return summarizeSnapshot({
      keyspaceSize: KEYSPACE_SIZE,
      buckets: c.opts.heatmapBuckets,
      historySize: c.opts.historySize,
      state: c.state(),
      rounds: c.history.slice(),
      columns: c.columns.slice()
    })
  }

  /** A round's event for the dashboard's live feed. */
  c.roundEvent = function roundEvent (entry, column) {
    return { round: summarizeRound(entry), column: summarizeColumn(column), state: summarizeState(c.state()) }
  }

  /** Tell dashboard clients that membership, the assignment or push state changed (coalesced). */
  c.changed = function changed () {
    c.events.coalesce('state', () => ({ state: summarizeState(c.state()) }), c.opts.eventCoalesceMs)
  }
}

module.exports = { installStatus }
