#!/usr/bin/env node
'use strict'

// Routing in the caller against routing in a proxy (issue 39): the same
// Node caller (bench/lib/client-load-child.js, a closed loop over undici's
// request API) sends GETs with a key to the no-op backend (bench/noop-backend.js)
// four ways, in one run, rounds alternating:
//   client    @chopper/client routes in the caller, straight to the backend
//   frontend  an undici Pool to our front end (bench/proxies/frontend-child.js), which routes
//   haproxy   an undici Pool to HAProxy (nbthread 1), which forwards
//   direct    an undici Pool straight to the backend: no routing at all
// Reports p50 and p99 as the caller sees them, and CPU µs per request: the
// caller's, the proxy's, and the two together (what routing costs the
// machine; the backend's is the same for all and shown apart).
//
// Usage: node bench/client.js [--duration 5] [--connections 32] [--rounds 3] [--warmup 1] [--out bench/results/client]
// Writes <out>.json and <out>.md.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile, execFileSync } = require('node:child_process')
const { promisify } = require('node:util')
const { parseFlags } = require('../cli/args')
const { CONTENDERS: PROXIES, startBackend, unavailableReason } = require('./proxies/contenders')
const { treeCpuMs } = require('./proxies/cpu')
const { toolVersion } = require('./proxies/tools')
const { median } = require('./proxies/report')
const { alternateRounds } = require('./proxies/rounds')

const execFileP = promisify(execFile)
const LOAD_CHILD = path.join(__dirname, 'lib', 'client-load-child.js')

const FLAGS = {
  duration: { type: 'string', default: '5' }, // seconds per measurement
  connections: { type: 'string', default: '32' }, // concurrent requests of the caller
  rounds: { type: 'string', default: '3' },
  warmup: { type: 'string', default: '1' }, // seconds per contender before the rounds; 0 skips
  out: { type: 'string', default: path.join('bench', 'results', 'client') },
  help: { type: 'boolean', short: 'h' }
}
const USAGE = 'usage: node bench/client.js [--duration 5] [--connections 32] [--rounds 3] [--warmup 1] [--out bench/results/client]'

/** The contenders: what the caller targets, and the proxy it starts (null: none). */
const CONTENDERS = Object.freeze({
  client: { label: '@chopper/client, routed in the caller', mode: 'client', proxy: null },
  frontend: { label: 'through our front end (1 process)', mode: 'pool', proxy: 'chopper' },
  haproxy: { label: 'through HAProxy (nbthread 1)', mode: 'pool', proxy: 'haproxy' },
  direct: { label: 'backend direct, no routing', mode: 'pool', proxy: null }
})

/** One run of the caller against `target`, with the proxy's and the backend's CPU meanwhile. */
async function measure ({ mode, target, proxyPid, backendPid, durationS, connections }) {
  const p0 = proxyPid ? treeCpuMs(proxyPid) : null
  const b0 = treeCpuMs(backendPid)
  const { stdout } = await execFileP(process.execPath, [LOAD_CHILD, '--mode', mode, '--target', target, '--duration', String(durationS), '--connections', String(connections)], { timeout: (durationS + 30) * 1000 })
  const r = JSON.parse(stdout.trim().split('\n').pop())
  const p1 = proxyPid ? treeCpuMs(proxyPid) : null
  const b1 = treeCpuMs(backendPid)
  const per = (ms) => (r.requests > 0 && ms !== null ? (ms * 1000) / r.requests : null)
  const callerUs = per(r.cpuMs)
  const proxyUs = p0 !== null && p1 !== null ? per(p1 - p0) : (proxyPid ? null : 0)
  return {
    requests: r.requests,
    errors: r.errors + r.non2xx,
    rps: r.requests / (r.wallMs / 1000),
    p50Ms: r.p50Ms,
    p99Ms: r.p99Ms,
    callerCpuUsPerReq: callerUs,
    proxyCpuUsPerReq: proxyUs,
    routingCpuUsPerReq: callerUs !== null && proxyUs !== null ? callerUs + proxyUs : null,
    backendCpuUsPerReq: b0 !== null && b1 !== null ? per(b1 - b0) : null
  }
}

const FIGURES = ['rps', 'p50Ms', 'p99Ms', 'callerCpuUsPerReq', 'proxyCpuUsPerReq', 'routingCpuUsPerReq', 'backendCpuUsPerReq']

/** Medians over the rounds that ran, per contender. */
function summarize (entries) {
  return entries.map((e) => {
    const ok = e.rounds.filter((r) => !r.error)
    if (e.reason || ok.length === 0) return { id: e.id, label: e.label, available: false, reason: e.reason || (e.rounds[0] && e.rounds[0].error) || 'not measured' }
    const row = { id: e.id, label: e.label, available: true, rounds: ok.length, errors: ok.reduce((s, r) => s + r.errors, 0) }
    for (const f of FIGURES) row[f] = median(ok.map((r) => r[f]))
    return row
  })
}

const fmt = (x, digits = 1) => (x === null || x === undefined ? 'n/a' : x.toFixed(digits))

function renderTable (rows) {
  const lines = ['| | req/s | p50 ms | p99 ms | caller CPU µs/req | proxy CPU µs/req | routing CPU µs/req (caller + proxy) | backend CPU µs/req | errors |', '|---|---:|---:|---:|---:|---:|---:|---:|---:|']
  for (const r of rows) {
    if (!r.available) { lines.push(`| ${r.label} | not available: ${r.reason} | | | | | | | |`); continue }
    lines.push(`| ${r.label} | ${fmt(r.rps, 0)} | ${fmt(r.p50Ms, 2)} | ${fmt(r.p99Ms, 2)} | ${fmt(r.callerCpuUsPerReq)} | ${fmt(r.proxyCpuUsPerReq)} | ${fmt(r.routingCpuUsPerReq)} | ${fmt(r.backendCpuUsPerReq)} | ${r.errors} |`)
  }
  return lines.join('\n')
}

function renderMarkdown (result) {
  const m = result.machine
  return `# Routing in the caller: @chopper/client against our front end and HAProxy

\`${result.command}\`, ${result.startedAt}, commit ${m.commit}; ${m.cores} cores (${m.cpuModel}), load average ${m.loadavgStart.join('/')} at the start and ${m.loadavgEnd.join('/')} at the end; Node ${m.node}; HAProxy: ${m.haproxy}.

The same Node caller (\`bench/lib/client-load-child.js\`: ${result.settings.connections} concurrent requests in a closed loop, undici's request API, a GET with a key) sends to the no-op backend (\`bench/noop-backend.js\`) through each contender; ${result.settings.rounds} round(s) of ${result.settings.durationS} s, contenders alternating, medians. Latency is the caller's. CPU per request: the caller's process (its routing included), the proxy's, and the two together; the backend's is the same work for all.

${renderTable(result.rows)}
`
}

async function main () {
  const parsed = parseFlags(process.argv.slice(2), { options: FLAGS, integers: ['connections', 'rounds'] })
  if (parsed.error || parsed.values.help) {
    console.error(parsed.error ? `error: ${parsed.error}\n${USAGE}` : USAGE)
    return parsed.error ? 2 : 0
  }
  const v = parsed.values
  const settings = { durationS: Number(v.duration), connections: v.connections, rounds: v.rounds, warmupS: Number(v.warmup) }
  if (!(settings.durationS > 0) || !(settings.warmupS >= 0) || settings.connections < 1 || settings.rounds < 1) {
    console.error(`error: --duration > 0, --warmup >= 0, --connections >= 1 and --rounds >= 1\n${USAGE}`)
    return 2
  }
  const out = v.out.replace(/\.(json|md)$/, '')
  const command = ['node', 'bench/client.js', ...process.argv.slice(2)].join(' ')
  const loadavg = () => os.loadavg().map((x) => Math.round(x * 100) / 100)
  const machine = { cores: os.availableParallelism(), cpuModel: (os.cpus()[0] || {}).model || 'unknown', loadavgStart: loadavg(), node: process.version, commit: commit(), haproxy: toolVersion('haproxy') }
  console.log(command)
  const startedAt = new Date()
  const stops = []
  const entries = Object.entries(CONTENDERS).map(([id, c]) => ({ id, ...c, reason: c.proxy ? unavailableReason(c.proxy) : null, rounds: [], target: null, pid: null }))
  try {
    const backend = await startBackend()
    stops.push(backend.stop)
    for (const e of entries) {
      if (e.reason) continue
      try {
        if (e.proxy) {
          const h = await PROXIES[e.proxy].start({ backendUrl: backend.url, procs: 1, cfg: 'single' })
          stops.push(h.stop)
          e.target = h.url
          e.pid = h.pid
        } else {
          e.target = backend.url
        }
        if (settings.warmupS > 0) await measure({ mode: e.mode, target: e.target, proxyPid: e.pid, backendPid: backend.pid, durationS: settings.warmupS, connections: settings.connections })
      } catch (err) {
        e.reason = err.message.split('\n')[0]
      }
    }
    const live = entries.filter((e) => !e.reason)
    await alternateRounds(live, settings.rounds, {
      measure: (e) => measure({ mode: e.mode, target: e.target, proxyPid: e.pid, backendPid: backend.pid, durationS: settings.durationS, connections: settings.connections }),
      line: (e, m) => `${e.label.padEnd(40)} ${fmt(m.rps, 0).padStart(7)} req/s  p50 ${fmt(m.p50Ms, 2)} ms  p99 ${fmt(m.p99Ms, 2)} ms  routing ${fmt(m.routingCpuUsPerReq)} µs/req${m.errors ? `  errors ${m.errors}` : ''}`
    })
  } finally {
    await Promise.allSettled(stops.reverse().map((stop) => stop()))
  }
  machine.loadavgEnd = loadavg()
  const result = {
    bench: 'client',
    startedAt: startedAt.toISOString(),
    elapsedS: (Date.now() - startedAt.getTime()) / 1000,
    command,
    settings,
    machine,
    rows: summarize(entries),
    rounds: Object.fromEntries(entries.map((e) => [e.id, e.rounds]))
  }
  console.log(`\n${renderTable(result.rows)}`)
  fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true })
  fs.writeFileSync(`${out}.json`, JSON.stringify(result, null, 2) + '\n')
  fs.writeFileSync(`${out}.md`, renderMarkdown(result))
  console.log(`\nwrote ${out}.json and ${out}.md`)
  return 0
}

function commit () {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return 'unknown'
  }
}

if (require.main === module) {
  main().then((code) => { process.exitCode = code }, (err) => {
    console.error(err.stack)
    process.exitCode = 1
  })
}

module.exports = { CONTENDERS, summarize, renderTable }
