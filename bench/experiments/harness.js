'use strict'

const os = require('node:os')
const loadgen = require('../../loadgen')
const { CONTENDER_NAMES, CONTENDERS } = require('./contenders')
const { contenderMetrics, ratios } = require('./metrics')
const { startSutProcess } = require('./sut-process')
const { scaleWorkload, scaleRate, preloadWorkload, warmupWorkload, modelledCapacity, round3 } = require('./scenario')
const { cpuSnapshot, cpuCost, machineLoad } = require('./cpu-cost')
const { haproxyVersion } = require('./haproxy-process')
const { checkRepeats, rankedBy, runOrder, foldRuns } = require('./repeats')
const { InvalidArgumentError } = require('../../core/errors')
const { silent } = require('../../core/logger')
const { JsonClient } = require('../../core/json-client')
const { createClient, readCredential } = require('../../client/index.js')

/** Every option of runScenario and its default. */
const defaults = Object.freeze({
  contenders: CONTENDER_NAMES, // run order
  timeScale: 1, // multiplies every phase duration
  rateScale: 1, // multiplies every rate, divides every modelled service time (scenario.js scaleRate)
  repeats: 1, // runs per contender; the median run stands for it (repeats.js)
  logger: silent,
  onProgress: () => {} // (line: string) => void, for the CLI
})

/**
 * Run one scenario against each contender in turn: same seeded workload,
 * fresh app servers each time (the system under test in a child process, each
 * app server in a process of its own; the load generator runs here), then the
 * metrics and the ratios to Chopper.
 * A contender that fails to start or run is recorded with its error and the
 * others still run.
 * @param {{ name, experiment, workload, file? }} scenario from loadScenario / validateScenario
 * @param {Partial<typeof defaults>} [options]
 * @returns {Promise<object>} the scenario result (see README "Result JSON")
 */
async function runScenario (scenario, options = {}) {
  const o = { ...defaults, ...options }
  if (!Array.isArray(o.contenders) || o.contenders.length === 0 || o.contenders.some((c) => !CONTENDER_NAMES.includes(c))) {
    throw new InvalidArgumentError(`invalid contenders: expected a non-empty list of ${CONTENDER_NAMES.join(', ')}`)
  }
  const { experiment, workload: rated } = scaleRate(scenario, o.rateScale)
  const workload = scaleWorkload(rated, o.timeScale)
  const repeats = checkRepeats(o.repeats)
  const by = rankedBy(experiment)
  const startedAt = new Date()
  const names = [...new Set(o.contenders)]
  const runs = new Map(names.map((name) => [name, []]))
  for (let r = 0; r < repeats; r++) {
    for (const name of runOrder(names, r)) {
      const run = repeats > 1 ? ` (run ${r + 1} of ${repeats})` : ''
      o.onProgress(`${scenario.name}: ${name}${run} ...`)
      const entry = { name, ...CONTENDERS[name], ok: false }
      try {
        Object.assign(entry, await runContender(name, experiment, workload, o.logger), { ok: true })
        o.onProgress(`${scenario.name}: ${name}${run}: ${entry.throughput.achievedRate} req/s, p50 ${entry.latencyMs.p50} ms, p90 ${entry.latencyMs.p90} ms, p99 ${entry.latencyMs.p99} ms, imbalance ${entry.imbalance.mean}, affinity ${entry.affinity}${entry.cache ? `, hit rate ${entry.cache.hitRate}` : ''}, errors ${entry.throughput.errors}${byMethod(entry)}${outsideLine(entry.outsideServerMs)}${replicationLine(entry.servers)}${cpuLine(entry.cpu)}${entry.client.heldRate ? '' : ' (client could not hold the rate)'}`)
      } catch (err) {
        entry.error = { code: err.code, message: err.message }
        o.onProgress(`${scenario.name}: ${name}${run} FAILED: ${err.message}`)
      }
      runs.get(name).push(entry)
    }
  }
  const contenders = names.map((name) => foldRuns(runs.get(name), by))
  if (repeats > 1) {
    for (const c of contenders) o.onProgress(`${scenario.name}: ${c.name}: median of ${repeats} runs by ${by}: run ${c.repeats.chosen} (${c.repeats.runs.map((x) => (x.ok ? x[by] : 'failed')).join(', ')})`)
  }
  const base = contenders.find((c) => c.name === 'chopper' && c.ok)
  for (const c of contenders) c.vsChopper = base && c.ok ? ratios(c, base) : null
  return {
    scenario: scenario.name,
    title: experiment.title,
    file: scenario.file,
    experiment,
    modelledCapacity: modelledCapacity(experiment, workload),
    workload: { name: workload.name, seed: workload.seed, phases: workload.phases.map((p) => ({ name: p.name, duration: p.duration, rate: p.rate, keys: p.keys, distribution: p.distribution, hot: p.hot, mix: p.mix })) },
    timeScale: o.timeScale,
    rateScale: o.rateScale,
    repeats,
    startedAt: startedAt.toISOString(),
    wallS: Math.round((Date.now() - startedAt) / 1000),
    contenders
  }
}

async function runContender (name, experiment, workload, logger) {
  const sut = await startSutProcess(name, experiment)
  let client = null
  try {
    // KV: tag every written value, so the run can tell which reads were stale (loadgen/stale-reads.js)
    const kv = experiment.app === 'kv-cache'
    const runOptions = { target: sut.target, servers: sut.serverIds, connections: experiment.connections, maxInFlight: 8192, timeoutMs: experiment.timeoutMs, windowMs: experiment.periodMs, logger }
    // chopper-client: the load generator routes through @chopper/client, here.
    if (sut.client) {
      client = await startClient(sut.client, experiment)
      runOptions.dispatcher = client
    }
    // JIT warm-up of the fresh processes (scenario.js warmupWorkload): not measured, no measured key touched.
    let warmup = null
    if (experiment.warmupSeconds > 0) {
      const w = await loadgen.run(warmupWorkload(workload, experiment.warmupSeconds, experiment.warmupRate), { ...runOptions, perKey: false })
      warmup = { requests: w.totals.scheduled, responses: w.totals.responses, status: w.totals.status }
    }
    let preload = null
    if (experiment.preload) {
      const p = await loadgen.run(preloadWorkload(workload, experiment.preloadRate), { ...runOptions, perKey: false, checkStaleReads: kv })
      preload = { requests: p.totals.scheduled, errors: p.totals.errorCount }
      if (p.totals.errorCount > 0) throw new InvalidArgumentError(`preload failed: ${p.totals.errorCount} of ${p.totals.scheduled} writes failed (${JSON.stringify(p.totals.status)})`)
    }
    const replicaChoice = client ? client.replicas.policy : sut.hasController ? await replicaChoiceOf(sut.target) : null
    const before = await sut.cacheCounters()
    // The app servers' kv counters as the measured run starts: the warm-up's and the preload's
    // writes (fresh processes, code not yet optimised, slow fences) are not the run's.
    const kvBefore = (await sut.serverStats()).map((s) => s && s.kv)
    const roundsBefore = sut.hasController ? (await sut.rounds()).map((x) => x.round) : []
    const runStartedAt = Date.now()
    const cpuBefore = cpuSnapshot(sut.processes)
    const r = await loadgen.run(workload, { ...runOptions, checkStaleReads: kv })
    const cost = cpuCost(cpuBefore, cpuSnapshot(sut.processes), r.totals.responses)
    const cpu = { ...cost, ...machineLoad(cost, r.totals.achievedRate, os.cpus().length) }
    const after = await sut.cacheCounters()
    const seen = new Set(roundsBefore)
    const rounds = sut.hasController ? (await sut.rounds()).filter((x) => !seen.has(x.round) && x.at <= runStartedAt + r.wallMs) : null
    const cache = after && { hits: after.hits - before.hits, misses: after.misses - before.misses }
    const m = contenderMetrics(r, { experiment, rounds, cache, runStartedAt })
    const stats = await sut.serverStats()
    // The layout the run ended with: servers per slice (replicas), to tell which slices reads could spread over.
    const finalLayout = sut.hasController ? await sut.layout() : null
    // Each app server's modelled queue over the whole run (preload included): busy time, peak queue, refusals;
    // its kv counters over the whole run (kv) and over the measured run alone (kvRun).
    const servers = sut.serverIds.map((id, i) => ({ id, pid: sut.processes.appServers[id], capacity: stats[i] && stats[i].capacity && pick(stats[i].capacity, ['served', 'busyMs', 'peakQueue', 'refused']), guard: stats[i] && stats[i].guard, kv: stats[i] && stats[i].kv, kvRun: stats[i] && counterDelta(kvBefore[i], stats[i].kv) }))
    return { warmup, preload, haproxyConfig: sut.haproxyConfig, targets: sut.target, replicaChoice, finalLayout, processes: sut.processes, servers, ...m, cpu }
  } finally {
    if (client) await client.close()
    await sut.close()
  }
}

/**
 * The chopper-client contender's client, holding the controller's map: the
 * front end's options as the experiment sets them (connections, timeout, and
 * its --frontend-options' replica choice), its read credential when the run
 * has a cluster token.
 */
async function startClient ({ controllerUrl }, experiment) {
  const token = process.env.CHOPPER_CLUSTER_TOKEN || undefined
  const { replicaChoice } = experiment.frontendOptions || {}
  const client = createClient({
    controllerUrl,
    readCredential: token === undefined ? undefined : readCredential(token),
    connections: experiment.connections,
    upstreamTimeoutMs: experiment.timeoutMs + 5000,
    ...(replicaChoice === undefined ? {} : { replicaChoice })
  })
  try {
    await client.ready({ timeoutMs: 30000 })
    return client
  } catch (err) {
    await client.close()
    throw err
  }
}

/**
 * The replica choice Chopper's front ends say they make (their /healthz, over
 * the control plane's JSON client: a refusal or a timeout is a typed error): one
 * policy name when they agree, else the list, in target order.
 */
async function replicaChoiceOf (targets) {
  const client = new JsonClient({ timeoutMs: 5000 })
  try {
    const seen = []
    for (const t of targets) seen.push((await client.get(new URL('/healthz', t).href)).data.replicaChoice)
    return new Set(seen).size === 1 ? seen[0] : seen
  } finally {
    await client.close()
  }
}

/**
 * `after` − `before`, counter by counter (a counter missing before counts
 * from 0); null without `after`. The `_ms` sums keep 3 decimals.
 * @param {Object<string, number>|null|undefined} before
 * @param {Object<string, number>|null|undefined} after
 */
function counterDelta (before, after) {
  if (!after) return null
  const out = {}
  for (const [k, v] of Object.entries(after)) out[k] = round3(v - ((before && before[k]) || 0))
  return out
}

const pick = (o, keys) => Object.fromEntries(keys.map((k) => [k, typeof o[k] === 'number' ? round3(o[k]) : o[k]]))

/** Where and with what the figures were measured. */
function environment () {
  return {
    node: process.version,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    cpus: os.cpus().length,
    cpuModel: (os.cpus()[0] || {}).model,
    haproxy: haproxyVersion()
  }
}

/** ", p99 by method: GET 12 ms, PUT 30 ms" when the run had more than one method. */
function byMethod (entry) {
  const m = Object.entries(entry.latencyByMethod || {})
  return m.length > 1 ? `, p99 by method: ${m.map(([k, l]) => `${k} ${l.p99} ms`).join(', ')}` : ''
}

/** ", outside the app servers p50 A / p90 B / p99 C ms": client, router and network (Server-Timing). */
function outsideLine (o) {
  return o ? `, outside the app servers p50 ${o.p50} / p90 ${o.p90} / p99 ${o.p99} ms` : ''
}

/**
 * ", replicated writes (N): hold A / store B / release C ms mean, D % of holds
 * over 10 ms; held reads waited W times, E ms mean" from the app servers' kv
 * counters over the measured run (kvRun: the warm-up and the preload left
 * out), when any write was replicated or any read waited.
 */
function replicationLine (servers) {
  const sum = (k) => (servers || []).reduce((a, s) => a + ((s.kvRun && s.kvRun[k]) || 0), 0)
  const phase = (p) => ({ n: sum(`write_phase_count{"phase":"${p}"}`), ms: sum(`write_phase_ms{"phase":"${p}"}`), over10: sum(`write_phase_over_10ms{"phase":"${p}"}`) })
  const mean = (x) => (x.n > 0 ? (x.ms / x.n).toFixed(1) : '-')
  const [hold, store, release] = ['hold', 'store', 'release'].map(phase)
  const waits = { n: sum('held_read_wait_count'), ms: sum('held_read_wait_ms') }
  if (hold.n === 0 && waits.n === 0) return ''
  const writes = hold.n > 0 ? `, replicated writes (${hold.n}): hold ${mean(hold)} / store ${mean(store)} / release ${mean(release)} ms mean, ${(100 * hold.over10 / hold.n).toFixed(1)} % of holds over 10 ms` : ''
  return `${writes}${waits.n > 0 ? `; held reads waited ${waits.n} times, ${mean(waits)} ms mean` : ''}`
}

/** ", CPU per request: router R µs, app servers A µs" (the parts that could be read). */
function cpuLine (cpu) {
  if (!cpu || cpu.routerUs === null) return ''
  const busy = cpu.cores === undefined ? '' : `; ${cpu.cores} of ${os.cpus().length} cores busy${cpu.saturated ? ' (SATURATED: the latencies measure the machine too)' : ''}`
  return `, CPU per request: router ${cpu.routerUs} µs, app servers ${cpu.appUs} µs${cpu.storeUs ? `, DynamoDB ${cpu.storeUs} µs` : ''}, client ${cpu.clientUs} µs${busy}`
}

module.exports = { runScenario, environment, defaults, counterDelta, replicationLine }
