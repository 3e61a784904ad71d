'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { setTimeout: delay } = require('node:timers/promises')
const { execFileSync } = require('node:child_process')
const { checkLinearizability } = require('../../history')
const { createRng, deriveSeed } = require('../../loadgen/prng')
const { defaults: controllerDefaults } = require('../../controller')
const { defaults: frontendDefaults } = require('../../frontend/frontend')
const { defaults: appServerDefaults } = require('../../appserver-lib/app-server')
const { defaults: kvDefaults } = require('../../apps/kv-cache/options')
const { InvalidArgumentError } = require('../../core/errors')
const { startChaosCluster } = require('./cluster')
const { createKvClient, createPhaseLog, createKeys, startLoad, probeKeys, isSuccess, defaults: loadDefaults } = require('./load')
const { summariseRequests, servedAgain, failureTimeline, failedSamples, promValue, promSeries, diffSeries } = require('./measure')
const { FAULTS: LOCAL_FAULTS } = require('./faults')
const { NET_FAULTS } = require('./net-faults')
const { NEMESIS, stepRows } = require('./nemesis')
const { startNetCluster } = require('./net-cluster')
const { netnsSupport } = require('./netns')
const { unavailability } = require('./unavailability')
const { getText } = require('./http')
const { summariseLogs, logSizes } = require('./report')

/** Every option of runChaos and its default (the `npm run chaos` flags). */
const defaults = Object.freeze({
  rate: loadDefaults.rate, // requests per second, open loop
  keys: 200, // per phase; each phase has its own keys, so its history stands alone
  putRatio: loadDefaults.putRatio,
  zipfS: loadDefaults.zipfS,
  seed: 1,
  moves: 1000,
  redisEvery: 200, // moves between Redis restarts
  beforeMs: 5000, // steady load before each fault
  afterMs: 5000, // and after it
  hangHoldMs: 3000, // how long the control port stays hung after the first eviction
  // Network faults (bench/chaos/net-faults.js), on test hosts in network namespaces (root only).
  net: 'auto', // 'auto': run them where namespaces can be made; true: required; false: skip them
  netHoldMs: 5000, // how long a partition or a clock fault is held after the system noticed it
  netMoves: 5, // slice moves while a front end is cut from the controllers
  netDelayMs: 200, // control-plane delay ...
  netJitterMs: 100, // ... plus or minus this, uniform
  netLossPct: 5, // control-plane packet loss
  netDelayHoldMs: 60000, // how long the delay and loss last
  netClockFastPct: 1, // the fast clock's excess rate
  nemesis: false, // true: the seeded random schedule of network faults (bench/chaos/nemesis.js), alone or after the faults in `only`
  nemesisMs: 600000, // how long the schedule runs
  movesTimeoutMs: 600000, // bound on the moves loop
  periodMs: 1000, // controller balancing period (the only non-default controller setting)
  only: null, // fault names; null = all
  // Negative controls (undefined = the system's defaults): weaken the system on
  // purpose to check that the bench sees the violations that follow.
  handoff: undefined, // controller handoff: 'fenced' | 'none'
  consistency: undefined, // app servers: 'strict' | 'available'
  heldReads: undefined, // app servers: kv-cache's heldReads ('wait' | 'ask'); undefined keeps its default
  quick: false,
  logDir: undefined, // default: a fresh directory under the OS temp dir
  progress: () => {},
  signal: undefined // AbortSignal: stop after the current step, close everything
})

/** What --quick changes, unless the option was given explicitly. */
const quickDefaults = Object.freeze({ moves: 100, redisEvery: 25, beforeMs: 2000, afterMs: 2000, hangHoldMs: 1000, movesTimeoutMs: 120000, netHoldMs: 2000, netDelayHoldMs: 15000, nemesisMs: 60000 })

const FAULTS = Object.freeze([...LOCAL_FAULTS, ...NET_FAULTS])
const FAULT_NAMES = FAULTS.map((f) => f.name)

function resolveOptions (options) {
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined))
  const o = { ...defaults, ...(given.quick ? quickDefaults : {}), ...given }
  const posInt = (k, min = 1) => {
    if (!Number.isInteger(o[k]) || o[k] < min) throw new InvalidArgumentError(`invalid ${k}: expected an integer >= ${min}, got ${JSON.stringify(o[k])}`)
  }
  if (!(typeof o.rate === 'number' && o.rate > 0 && o.rate <= 5000)) throw new InvalidArgumentError(`invalid rate: expected a number in (0, 5000], got ${JSON.stringify(o.rate)}`)
  if (!(typeof o.putRatio === 'number' && o.putRatio >= 0 && o.putRatio <= 1)) throw new InvalidArgumentError(`invalid putRatio: expected a number in [0, 1], got ${JSON.stringify(o.putRatio)}`)
  if (!(typeof o.zipfS === 'number' && o.zipfS >= 0)) throw new InvalidArgumentError(`invalid zipfS: expected a number >= 0, got ${JSON.stringify(o.zipfS)}`)
  for (const k of ['keys', 'moves', 'redisEvery', 'hangHoldMs', 'movesTimeoutMs', 'netHoldMs', 'netMoves', 'netDelayHoldMs', 'nemesisMs']) posInt(k)
  for (const k of ['netDelayMs', 'netJitterMs', 'netClockFastPct']) posInt(k, 0)
  if (!(Number.isInteger(o.netLossPct) && o.netLossPct >= 1 && o.netLossPct <= 99)) throw new InvalidArgumentError(`invalid netLossPct: expected an integer from 1 to 99, got ${JSON.stringify(o.netLossPct)}`)
  if (![true, false, 'auto'].includes(o.net)) throw new InvalidArgumentError(`invalid net: expected true, false or "auto", got ${JSON.stringify(o.net)}`)
  for (const k of ['beforeMs', 'afterMs', 'seed']) posInt(k, 0)
  posInt('periodMs', 10)
  if (o.handoff !== undefined && !['fenced', 'none'].includes(o.handoff)) throw new InvalidArgumentError(`invalid handoff: expected "fenced" or "none", got ${JSON.stringify(o.handoff)}`)
  if (o.heldReads !== undefined && !['wait', 'ask'].includes(o.heldReads)) throw new InvalidArgumentError(`invalid heldReads: expected "wait" or "ask", got ${JSON.stringify(o.heldReads)}`)
  if (o.consistency !== undefined && !['strict', 'available'].includes(o.consistency)) throw new InvalidArgumentError(`invalid consistency: expected "strict" or "available", got ${JSON.stringify(o.consistency)}`)
  if (o.only !== null) {
    if (!Array.isArray(o.only) || o.only.length === 0) throw new InvalidArgumentError(`invalid only: expected a list of faults among ${FAULT_NAMES.join(', ')}`)
    for (const n of o.only) if (!FAULT_NAMES.includes(n)) throw new InvalidArgumentError(`invalid only: unknown fault ${JSON.stringify(n)}; expected one of ${FAULT_NAMES.join(', ')}`)
  }
  return o
}

/**
 * Run the chaos bench: start the cluster, then each fault as a phase under
 * open-loop load, and measure it. Everything started is closed before this
 * resolves or rejects.
 * @param {object} options see `defaults`
 * @returns {Promise<object>} the result (rows for the table, phases with details, settings)
 */
async function runChaos (options = {}) {
  const opts = resolveOptions(options)
  const startedAt = new Date()
  const t0 = Date.now()
  const loadBefore = os.loadavg() // the figures depend on what else runs on the machine
  const logDir = opts.logDir || fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-chaos-'))
  const progress = opts.progress
  const now = () => performance.now()
  const steady = (ms) => delay(ms, undefined, { signal: opts.signal })
  // --nemesis alone runs the schedule alone; with --only, after the faults listed.
  let faults = opts.nemesis && !opts.only ? [NEMESIS] : FAULTS.filter((f) => (opts.only ? opts.only.includes(f.name) : true)).concat(opts.nemesis ? [NEMESIS] : [])
  const skipped = []
  if (faults.some((f) => f.net) && opts.net !== true) {
    const support = netnsSupport()
    if (opts.net === false || !support.ok) {
      const reason = opts.net === false ? 'network faults not asked for' : support.reason
      if (opts.only || opts.nemesis) throw new InvalidArgumentError(`cannot run ${faults.filter((f) => f.net).map((f) => f.name).join(', ')}: ${reason}`)
      for (const f of faults.filter((x) => x.net)) skipped.push({ fault: f.name, reason })
      progress(`skipping the network faults: ${reason}`)
      faults = faults.filter((f) => !f.net)
    }
  }
  if (opts.handoff || opts.consistency) progress(`NEGATIVE CONTROL: handoff ${opts.handoff || 'default'}, consistency ${opts.consistency || 'default'}`)
  // The process faults run on the in-process cluster, the network faults on test hosts.
  const groups = [
    { kind: 'local', faults: faults.filter((f) => !f.net) },
    { kind: 'net', faults: faults.filter((f) => f.net) }
  ].filter((g) => g.faults.length > 0)
  const phases = []
  const settings = {}
  let sizes = null
  for (const group of groups) {
    if (opts.signal && opts.signal.aborted) break
    progress(`starting the ${group.kind === 'net' ? 'cluster on test hosts (network namespaces)' : 'cluster'} (logs in ${logDir})`)
    const cluster = group.kind === 'net'
      ? await startNetCluster({ periodMs: opts.periodMs, logDir: path.join(logDir, 'net') })
      : await startChaosCluster({ periodMs: opts.periodMs, logDir, handoff: opts.handoff, consistency: opts.consistency, heldReads: opts.heldReads })
    const client = createKvClient({ targets: cluster.frontendUrls })
    try {
      settings[group.kind] = await readSettings(cluster, opts)
      if (group.kind === 'net') settings.net.hosts = cluster.describe()
      const ctx = { cluster, opts: { ...opts, controllerDefaults }, now, steady, signal: opts.signal, rng: null, logDir }
      for (const fault of group.faults) {
        if (opts.signal && opts.signal.aborted) break
        progress(`phase ${fault.name}: ${fault.title}`)
        ctx.rng = createRng(deriveSeed(opts.seed, 'chaos', fault.name, 'fault'))
        const p = await runPhase(ctx, client, fault)
        phases.push(p)
        progress(`phase ${fault.name}: sent ${p.requests.sent}, failed ${p.requests.failed}, misrouted ${p.frontends.misdirected}, served again after ${p.servedAgainMs ?? 'n/a'} ms, unavailable at most ${p.unavailability.maxMs ?? 0} ms, history ${p.history.verdict}${p.error ? `, error: ${p.error}` : ''}`)
        if (p.error && !(opts.signal && opts.signal.aborted)) await repair(cluster, progress)
      }
    } finally {
      sizes = logSizes(logDir) // what teardown logs (deregistrations, "last app server left") is not summarised
      progress(`stopping the ${group.kind === 'net' ? 'cluster on test hosts' : 'cluster'}`)
      await client.close()
      await cluster.close()
    }
  }
  return {
    startedAt: startedAt.toISOString(),
    durationMs: Date.now() - t0,
    node: process.version,
    cpus: os.cpus().length,
    loadAverage: { before: loadBefore.map((x) => +x.toFixed(2)), after: os.loadavg().map((x) => +x.toFixed(2)) },
    commit: gitCommit(),
    command: opts.command || null,
    aborted: Boolean(opts.signal && opts.signal.aborted),
    logDir,
    settings: settings.local || settings.net,
    netSettings: settings.local && settings.net ? settings.net : undefined,
    skipped,
    rows: phases.map(rowOf),
    phases,
    logs: summariseLogs(logDir, sizes)
  }
}

/** One fault as a phase: steady load, the fault, steady load; then the figures. */
async function runPhase (ctx, client, fault) {
  const { cluster, opts, now } = ctx
  await cluster.waitSettled({ timeoutMs: 30000 })
  const log = createPhaseLog(fault.name)
  const keys = createKeys(fault.name, opts.keys, opts.zipfS)
  const before = await scrapeFrontends(cluster).catch(() => null) // a front end too busy to answer in 5 s must not end the run
  const origin = now()
  const startedAt = Date.now()
  const events = []
  const notes = []
  const phase = {
    keys,
    details: {},
    note: (s) => notes.push(s),
    /**
     * Stamp a fault event: take the keys `victim` owns now (or `keys`), run
     * `act`, and start probing the keys. `at` backdates an event observed by
     * polling (no `act` then).
     */
    async event ({ what, victim, keys: given, at }, act) {
      const owned = given || [...cluster.ownersOf(keys.keys)].filter(([, o]) => o === victim).map(([k]) => k)
      const ev = { what, victim, at: at ?? now(), keys: owned }
      if (act) await act()
      ev.probes = probeKeys(client, log, owned, { deadlineMs: 30000 })
      events.push(ev)
      return ev
    }
  }
  const load = startLoad({ client, log, keys, rng: createRng(deriveSeed(opts.seed, 'chaos', fault.name, 'load')), rate: opts.rate, putRatio: opts.putRatio })
  let error = null
  try {
    await ctx.steady(opts.beforeMs)
    await fault.run(ctx, phase)
    await ctx.steady(opts.afterMs)
  } catch (err) {
    error = err.name === 'AbortError' ? 'interrupted' : `${err.code || err.name}: ${err.message}`
  } finally {
    await load.stop()
    await Promise.allSettled(events.map((e) => e.probes))
  }
  const durationMs = now() - origin
  let after = null
  try {
    after = await scrapeFrontends(cluster)
  } catch (err) {
    notes.push(`front end metrics unreadable: ${err.message}`)
  }

  const requestsFile = writeRequests(ctx.logDir, fault.name, log.records, origin)
  const loadRecords = log.records.filter((r) => !r.probe)
  const probeRecords = log.records.filter((r) => r.probe)
  const requests = summariseRequests(loadRecords)
  const evs = events.map((e) => ({ what: e.what, victim: e.victim, atMs: Math.round(e.at - origin), keys: e.keys.length, servedAgain: servedAgain(log.records, e) }))
  const maxes = evs.map((e) => e.servedAgain.maxMs).filter((x) => x !== null)
  const unresolved = evs.reduce((n, e) => n + e.servedAgain.unresolved.length, 0)
  if (unresolved) notes.push(`${unresolved} victim key(s) never served again`)
  const history = checkHistory(log.history.operations())
  const unavailable = unavailability(log.records)
  if (phase.details.schedule) { // the nemesis schedule: a row per step
    phase.details.table = stepRows(log.records, phase.details.schedule, phase.details.origin)
    delete phase.details.origin
  }
  if (history.verdict === 'violation') notes.push(`${history.violationCount} key(s) not linearizable`)
  if (load.stats.skipped) notes.push(`${load.stats.skipped} requests skipped by the client`)
  if (error) notes.unshift(`fault failed: ${error}`)
  const fe = after && before ? frontendDelta(before, after) : { misdirected: null, retries: {}, errors: {}, upstreamErrors: {} }
  return {
    fault: fault.name,
    title: fault.title,
    startedAt: new Date(startedAt).toISOString(),
    durationMs: Math.round(durationMs),
    error,
    notes,
    load: load.stats,
    requests,
    probes: { sent: probeRecords.length, failed: probeRecords.filter((r) => !isSuccess(r)).length },
    events: evs,
    servedAgainMs: maxes.length ? Math.max(...maxes) : null,
    unavailability: unavailable,
    failureTimeline: failureTimeline(loadRecords, origin),
    failedSamples: failedSamples(log.records, origin),
    frontends: fe,
    history,
    details: phase.details,
    requestsFile
  }
}

/** Every request of a phase, one JSON line each (times in ms from the phase start), for digging into failures. */
function writeRequests (dir, name, records, origin) {
  const file = path.join(dir, `requests-${name}.ndjson`)
  const r1 = (x) => (x === null ? null : Math.round(x * 10) / 10)
  const lines = records.map((r) => JSON.stringify({ t: r1(r.call - origin), ms: r.ret === null ? null : r1(r.ret - r.call), op: r.op, key: r.key, fe: r.fe, probe: r.probe || undefined, status: r.status, code: r.code || undefined, error: r.error || undefined, servedBy: r.servedBy, generation: r.generation, value: r.value }))
  fs.writeFileSync(file, lines.join('\n') + '\n')
  return file
}

function rowOf (p) {
  return {
    fault: p.fault,
    title: p.title,
    sent: p.requests.sent,
    failed: p.requests.failed,
    failedPct: p.requests.failedPct,
    misrouted: p.frontends.misdirected ?? 'n/a',
    servedAgainMs: p.servedAgainMs,
    unavailableMs: p.unavailability.maxMs,
    verdict: p.history.verdict,
    notes: p.notes
  }
}

function checkHistory (operations) {
  const t = performance.now()
  try {
    const r = checkLinearizability(operations, { timeBudgetMs: 20000 })
    return {
      verdict: r.verdict,
      ops: r.ops,
      keys: r.keys,
      checkMs: Math.round(performance.now() - t),
      violationCount: r.violations.length,
      violations: r.violations.slice(0, 5).map((v) => ({ key: v.key, message: v.message, ops: v.ops })),
      unknown: r.unknown,
      warnings: r.warnings.slice(0, 5)
    }
  } catch (err) {
    return { verdict: `error: ${err.message}`, ops: operations.length, keys: 0, checkMs: Math.round(performance.now() - t), violationCount: 0, violations: [], unknown: [], warnings: [] }
  }
}

/** Both front ends' counters that matter here, from their /metrics. */
async function scrapeFrontends (cluster) {
  const texts = await Promise.all(cluster.frontendUrls.map((u) => getText(`${u}/metrics`, { timeoutMs: 5000 })))
  const sum = (name) => texts.reduce((n, t) => n + promValue(t, name), 0)
  const series = (name) => {
    const out = {}
    for (const t of texts) for (const [k, v] of Object.entries(promSeries(t, name))) out[k] = (out[k] || 0) + v
    return out
  }
  return {
    misdirected: sum('chopper_frontend_misdirected_total'),
    retries: series('chopper_frontend_retries_total'),
    errors: series('chopper_frontend_errors_total'),
    upstreamErrors: series('chopper_frontend_upstream_errors_total')
  }
}

function frontendDelta (a, b) {
  return {
    misdirected: b.misdirected - a.misdirected,
    retries: diffSeries(a.retries, b.retries),
    errors: diffSeries(a.errors, b.errors),
    upstreamErrors: diffSeries(a.upstreamErrors, b.upstreamErrors)
  }
}

/** After a fault that did not complete: every server running, none hung. */
async function repair (cluster, progress) {
  for (const id of cluster.ids) {
    const m = cluster.member(id)
    try {
      if (!m.proc || m.proc.exitInfo()) {
        progress(`repair: restarting ${id}`)
        const p = await cluster.startServer(id)
        await cluster.waitRegistered(id, { url: p.url })
      } else {
        await m.proc.call('restore-control')
      }
    } catch (err) {
      progress(`repair of ${id} failed: ${err.message}`)
    }
  }
}

async function readSettings (cluster, opts) {
  const status = JSON.parse(await getText(`${cluster.controllerUrl}/v1/status`))
  const health = JSON.parse(await getText(`${cluster.member(cluster.ids[0]).proc.controlUrl}/healthz`))
  const pick = (o, keys) => Object.fromEntries(keys.map((k) => [k, o[k]]))
  return {
    cluster: { appServers: cluster.ids.length, appServerProcesses: 'one child process each', frontends: cluster.frontendUrls.length, dynamo: 'in-process dynalite (bench process)', redis: 'one redis-server per app server, managed by the bench' },
    load: { rate: opts.rate, keysPerPhase: opts.keys, putRatio: opts.putRatio, keySkew: `zipf s=${opts.zipfS}`, seed: opts.seed, clientTimeoutMs: loadDefaults.timeoutMs, connectionsPerFrontend: loadDefaults.connections },
    phases: pick(opts, ['beforeMs', 'afterMs', 'hangHoldMs', 'moves', 'redisEvery', 'quick']),
    negativeControl: opts.handoff || opts.consistency ? { handoff: opts.handoff || 'default', consistency: opts.consistency || 'default' } : 'none (system defaults)',
    controller: {
      strategy: status.strategy,
      periodMs: status.periodMs,
      leaseMs: status.leaseMs,
      handoff: status.handoff.mode,
      ...pick(controllerDefaults, ['leaseMarginMs', 'leaseCheckMs', 'evictAfterFailures', 'requestTimeoutMs'])
    },
    frontend: pick(frontendDefaults, ['forwarder', 'holdMs', 'upstreamTimeoutMs', 'connections', 'pullIntervalMs']),
    appServer: { consistency: health.consistency, heldReads: opts.heldReads || 'wait', ...pick(appServerDefaults, ['holdMs', 'drainTimeoutMs', 'drainDeadlineMs', 'reregisterMs']) },
    kvCache: pick(kvDefaults, ['cacheTtlMs', 'redisTimeoutMs', 'dynamoTimeoutMs'])
  }
}

function gitCommit () {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: __dirname, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim()
  } catch {
    return null
  }
}

module.exports = { runChaos, resolveOptions, defaults, quickDefaults, FAULT_NAMES }
