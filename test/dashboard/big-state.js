'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')

/*
 * Synthetic controller data at any member count, shaped like the
 * controller's state(), round entries, heatmap columns and dashboard
 * snapshot (state-summary.test.js checks the shapes against a real
 * controller). Deterministic: member i's figures are functions of i.
 */

const pad = (i) => String(i).padStart(4, '0')
// `prefix` lengthens the ids, for the size bounds' worst case
const serverId = (i, prefix = 'app-') => `${prefix}${pad(i)}`

/** Server i's load: a few hot servers (the lowest ids), the rest spread over 100..1099. */
function loadOf (i) {
  return i < 3 ? 50000 - i * 1000 : 100 + ((i * 7919) % 1000)
}

/**
 * @param {number} n app servers
 * @param {{frontends?: number, draining?: number, unknown?: number, lagging?: number, generation?: number}} [options]
 *   the last `draining` servers drain; servers 3.. have their load unknown (`unknown` of them);
 *   `lagging` servers (from the middle) have not acked the newest generation
 */
function bigState (n, { prefix, frontends = 2, draining = 0, unknown = 0, lagging = 0, generation = 1234 } = {}) {
  const servers = {}
  const laggingList = []
  const mid = Math.floor(n / 2)
  for (let i = 0; i < n; i++) {
    const id = serverId(i, prefix)
    const isDraining = i >= n - draining
    const isUnknown = i >= 3 && i < 3 + unknown
    const isLagging = i >= mid && i < mid + lagging
    const slices = isDraining ? 0 : 1 + ((i * 31) % 7)
    const push = isLagging ? { acked: generation - 1 - (i % 3), lagging: true, failures: i % 2 } : { acked: generation, lagging: false, failures: 0 }
    if (isLagging) laggingList.push({ target: `server:${id}`, acked: push.acked, failures: push.failures })
    servers[id] = {
      url: `http://10.0.${i >> 8}.${i & 255}:8080`,
      controlUrl: `http://10.0.${i >> 8}.${i & 255}:8081`,
      slices,
      replicas: 0,
      keyspaceShare: isDraining ? 0 : 1 / (n - draining),
      lastLoad: isUnknown || isDraining ? (isDraining ? 0 : null) : loadOf(i),
      lastRequests: isUnknown ? null : loadOf(i),
      lastCost: isUnknown ? null : loadOf(i) * 1.5,
      loadUnknown: isUnknown,
      collectionFailures: isUnknown ? 2 : 0,
      draining: isDraining,
      generation: isLagging ? push.acked : generation,
      drainedGeneration: generation,
      leaseRemainingMs: 2400 + (i % 600),
      push
    }
  }
  const fe = {}
  for (let i = 0; i < frontends; i++) fe[serverId(i, prefix ? `fe-${prefix}` : 'fe-')] = { controlUrl: `http://10.1.0.${i % 256}:9090`, push: { acked: generation, lagging: false, failures: 0 } }
  return {
    controllerId: 'ctl-1',
    role: 'leader',
    epoch: 3,
    leader: 'ctl-1',
    store: null,
    strategy: 'chopper',
    strategyOptions: { moveRatio: 1.25, mergeChurnLimit: 0.2, minReplicas: 1 },
    loadMetric: 'requests',
    periodMs: 1000,
    generation,
    servers,
    handoff: { mode: 'lease', inProgress: false, waitingFor: {}, revokes: 10, grants: 10, direct: 0, leaseLapses: 0 },
    leaseMs: 3000,
    frontends: fe,
    pushes: { pushes: 5000, failures: 3, rejected: 0, full: 40, diffs: 4960, bytes: 9000000, fullBytes: 4000000, diffBytes: 5000000, lagging: laggingList }
  }
}

/** A round entry over servers 0..n-1 (`unknown` of them, from 3, with their load unknown). */
function bigRound (n, { prefix, round = 77, generation = 1234, unknown = 0 } = {}) {
  const perServer = {}
  const perServerRequests = {}
  const perServerCost = {}
  const unknownIds = []
  for (let i = 0; i < n; i++) {
    const id = serverId(i, prefix)
    perServer[id] = loadOf(i)
    perServerRequests[id] = loadOf(i)
    perServerCost[id] = loadOf(i) * 1.5
    if (i >= 3 && i < 3 + unknown) unknownIds.push(id)
  }
  const total = Object.values(perServer).reduce((a, b) => a + b, 0)
  return {
    round,
    at: 1700000000000 + round * 1000,
    generation,
    loadMetric: 'requests',
    totalLoad: total,
    perServer,
    perServerRequests,
    perServerCost,
    imbalance: 50000 / (total / n),
    unknown: unknownIds,
    quiet: false,
    changed: true,
    churn: 123456789,
    churnFraction: 123456789 / KEYSPACE_SIZE,
    slices: n * 4,
    durationMs: 12.345678
  }
}

/**
 * A heatmap column with n primaries over `buckets` buckets: every primary is
 * listed (as keyspaceColumn does), each bucket owned by one of them, a
 * realistic load per bucket and a few moved buckets.
 */
function bigColumn (n, { prefix, round = 77, generation = 1234, buckets = 256 } = {}) {
  const servers = Array.from({ length: n }, (_, i) => serverId(i, prefix)).sort()
  const owner = Array.from({ length: buckets }, (_, b) => Math.floor((b * n) / buckets))
  const load = Array.from({ length: buckets }, (_, b) => Math.round(((b * 7919) % 10007) * 12.3456) / 1000)
  return { round, at: 1700000000000 + round * 1000, generation, servers, owner, load, moved: [3, 4, 5, 100, 200] }
}

/** A dashboard snapshot: the state and `rounds` rounds with their columns. */
function bigSnapshot (n, { rounds = 120, ...options } = {}) {
  const list = Array.from({ length: rounds }, (_, k) => k + 1)
  return {
    keyspaceSize: KEYSPACE_SIZE,
    buckets: 256,
    historySize: 120,
    state: bigState(n, options),
    rounds: list.map((r) => bigRound(n, { prefix: options.prefix, round: r, generation: 1234 - rounds + r })),
    columns: list.map((r) => bigColumn(n, { prefix: options.prefix, round: r, generation: 1234 - rounds + r }))
  }
}

module.exports = { bigState, bigRound, bigColumn, bigSnapshot, serverId, loadOf }
