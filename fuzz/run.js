#!/usr/bin/env node
'use strict'

// npm run fuzz: property-based fuzzing of every component (issue 11, part 4).
// Each component is started in this process on port 0 with real
// dependencies and sent --calls malformed data requests and control calls
// (per signing mode) built by fast-check: headers, bodies, generations,
// slice layouts and signatures. Every answer must be a 4xx with a JSON error;
// no component may crash, each keeps its installed map and keeps serving
// legit requests mixed in, and memory stays bounded. Prints per-component
// figures, writes bench/results/fuzz.json, exits 1 if any property failed.

const path = require('node:path')
const fs = require('node:fs')
const v8 = require('node:v8')
const vm = require('node:vm')
const { performance } = require('node:perf_hooks')
const { parseFlags } = require('../bench/lib/cli')
const { markdownTable, environment, fmt } = require('../bench/lib/report')
const { FuzzClient } = require('./http-client')
const { TARGETS } = require('./targets')
const { SURFACES } = require('./surfaces')
const { runComponent, memory } = require('./runner')
const { loadClusterAuth } = require('./auth')

const FLAGS = {
  calls: { type: 'int', default: 100000, min: 1 },
  components: { type: 'string', default: Object.keys(TARGETS).join(',') },
  auth: { type: 'string', default: 'both' },
  batch: { type: 'int', default: 16, min: 1 },
  seed: { type: 'string', default: undefined },
  'timeout-ms': { type: 'int', default: 10000, min: 100 },
  'max-heap-growth-mb': { type: 'int', default: 64, min: 1 },
  shrink: { type: 'boolean' },
  out: { type: 'string', default: path.join(__dirname, '..', 'bench', 'results', 'fuzz.json') },
  help: { type: 'boolean' }
}

const USAGE = `usage: npm run fuzz -- [options]     (node --expose-gc fuzz/run.js)
  --calls N              malformed calls per component and signing mode (default 100000)
  --components LIST      of ${Object.keys(TARGETS).join(', ')} (default all)
  --auth off|on|both     run the components without a cluster token, with one, or both (default both;
                         "on" needs core/cluster-auth.js)
  --batch N              requests sent at once per property run, 1 to N (default 16)
  --seed N               fast-check seed (default random; printed, and in the results)
  --timeout-ms MS        an answer that takes longer is a failure (default 10000)
  --max-heap-growth-mb M heap growth (after GC) allowed over the run and per component (default 64)
  --shrink               shrink a failing batch to a minimal counterexample (slower)
  --out FILE             results (default bench/results/fuzz.json)`

const TOKEN = 'fuzz-cluster-token-' + 'x'.repeat(24)

/** global.gc, exposed at run time when node was started without --expose-gc. */
function ensureGc () {
  if (typeof global.gc === 'function') return true
  try {
    v8.setFlagsFromString('--expose-gc')
    global.gc = vm.runInNewContext('gc')
  } catch {}
  return typeof global.gc === 'function'
}

function sumStats (list) {
  const keys = ['calls', 'status4xx', 'status5xx', 'statusOther', 'timeouts', 'transport', 'parserRejected', 'clientRefused', 'badBody', 'legitOk', 'legitFailed', 'batches', 'restarts']
  const out = {}
  for (const k of keys) out[k] = list.reduce((n, x) => n + (x[k] || 0), 0)
  return out
}

async function main () {
  let opts
  try {
    opts = parseFlags(process.argv.slice(2), FLAGS)
    if (!['off', 'on', 'both'].includes(opts.auth)) throw new Error(`invalid --auth: expected off, on or both, got ${JSON.stringify(opts.auth)}`)
    if (opts.seed !== undefined && !/^-?\d+$/.test(opts.seed)) throw new Error(`invalid --seed: expected an integer, got ${JSON.stringify(opts.seed)}`)
    for (const c of opts.components.split(',')) if (!Object.hasOwn(TARGETS, c)) throw new Error(`invalid --components: unknown component ${JSON.stringify(c)}; expected some of ${Object.keys(TARGETS).join(', ')}`)
  } catch (err) {
    console.error(err.message)
    console.error(USAGE)
    process.exit(2)
  }
  if (opts.help) {
    console.log(USAGE)
    return
  }
  const authAvailable = loadClusterAuth() !== null
  let modes = opts.auth === 'both' ? ['off', 'on'] : [opts.auth]
  if (!authAvailable && modes.includes('on')) {
    if (opts.auth === 'on') {
      console.error('--auth on: core/cluster-auth.js (signRequest) is not there')
      process.exit(2)
    }
    console.log('core/cluster-auth.js is not there: signature cases skipped (unsigned components only)')
    modes = ['off']
  }
  const seed = opts.seed === undefined ? (Date.now() ^ (Math.random() * 2 ** 31)) | 0 : Number(opts.seed)
  const gc = ensureGc()
  // A crash is an uncaught exception or unhandled rejection from a component
  // (they all run in this process): recorded, and the batch that saw it fails.
  const crashes = { list: [] }
  process.on('uncaughtException', (err) => { crashes.list.push(err); console.error('uncaught exception:', err) })
  process.on('unhandledRejection', (err) => { crashes.list.push(err); console.error('unhandled rejection:', err) })

  const components = opts.components.split(',')
  console.log(`fuzzing ${components.join(', ')}: ${fmt.int(opts.calls)} malformed calls each per mode (${modes.map((m) => (m === 'on' ? 'signed' : 'unsigned')).join(' + ')}), batches of 1-${opts.batch}, seed ${seed}${gc ? '' : ' (no GC exposed: RSS only)'}`)
  const client = new FuzzClient({ timeoutMs: opts['timeout-ms'], connections: opts.batch })
  const t0 = performance.now()
  const memStart = memory()
  const results = []
  try {
    for (const name of components) {
      const runs = []
      for (const mode of modes) {
        const crashesBefore = crashes.list.length
        console.log(`${name} (${mode === 'on' ? 'with a cluster token' : 'no cluster token'}):`)
        const out = await runComponent(
          () => TARGETS[name]({ client, clusterToken: mode === 'on' ? TOKEN : undefined }),
          SURFACES[name],
          { client, crashes, calls: opts.calls, batchMax: opts.batch, seed, shrink: Boolean(opts.shrink), log: (line) => console.log(line) }
        )
        runs.push({ auth: mode, ...out, crashes: crashes.list.length - crashesBefore })
      }
      const mem = runs.map((r) => r.memory)
      results.push({
        component: name,
        ...sumStats(runs),
        crashes: runs.reduce((n, r) => n + r.crashes, 0),
        failures: runs.reduce((n, r) => n + r.failures.length, 0),
        wallMs: runs.reduce((n, r) => n + r.wallMs, 0),
        heapBefore: mem[0].before.heapUsed,
        heapAfter: mem[mem.length - 1].after.heapUsed,
        maxHeapGrowth: Math.max(...mem.map((m) => m.after.heapUsed - m.before.heapUsed)),
        rssBefore: mem[0].before.rss,
        rssAfter: mem[mem.length - 1].after.rss,
        runs
      })
    }
  } finally {
    await client.close()
  }
  const memEnd = memory()
  const wallMs = Math.round(performance.now() - t0)

  const rows = results.map((r) => [r.component, fmt.int(r.calls), fmt.int(r.status4xx), fmt.int(r.status5xx), fmt.int(r.statusOther), fmt.int(r.crashes), fmt.int(r.timeouts), fmt.int(r.transport), `${fmt.mb(r.heapBefore)} → ${fmt.mb(r.heapAfter)}`, `${fmt.mb(r.rssBefore)} → ${fmt.mb(r.rssAfter)}`, fmt.fixed(r.wallMs / 1000, 0), fmt.int(r.failures)])
  const table = markdownTable(['component', 'calls', '4xx', '5xx', 'other', 'crashes', 'timeouts', 'conn. errors', 'heap MB', 'RSS MB', 'wall s', 'failed properties'], rows)
  console.log('\n' + table)
  const totals = { ...sumStats(results), crashes: crashes.list.length, failures: results.reduce((n, r) => n + r.failures, 0), wallMs }
  const heapGrowth = memEnd.heapUsed - memStart.heapUsed
  const bound = opts['max-heap-growth-mb'] * 2 ** 20
  const overBound = [
    ...(gc && heapGrowth > bound ? [`the run: heap ${fmt.signedMb(heapGrowth)} MB`] : []),
    ...(gc ? results.filter((r) => r.maxHeapGrowth > bound).map((r) => `${r.component}: heap ${fmt.signedMb(r.maxHeapGrowth)} MB while up`) : [])
  ]
  console.log(`\ntotal: ${fmt.int(totals.calls)} calls, 4xx ${fmt.int(totals.status4xx)}, 5xx ${fmt.int(totals.status5xx)}, crashes ${totals.crashes}, timeouts ${totals.timeouts}, failed properties ${totals.failures}, ${fmt.fixed(wallMs / 1000, 0)} s`)
  console.log(`heap after GC: ${fmt.mb(memStart.heapUsed)} MB at the start, ${fmt.mb(memEnd.heapUsed)} MB at the end (${fmt.signedMb(heapGrowth)} MB; bound ${opts['max-heap-growth-mb']} MB${gc ? '' : ', not checked: no GC'}); RSS ${fmt.mb(memStart.rss)} → ${fmt.mb(memEnd.rss)} MB`)

  const failures = results.flatMap((r) => r.runs.flatMap((run) => run.failures.map((f) => ({ auth: run.auth, ...f }))))
  const report = {
    command: `npm run fuzz -- ${process.argv.slice(2).join(' ')}`.trim(),
    environment: environment(),
    options: { calls: opts.calls, components, auth: modes, batch: opts.batch, seed, timeoutMs: opts['timeout-ms'], maxHeapGrowthMb: opts['max-heap-growth-mb'], shrink: Boolean(opts.shrink) },
    signatures: authAvailable ? 'covered (core/cluster-auth.js)' : 'skipped: core/cluster-auth.js is not there',
    totals,
    memory: { gc, start: memStart, end: memEnd, heapGrowth, boundBytes: bound, overBound },
    components: results,
    failures
  }
  fs.mkdirSync(path.dirname(opts.out), { recursive: true })
  fs.writeFileSync(opts.out, JSON.stringify(report, null, 2) + '\n')
  console.log(`wrote ${path.relative(process.cwd(), opts.out)}`)

  for (const f of failures) console.log(`\nFAILED ${f.component} (${f.auth === 'on' ? 'signed' : 'unsigned'}) / ${f.surface} (seed ${f.seed}, path ${f.path}):\n  ${(f.firstFault || f.error || '').split('\n').join('\n  ')}`)
  for (const o of overBound) console.log(`memory bound exceeded: ${o}`)
  const ok = failures.length === 0 && totals.crashes === 0 && totals.status5xx === 0 && overBound.length === 0
  console.log(ok ? '\nall properties held' : '\nFUZZING FOUND PROBLEMS')
  process.exitCode = ok ? 0 : 1
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
