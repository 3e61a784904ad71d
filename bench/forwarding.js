#!/usr/bin/env node
'use strict'

// The proxy tax: Chopper's front end against HAProxy and nginx (and the axios
// forwarder, and the backend alone), all in front of the same no-op backend,
// in one run, contenders alternating round by round, driven by wrk.
// Two configurations: one process or thread per proxy, and every core.
//
// Usage: node bench/forwarding.js [--duration 5] [--connections 32] [--threads 1]
//          [--rounds 3] [--warmup 2] [--only single|all] [--backend-workers 1]
//          [--out bench/results/forwarding]
// Writes <out>.json and <out>.md. A contender whose tool is missing is reported
// as not available, with the line that installs it.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { parseFlags } = require('../cli/args')
const { CONTENDERS, CONFIGURATIONS, unavailableReason, startBackend } = require('./proxies/contenders')
const { runWrk } = require('./proxies/wrk')
const { treeCpuMs } = require('./proxies/cpu')
const { toolVersion, missingReason } = require('./proxies/tools')
const { summarize, renderMarkdown, renderTable } = require('./proxies/report')
const { alternateRounds } = require('./proxies/rounds')

/** Every flag and its default. */
const FLAGS = {
  duration: { type: 'string', default: '5' }, // seconds per measurement
  connections: { type: 'string', default: '32' },
  threads: { type: 'string', default: '1' }, // wrk threads
  rounds: { type: 'string', default: '3' },
  warmup: { type: 'string', default: '2' }, // seconds per contender, discarded; 0 skips
  only: { type: 'string' }, // single | all; both by default
  'backend-workers': { type: 'string', default: '1' },
  'body-bytes': { type: 'string', default: '0' }, // > 0: every request is a PUT with a body of this many bytes
  out: { type: 'string', default: path.join('bench', 'results', 'forwarding') },
  help: { type: 'boolean', short: 'h' }
}
const USAGE = 'usage: node bench/forwarding.js [--duration 5] [--connections 32] [--threads 1] [--rounds 3] [--warmup 2] [--only single|all] [--backend-workers 1] [--body-bytes 0] [--out bench/results/forwarding]'

/** The request every contender forwards; `key` is what our front end routes on. */
const REQUEST_PATH = '/x?key=bench'

const running = new Set() // stop functions of every child still up
async function stopAll () {
  const stops = [...running]
  running.clear()
  await Promise.allSettled(stops.map((stop) => stop()))
}

async function start (fn) {
  const handle = await fn()
  running.add(handle.stop)
  return handle
}

function commit () {
  try {
    const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
    return dirty ? `${sha} (with uncommitted changes)` : sha
  } catch {
    return 'unknown'
  }
}

const loadavg = () => os.loadavg().map((x) => Math.round(x * 100) / 100)

/** With a body size: a wrk script (in a temporary directory, removed after the run) that sends every request as a PUT with that body; else undefined. */
function putScript (bytes) {
  if (!(bytes > 0)) return undefined
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-forwarding-')), 'put.lua')
  fs.writeFileSync(file, `wrk.method = "PUT"\nwrk.body = string.rep("x", ${bytes})\nwrk.headers["Content-Type"] = "application/octet-stream"\n`)
  return file
}

/** One wrk measurement of `url`, with the CPU the proxy and the backend used meanwhile. */
async function measure (url, { pid, backendPid, wrkOptions }) {
  const cpu0 = pid ? treeCpuMs(pid) : null
  const b0 = treeCpuMs(backendPid)
  const t0 = process.hrtime.bigint()
  const res = await runWrk(url, wrkOptions)
  const wallMs = Number(process.hrtime.bigint() - t0) / 1e6
  const cpu1 = pid ? treeCpuMs(pid) : null
  const b1 = treeCpuMs(backendPid)
  return {
    ...res,
    cpuUsPerReq: cpu0 !== null && cpu1 !== null && res.requests ? ((cpu1 - cpu0) * 1000) / res.requests : null,
    backendCpuPct: b0 !== null && b1 !== null ? ((b1 - b0) * 100) / wallMs : null
  }
}

/**
 * One configuration: start every available contender, warm each up, then
 * `rounds` rounds in which each runs once (the order rotates, so none always
 * follows the same neighbour), then stop them.
 */
async function runConfiguration (cfgId, { backend, cores, settings, wrkReason, wrkOptions }) {
  const cfg = CONFIGURATIONS[cfgId]
  const procs = cfg.procs(cores)
  console.log(`\n== ${cfg.title}: ${procs} process(es)/thread(s) per proxy`)
  const entries = cfg.contenders.map((id) => ({ id, label: CONTENDERS[id].label(procs, cfgId), reason: wrkReason || unavailableReason(id), rounds: [], handle: null }))
  try {
    for (const e of entries) {
      if (e.reason) { console.log(`  ${e.label}: not available: ${e.reason}`); continue }
      try {
        e.handle = await start(() => CONTENDERS[e.id].start({ backendUrl: backend.url, procs, cfg: cfgId }))
        if (settings.warmupS > 0) await runWrk(e.handle.url + REQUEST_PATH, { ...wrkOptions, durationS: settings.warmupS })
      } catch (err) {
        e.reason = err.message.split('\n')[0]
        console.log(`  ${e.label}: not available: ${e.reason}`)
      }
    }
    const live = entries.filter((e) => !e.reason)
    await alternateRounds(live, settings.rounds, {
      measure: (e) => measure(e.handle.url + REQUEST_PATH, { pid: e.handle.pid, backendPid: backend.pid, wrkOptions }),
      line: (e, m) => {
        const errs = m.non2xx + m.socketErrors ? `  errors ${m.non2xx + m.socketErrors}` : ''
        return `${e.label.padEnd(48)} ${m.rps.toFixed(0).padStart(7)} req/s  p50 ${m.p50Ms.toFixed(2)} ms  p99 ${m.p99Ms.toFixed(2)} ms${errs}`
      }
    })
  } finally {
    await Promise.allSettled(entries.filter((e) => e.handle).map((e) => { running.delete(e.handle.stop); return e.handle.stop() }))
  }
  const rows = summarize(entries)
  return { id: cfgId, title: cfg.title, procs, rows }
}

async function main () {
  const parsed = parseFlags(process.argv.slice(2), {
    options: FLAGS,
    integers: ['duration', 'connections', 'threads', 'rounds', 'warmup', 'backend-workers', 'body-bytes'],
    choices: { only: ['single', 'all'] }
  })
  if (parsed.error || parsed.values.help) {
    console.error(parsed.error ? `error: ${parsed.error}\n${USAGE}` : USAGE)
    return parsed.error ? 2 : 0
  }
  const v = parsed.values
  for (const k of ['duration', 'connections', 'threads', 'rounds', 'backend-workers']) {
    if (v[k] < 1) { console.error(`error: --${k} must be >= 1\n${USAGE}`); return 2 }
  }
  if (v.threads > v.connections) { console.error(`error: --threads must not exceed --connections\n${USAGE}`); return 2 }
  if (v['body-bytes'] < 0) { console.error(`error: --body-bytes must be >= 0\n${USAGE}`); return 2 }
  const settings = { durationS: v.duration, connections: v.connections, threads: v.threads, rounds: v.rounds, warmupS: v.warmup, backendWorkers: v['backend-workers'], only: v.only || null, bodyBytes: v['body-bytes'] }
  const wrkOptions = { threads: v.threads, connections: v.connections, durationS: v.duration, script: putScript(settings.bodyBytes) }
  const out = v.out.replace(/\.(json|md)$/, '')
  const cores = os.availableParallelism()
  const startedAt = new Date()
  const machine = {
    cores,
    cpuModel: (os.cpus()[0] || {}).model || 'unknown',
    loadavgStart: loadavg(),
    node: process.version,
    commit: commit(),
    tools: { wrk: toolVersion('wrk'), haproxy: toolVersion('haproxy'), nginx: toolVersion('nginx') }
  }
  const wrkReason = missingReason('wrk')
  const command = ['node', 'bench/forwarding.js', ...process.argv.slice(2)].join(' ')
  console.log(command)
  console.log(`wrk -t${v.threads} -c${v.connections} -d${v.duration}s --latency, ${v.rounds} round(s), ${v.warmup} s warm-up; ${cores} cores, load average ${machine.loadavgStart.join('/')}`)

  const backend = await start(() => startBackend({ workers: settings.backendWorkers }))
  console.log(`no-op backend on ${backend.url} (${settings.backendWorkers} process(es))`)
  const configurations = []
  try {
    for (const id of v.only ? [v.only] : ['single', 'all']) {
      configurations.push(await runConfiguration(id, { backend, cores, settings, wrkReason, wrkOptions }))
    }
  } finally {
    await stopAll()
    if (wrkOptions.script) fs.rmSync(path.dirname(wrkOptions.script), { recursive: true, force: true })
  }
  machine.loadavgEnd = loadavg()
  const result = {
    bench: 'forwarding',
    startedAt: startedAt.toISOString(),
    elapsedS: (Date.now() - startedAt.getTime()) / 1000,
    command,
    wrk: `wrk -t${v.threads} -c${v.connections} -d${v.duration}s --latency${settings.bodyBytes > 0 ? ` -s <a script: PUT with a ${settings.bodyBytes}-byte body>` : ''} http://127.0.0.1:PORT${REQUEST_PATH}`,
    settings,
    machine,
    backend: { script: 'bench/noop-backend.js', workers: settings.backendWorkers },
    configurations
  }
  for (const c of configurations) console.log(`\n## ${c.title} (${c.procs})\n\n${renderTable(c.rows)}`)
  fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true })
  fs.writeFileSync(`${out}.json`, JSON.stringify(result, null, 2) + '\n')
  fs.writeFileSync(`${out}.md`, renderMarkdown(result))
  console.log(`\nwrote ${out}.json and ${out}.md`)
  return 0
}

// Ctrl-C or a kill: stop every child (HAProxy, nginx, front ends, backend) before leaving.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    console.error(`\n${signal}: stopping the contenders and the backend`)
    stopAll().finally(() => process.exit(130))
  })
}

main().then((code) => { process.exitCode = code }, (err) => {
  console.error(err)
  stopAll().finally(() => process.exit(1))
})
