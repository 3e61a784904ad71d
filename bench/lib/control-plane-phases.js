'use strict'

/**
 * The measured phases of bench/control-plane.js, each on a running
 * ControlPlaneCluster: a join, a steady window, a one-slice move, the
 * SIGKILL of a fake-member process, and the traffic between two moments.
 */
const { setTimeout: delay } = require('node:timers/promises')
const { JsonClient } = require('../../core/json-client')
const { subtract } = require('./control-plane-cluster')
const { cpuShare, mergedPercentiles, round3 } = require('./control-plane-window')

/** Whatever counts traffic, now: the controller's stats and the fake members' counters. */
async function trafficSnapshot (cluster) {
  const controller = await cluster.controllerStats()
  const fake = await cluster.fakeStats()
  return { at: Date.now(), controller: controller.stats, counters: fake.counters, wire: fake.wire }
}

/** A count from stats(): a number, or an object's `count` / `messages` (what the lead chooses). */
function countOf (x) {
  if (typeof x === 'number') return x
  if (x && typeof x === 'object') return countOf(x.count ?? x.messages ?? x.total)
  return null
}

function diff (b, a) {
  return b === null || b === undefined ? null : b - (a ?? 0)
}

/**
 * Traffic between two snapshots (`a` null: since the cluster started), as the
 * controller counts it (null where its stats do not say) and as the fake
 * members count it (bodies, and wire bytes on their control ports).
 */
function trafficBetween (a, b) {
  const c0 = a ? a.controller : {}
  const c1 = b.controller
  const p0 = c0.pushes || {}
  const p1 = c1.pushes || {}
  const f = subtract(b.counters, a ? a.counters : undefined)
  const w = subtract(b.wire, a ? a.wire : undefined)
  return {
    seconds: a ? round3((b.at - a.at) / 1000) : null,
    controller: {
      pushMessages: diff(p1.messages, p0.messages),
      pushBytes: diff(p1.bytes, p0.bytes),
      pushFull: diff(p1.full, p0.full),
      pushDiffs: diff(p1.diffs, p0.diffs),
      pushFailures: diff(p1.failures, p0.failures),
      renewals: diff(countOf(c1.renewals), countOf(c0.renewals)),
      registrations: diff(countOf(c1.registrations), countOf(c0.registrations))
    },
    members: {
      pushMessages: f.pushes.messages,
      pushBytes: f.pushes.bytes,
      pushesToFrontends: f.pushes.frontendMessages,
      pushBytesToFrontends: f.pushes.frontendBytes,
      full: f.pushes.full,
      diffs: f.pushes.diffs,
      gzip: f.pushes.gzip,
      stale: f.pushes.stale,
      diffBaseRefused: f.pushes.diffBaseRefused,
      renewals: f.renewals.sent,
      renewalBytesOut: f.renewals.bytesOut,
      renewalBytesIn: f.renewals.bytesIn,
      renewalMaps: f.renewals.withMap + f.renewals.withDiff,
      renewalMapBytes: f.renewals.mapBytes,
      renewalFailures: f.renewals.failures,
      registrations: f.registrations.sent,
      registrationBytesOut: f.registrations.bytesOut,
      registrationBytesIn: f.registrations.bytesIn,
      loadReports: f.loads,
      controlWireBytesIn: w.read,
      controlWireBytesOut: w.written,
      errors: Object.fromEntries(Object.entries(f.errors || {}).filter(([, n]) => n > 0)) // failed calls: `${call} ${status or code}` -> count
    }
  }
}

/** Members dropped while their process was alive, and renewals that failed, so far. */
function lapsesOf (snapshot) {
  const c = snapshot.controller
  const r = snapshot.counters.renewals
  return {
    leaseExpiries: c.leaseExpiries ?? null,
    evictions: c.evictions ?? null,
    notFound: r.notFound,
    localLapses: snapshot.counters.localLapses,
    renewalFailures: r.failures,
    registrationsGivenUp: snapshot.counters.registrations.gaveUp
  }
}

/** Lapses: the controller's expiries and evictions plus renewals answered 404 (one member may count in both). */
function lapseCount (l) {
  return (l.leaseExpiries || 0) + (l.evictions || 0) + l.notFound
}

/**
 * Start `groups` ([{ fake, ids }]) at once or `ratePerSec` each (in parallel
 * across groups) and wait for convergence on `servers` members.
 */
async function join (cluster, { groups, servers, frontends, ratePerSec = 0, deadlineMs }) {
  const since = Date.now()
  await Promise.all(groups.map(({ fake, ids }) => fake.spawn(ids, 'server', ratePerSec)))
  const longest = Math.max(0, ...groups.map((g) => g.ids.length))
  const spreadMs = ratePerSec ? Math.ceil((1000 * longest) / ratePerSec) : 0
  const out = await cluster.waitConverged({ servers, frontends, since, deadlineMs: deadlineMs + spreadMs })
  const lastJoinAt = since + (ratePerSec ? Math.floor((1000 * (longest - 1)) / ratePerSec) : 0)
  return {
    converged: out.converged,
    ms: out.ms,
    afterLastJoinMs: ratePerSec ? out.ms - (lastJoinAt - since) : out.ms,
    generation: out.generation,
    joined: groups.reduce((n, g) => n + g.ids.length, 0),
    ratePerSec: ratePerSec || null,
    controller: summaryOf(out.controller),
    held: out.held,
    error: out.error
  }
}

function summaryOf (s) {
  if (!s) return null
  const { generation, members, frontends, owning, lagging, handoffInProgress, leaseExpiries, evictions, batches, generations } = s
  return { generation, members, frontends, owning, lagging, handoffInProgress, leaseExpiries, evictions, batches, generations }
}

/** `ms` of steady state: the controller's CPU and event loop, renewal latency and the traffic. */
async function steadyWindow (cluster, ms) {
  const c0 = await cluster.controllerStats(true)
  const f0 = await cluster.fakeStats(true)
  const t0 = { at: Date.now(), controller: c0.stats, counters: f0.counters, wire: f0.wire }
  await delay(ms)
  const c1 = await cluster.controllerStats(true)
  const f1 = await cluster.fakeStats(true, true)
  const t1 = { at: Date.now(), controller: c1.stats, counters: f1.counters, wire: f1.wire }
  const procs = f1.parts.map((p, i) => ({ pid: p.pid, members: p.members, cpuPct: cpuShare(f0.parts[i].process, p.process), eventLoopP99Ms: p.process.eventLoop.p99 }))
  const traffic = trafficBetween(t0, t1)
  const perSecond = (x) => (x === null ? null : round3(x / traffic.seconds))
  return {
    ms: t1.at - t0.at,
    statsSource: c1.statsSource,
    controllerCpuPct: cpuShare(c0, c1),
    controllerEventLoopMs: c1.eventLoop,
    controllerRssMB: c1.rssMB,
    renewalLatencyMs: mergedPercentiles(f1.parts.map((p) => p.latencySample)),
    renewalsPerSecond: perSecond(traffic.members.renewals),
    pushesPerSecond: perSecond(traffic.members.pushMessages),
    generations: diff(t1.controller.generation, t0.controller.generation),
    fakeProcesses: procs,
    traffic,
    lapses: subtract(lapsesOf(t1), lapsesOf(t0))
  }
}

/**
 * POST /v1/move (signed, wait: true) of the first slice to another server,
 * then wait for every member and front end to hold the result: the bytes each
 * received for it.
 */
async function measureMove (cluster, { clusterToken, servers, frontends, deadlineMs }) {
  const http = new JsonClient({ timeoutMs: deadlineMs, clusterToken, connections: 1 })
  try {
    const { data: a } = await http.get(`${cluster.controller.url}/v1/assignment`)
    const slice = a.slices[0]
    const from = slice.servers[0]
    const to = Object.keys(a.servers).find((id) => id !== from)
    const before = await trafficSnapshot(cluster)
    const since = Date.now()
    const { data: moved } = await http.post(`${cluster.controller.url}/v1/move`, { sliceKey: slice.start, to, wait: true })
    // The server that gave the slice away may hold nothing now: every member and front end holding the map is what counts.
    const out = await cluster.waitConverged({ servers, frontends, since, deadlineMs, owning: false })
    const after = await trafficSnapshot(cluster)
    const t = trafficBetween(before, after)
    const m = t.members
    const memberBytes = m.pushBytes - m.pushBytesToFrontends
    return {
      converged: out.converged,
      ms: out.ms,
      sliceKey: slice.start,
      from,
      to,
      settled: moved.settled,
      generations: out.generation - before.controller.generation,
      perMember: { pushBytes: round3(memberBytes / servers), pushes: round3((m.pushMessages - m.pushesToFrontends) / servers), renewalMapBytes: round3(m.renewalMapBytes / servers) },
      perFrontend: { pushBytes: frontends ? round3(m.pushBytesToFrontends / frontends) : null, pushes: frontends ? round3(m.pushesToFrontends / frontends) : null },
      controllerPushBytes: t.controller.pushBytes,
      traffic: t
    }
  } finally {
    await http.destroy()
  }
}

/**
 * SIGKILL `victim` (a fake process holding `killed` members): how long until
 * the controller drops them (members count falls), and until every survivor
 * and front end holds a map without them (the first generation, after the
 * drop, with no handoff in progress and nobody lagging).
 */
async function measureKill (cluster, { victim, killed, servers, frontends, deadlineMs }) {
  const survivors = servers - killed
  const since = Date.now()
  await victim.sigkill()
  const deadline = since + deadlineMs
  let dropMs = null
  let last = null
  for (;;) {
    try {
      const s = (await cluster.controllerStats()).stats
      last = summaryOf(s)
      if (dropMs === null && s.members <= survivors) dropMs = Date.now() - since
      const without = s.members === survivors && (s.owning === null || s.owning === survivors) && !s.handoffInProgress && (s.lagging === null || s.lagging === 0)
      if (without) {
        const held = await cluster.held(s.generation)
        if (held.serversHolding === survivors && held.frontendsHolding === frontends) {
          return { converged: true, killed, dropMs, ackedMs: Date.now() - since, generation: s.generation, controller: last }
        }
      }
    } catch (err) {
      last = { ...last, error: err.message }
    }
    if (Date.now() >= deadline) return { converged: false, killed, dropMs, ackedMs: null, controller: last }
    await delay(50)
  }
}

module.exports = { trafficSnapshot, trafficBetween, lapsesOf, lapseCount, join, steadyWindow, measureMove, measureKill }
