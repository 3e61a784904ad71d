'use strict'

/**
 * bench/control-plane.js's runs for one cluster size N (each on a fresh
 * controller; every phase bounded by `deadlineMs`):
 *
 *  main: M front ends register; N members join at once; a steady window;
 *    a one-slice move; SIGKILL of the process holding ~10 % of the members;
 *    then as many new members join at `joinRate` a second (back to N).
 *  batch: N - J members join at once and settle; then J more at once
 *    (J = min(batch, N / 2)): a burst of joins on a settled cluster.
 *
 * A join that does not converge skips the phases after it (they need a
 * settled cluster); its steady window is still measured.
 */
const { setTimeout: delay } = require('node:timers/promises')
const { ControlPlaneCluster, splitMembers } = require('./control-plane-cluster')
const { trafficSnapshot, trafficBetween, lapsesOf, lapseCount, join, steadyWindow, measureMove, measureKill } = require('./control-plane-phases')

/** Every option of runSize and its default. */
const defaults = Object.freeze({
  frontends: 50,
  procs: 3, // fake-member processes; the first holds ~10 % of the members (the one killed)
  steadyMs: 15000,
  settleMs: 2000, // after convergence, before a steady window
  deadlineMs: 60000, // per phase
  joinRate: 50, // joins a second in the rate phase
  batch: 1000, // joins at once on a settled cluster (capped at N / 2)
  runs: ['main', 'batch'],
  clusterToken: 'x'.repeat(32),
  // startupFenceMs 0: a cluster that never had a controller (as cluster/local-cluster.js), so the
  // join measures membership, not the fence a restarted controller waits out.
  controllerOptions: { startupFenceMs: 0 },
  fakeConfig: {}, // fake-members.js start options (reregisterMs, ...)
  root: undefined, // the checkout whose controller to run (default this one)
  log: () => {}
})

const ids = (prefix, from, count) => Array.from({ length: count }, (_, i) => `${prefix}${String(from + i).padStart(5, '0')}`)

/** Cut `list` into groups of `sizes`. */
function cut (list, sizes) {
  const out = []
  let at = 0
  for (const n of sizes) { out.push(list.slice(at, at + n)); at += n }
  return out
}

/** Front ends on the last process (never the one killed); resolves once the controller knows them all. */
async function registerFrontends (cluster, o) {
  if (o.frontends === 0) return { ms: 0, converged: true }
  const since = Date.now()
  await cluster.fakes[cluster.fakes.length - 1].spawn(ids('fe', 0, o.frontends), 'frontend')
  for (;;) {
    const held = await cluster.held(0)
    if (held.frontendsRegistered === o.frontends) return { ms: Date.now() - since, converged: true }
    if (Date.now() - since > o.deadlineMs) return { ms: Date.now() - since, converged: false }
    await delay(50)
  }
}

async function runMain (n, o) {
  const sizes = splitMembers(n, o.procs)
  const out = { procs: sizes }
  const cluster = await ControlPlaneCluster.start({ controllerOptions: o.controllerOptions, clusterToken: o.clusterToken, procs: sizes, fakeConfig: o.fakeConfig, root: o.root })
  try {
    out.frontendRegistration = await registerFrontends(cluster, o)
    const groups = cut(ids('s', 0, n), sizes).map((list, i) => ({ fake: cluster.fakes[i], ids: list }))
    o.log(`N=${n}: ${n} members join at once over ${sizes.length} processes (${sizes.join(' + ')}), ${o.frontends} front ends`)
    out.joinAtOnce = await join(cluster, { groups, servers: n, frontends: o.frontends, deadlineMs: o.deadlineMs })
    out.joinTraffic = trafficBetween(null, await trafficSnapshot(cluster))
    o.log(`N=${n}: join at once ${out.joinAtOnce.converged ? `acknowledged in ${out.joinAtOnce.ms} ms` : `NOT converged after ${out.joinAtOnce.ms} ms`} (generation ${out.joinAtOnce.generation})`)
    await delay(o.settleMs)
    o.log(`N=${n}: steady window ${o.steadyMs} ms`)
    out.steady = await steadyWindow(cluster, o.steadyMs)
    o.log(`N=${n}: steady controller CPU ${out.steady.controllerCpuPct} %, event-loop p99 ${out.steady.controllerEventLoopMs.p99} ms, renewal p99 ${out.steady.renewalLatencyMs.p99} ms, ${out.steady.renewalsPerSecond} renewals/s`)
    out.lapsesBeforeKill = lapsesOf(await trafficSnapshot(cluster))
    if (!out.joinAtOnce.converged) {
      out.skipped = 'the join did not converge: no move, kill or rate join'
      return out
    }
    out.move = await measureMove(cluster, { clusterToken: o.clusterToken, servers: n, frontends: o.frontends, deadlineMs: o.deadlineMs })
    o.log(`N=${n}: one-slice move acknowledged in ${out.move.ms} ms, ${out.move.perMember.pushBytes} push bytes per member, ${out.move.perFrontend.pushBytes} per front end`)
    if (sizes.length < 2) {
      out.skipped = 'one fake process: no kill or rate join'
      return out
    }
    await delay(o.settleMs)
    out.kill = await measureKill(cluster, { victim: cluster.fakes[0], killed: sizes[0], servers: n, frontends: o.frontends, deadlineMs: o.deadlineMs })
    o.log(`N=${n}: SIGKILL of ${sizes[0]} members: dropped after ${out.kill.dropMs} ms, survivors acknowledged after ${out.kill.ackedMs} ms`)
    if (!out.kill.converged) return out
    await delay(o.settleMs)
    // Back to N: as many new members as were killed, at joinRate, on the settled survivors.
    const fresh = cut(ids('r', 0, sizes[0]), splitEven(sizes[0], sizes.length - 1))
    const rateGroups = fresh.map((list, i) => ({ fake: cluster.fakes[i + 1], ids: list }))
    const perProcess = o.joinRate / rateGroups.length
    o.log(`N=${n}: ${sizes[0]} members join at ${o.joinRate}/s on ${n - sizes[0]} settled`)
    out.joinRate = await join(cluster, { groups: rateGroups, servers: n, frontends: o.frontends, ratePerSec: perProcess, deadlineMs: o.deadlineMs })
    out.joinRate.ratePerSec = o.joinRate
    o.log(`N=${n}: rate join ${out.joinRate.converged ? `acknowledged ${out.joinRate.ms} ms after the first join, ${out.joinRate.afterLastJoinMs} ms after the last` : 'NOT converged'}`)
    return out
  } finally {
    const end = await trafficSnapshot(cluster).catch(() => null)
    if (end) {
      out.lapsesAtEnd = lapsesOf(end)
      // The killed members' leases lapse too: those are no lapse of a live member.
      if (out.kill && out.lapsesAtEnd.leaseExpiries !== null) out.lapsesAtEnd.leaseExpiries = Math.max(0, out.lapsesAtEnd.leaseExpiries - out.kill.killed)
    }
    await cluster.close()
  }
}

/** `n` split over `k` groups as evenly as can be. */
function splitEven (n, k) {
  return Array.from({ length: k }, (_, i) => Math.floor(n / k) + (i < n % k ? 1 : 0))
}

async function runBatch (n, o) {
  const j = Math.min(o.batch, Math.floor(n / 2))
  const settled = n - j
  const sizes = splitEven(settled, o.procs)
  const out = { settled, joined: j }
  const cluster = await ControlPlaneCluster.start({ controllerOptions: o.controllerOptions, clusterToken: o.clusterToken, procs: sizes.map((s) => s + Math.ceil(j / o.procs)), fakeConfig: o.fakeConfig, root: o.root })
  try {
    await registerFrontends(cluster, o)
    o.log(`N=${n}: ${settled} members join at once, then ${j} more at once`)
    const groups = cut(ids('s', 0, settled), sizes).map((list, i) => ({ fake: cluster.fakes[i], ids: list }))
    out.first = await join(cluster, { groups, servers: settled, frontends: o.frontends, deadlineMs: o.deadlineMs })
    o.log(`N=${n}: first ${settled} ${out.first.converged ? `acknowledged in ${out.first.ms} ms` : `NOT converged after ${out.first.ms} ms`}`)
    if (!out.first.converged) {
      out.skipped = `the first ${settled} did not converge`
      return out
    }
    await delay(o.settleMs)
    const before = await trafficSnapshot(cluster)
    const more = cut(ids('b', 0, j), splitEven(j, o.procs)).map((list, i) => ({ fake: cluster.fakes[i], ids: list }))
    out.batch = await join(cluster, { groups: more, servers: n, frontends: o.frontends, deadlineMs: o.deadlineMs })
    out.traffic = trafficBetween(before, await trafficSnapshot(cluster))
    o.log(`N=${n}: ${j} joins on ${settled} settled ${out.batch.converged ? `acknowledged in ${out.batch.ms} ms` : `NOT converged after ${out.batch.ms} ms`}`)
    return out
  } finally {
    const end = await trafficSnapshot(cluster).catch(() => null)
    if (end) out.lapses = lapsesOf(end)
    await cluster.close()
  }
}

/**
 * Every run for cluster size `n`.
 * @param {number} n
 * @param {Partial<typeof defaults>} options
 */
async function runSize (n, options = {}) {
  const o = { ...defaults, ...options, controllerOptions: { ...defaults.controllerOptions, ...options.controllerOptions } }
  const out = { n, frontends: o.frontends }
  if (o.runs.includes('main')) out.main = await runMain(n, o)
  if (o.runs.includes('batch')) out.batch = await runBatch(n, o)
  const lapses = [out.main && out.main.lapsesAtEnd, out.batch && out.batch.lapses].filter(Boolean)
  out.lapses = lapses.reduce((a, l) => a + lapseCount(l), 0)
  return out
}

module.exports = { runSize, defaults, splitEven }
