#!/usr/bin/env node
'use strict'

// appserver-lib's cost per request (issue 12, item 4). In one run, alternating,
// wrk drives the same trivial Express app (GET /hello?key=K → small JSON) in
// child processes: plain (on the same request shapes as createAppServer), behind the shard guard (createAppServer,
// consistency 'available', no controller, one pushed slice covering the whole
// keyspace), and the same with Node's own request classes instead of the
// request shapes (requestShapes: false). The overhead is derived from the
// throughput difference, the shapes' saving from the CPU time difference. Then
// micro-benchmarks price what a precomputed slice key (X-Chopper-Slice-Key,
// set by the front end) would save: fingerprint32 per key length against
// parsing the header. Writes <out>/appserver-overhead.{json,md}. Not a test.

const path = require('node:path')
const { forkChild, killAllChildren } = require('./lib/child')
const { runWrk, hasWrk } = require('./lib/wrk')
const { request, pushAssignment } = require('./lib/http')
const { wholeKeyspace, slicedAssignment } = require('./lib/assignments')
const { nsPerOp, keysOfLength } = require('./lib/micro')
const { markdownTable, environment, writeResults, fmt } = require('./lib/report')
const { parseFlags } = require('./lib/cli')
const { sliceKey, KEYSPACE_SIZE } = require('../core/keyspace')
const { ShardGuard } = require('../appserver-lib/index.js')

const FLAGS = {
  duration: { type: 'int', default: 5, min: 1 },
  connections: { type: 'int', default: 32, min: 1 },
  threads: { type: 'int', default: 1, min: 1 },
  rounds: { type: 'int', default: 3, min: 1 },
  warmup: { type: 'int', default: 2, min: 0 },
  iterations: { type: 'int', default: 2000000, min: 1000 },
  out: { type: 'string', default: path.join(__dirname, 'results') },
  help: { type: 'boolean' }
}

const USAGE = `usage: node bench/appserver-overhead.js [options]
  --duration S      seconds per wrk run (default 5)
  --connections N   wrk connections (default 32)
  --threads N       wrk threads (default 1)
  --rounds N        alternating rounds; medians are reported (default 3)
  --warmup S        seconds of discarded wrk warm-up per variant (default 2; 0 skips)
  --iterations N    operations per micro-benchmark run (default 2000000)
  --out DIR         where appserver-overhead.{json,md} go (default bench/results)`

const CHILD = path.join(__dirname, 'lib', 'hello-app-child.js')
const KEY = 'bench-key-000001' // 16 bytes, as a short user id would be
const KEY_LENGTHS = [8, 32, 128]
const VARIANTS = [
  { name: 'plain', label: 'plain Express (with the request shapes)' },
  { name: 'guarded', label: 'Express + shard guard (createAppServer)' },
  { name: 'unshaped', label: 'the same with Node\'s request classes (requestShapes: false)' }
]
const GUARDED = ['guarded', 'unshaped']

const median = (xs) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b)
  return s.length ? s[Math.floor(s.length / 2)] : NaN
}

/** Start both variants, each in its own process, and check that they answer 200. */
async function startVariants () {
  const running = {}
  for (const v of VARIANTS) {
    const child = forkChild(CHILD)
    running[v.name] = { child, ...(await child.call('start', { mode: v.name })) }
  }
  for (const name of GUARDED) await pushAssignment(running[name].controlUrl, wholeKeyspace('app-1', running[name].url))
  for (const v of VARIANTS) {
    const res = await request(`${running[v.name].url}/hello?key=${KEY}`)
    if (res.status !== 200) throw new Error(`${v.name} answered ${res.status} ${JSON.stringify(res.body)}`)
  }
  for (const name of GUARDED) {
    if ((await request(`${running[name].url}/hello?key=${KEY}`)).headers['x-served-by'] !== 'app-1') throw new Error(`the ${name} app did not go through the shard guard`)
  }
  return running
}

/** Requests the guard admitted so far, from the app server's /metrics. */
async function admittedCount (controlUrl) {
  const res = await request(`${controlUrl}/metrics`)
  const m = /^chopper_appserver_requests_admitted (\d+)/m.exec(String(res.body))
  return m ? Number(m[1]) : NaN
}

/** The throughput half: alternating wrk rounds (ABBA order so drift hits both alike). */
async function measureThroughput (opts, log) {
  const running = await startVariants()
  try {
    const wrkOpts = { threads: opts.threads, connections: opts.connections }
    if (opts.warmup > 0) {
      for (const v of VARIANTS) await runWrk(`${running[v.name].url}/hello?key=${KEY}`, { ...wrkOpts, durationS: opts.warmup })
    }
    const admittedBefore = await admittedCount(running.guarded.controlUrl)
    const rounds = []
    let guardedRequests = 0
    for (let r = 0; r < opts.rounds; r++) {
      const order = r % 2 === 0 ? VARIANTS : [...VARIANTS].reverse()
      const round = { round: r + 1 }
      for (const v of order) {
        const cpu0 = await running[v.name].child.call('cpu')
        const res = await runWrk(`${running[v.name].url}/hello?key=${KEY}`, { ...wrkOpts, durationS: opts.duration })
        // CPU the app's process spent per response: unlike throughput, barely
        // moved by whatever else runs on the machine.
        res.cpuUsPerRequest = ((await running[v.name].child.call('cpu')) - cpu0) / res.requests
        round[v.name] = res
        if (v.name === 'guarded') guardedRequests += res.requests
        log(`round ${r + 1} ${v.name.padEnd(8)} ${fmt.int(res.rps).padStart(8)} req/s  p50 ${fmt.fixed(res.p50Ms, 2)} ms  p99 ${fmt.fixed(res.p99Ms, 2)} ms  CPU ${fmt.fixed(res.cpuUsPerRequest, 1)} µs/req  non-2xx ${res.non2xx}`)
      }
      rounds.push(round)
    }
    // wrk counts completed responses only; requests cut off at the end were admitted too.
    const admitted = (await admittedCount(running.guarded.controlUrl)) - admittedBefore
    return { rounds, guardCheck: { wrkRequests: guardedRequests, admitted } }
  } finally {
    await Promise.all(Object.values(running).map((r) => r.child.close()))
  }
}

/**
 * What a precomputed slice key would replace. The app server hashes today;
 * with X-Chopper-Slice-Key it would parse and range-check a decimal instead.
 */
function parseSliceKeyHeader (text) {
  // Strict decimal (Number() would take '', ' 7', '0x10' and '1e3'): the
  // header is only trusted when the front end wrote it, and then it is exact.
  if (typeof text !== 'string' || text.length === 0 || text.length > 10) return -1
  let v = 0
  for (let i = 0; i < text.length; i++) {
    const d = text.charCodeAt(i) - 48
    if (d < 0 || d > 9) return -1
    v = v * 10 + d
  }
  return v < KEYSPACE_SIZE ? v : -1
}

/** The micro-benchmark half: ns per call of what the guard does per request. */
function measureMicro (iterations) {
  const COUNT = 4096 // distinct keys, cycled (a power of two: the index is a mask)
  const mask = COUNT - 1
  const rows = []
  const add = (name, keyLength, body) => rows.push({ name, keyLength, ...nsPerOp(body, iterations) })

  for (const len of KEY_LENGTHS) {
    const keys = keysOfLength(len, COUNT, len)
    add('loop baseline (read key)', len, (n) => { let s = 0; for (let i = 0; i < n; i++) s += keys[i & mask].length; return s })
    add('sliceKey() = farmhash.fingerprint32', len, (n) => { let s = 0; for (let i = 0; i < n; i++) s += sliceKey(keys[i & mask]); return s })
  }
  const headers = keysOfLength(16, COUNT, 99).map((k) => String(sliceKey(k)))
  add('parse X-Chopper-Slice-Key (decimal, range-checked)', null, (n) => { let s = 0; for (let i = 0; i < n; i++) s += parseSliceKeyHeader(headers[i & mask]); return s })

  const sliceKeys = new Uint32Array(COUNT)
  const k16 = keysOfLength(16, COUNT, 16)
  for (let i = 0; i < COUNT; i++) sliceKeys[i] = sliceKey(k16[i])
  for (const slices of [1, 100000]) {
    const guard = new ShardGuard({ serverId: 'app-0' })
    guard.setAssignment(slicedAssignment({ slices, servers: 1 })) // every slice ours: every call admits
    add(`guard.admitSliceKey + begin/end, ${slices.toLocaleString('en-US')} slice${slices > 1 ? 's' : ''}`, null, (n) => {
      let s = 0
      for (let i = 0; i < n; i++) { s += guard.admitSliceKey(sliceKeys[i & mask]); guard.end(guard.begin()) }
      return s
    })
  }
  return rows
}

function summarise (rounds) {
  const out = {}
  for (const v of VARIANTS) {
    const runs = rounds.map((r) => r[v.name])
    const rps = median(runs.map((x) => x.rps))
    out[v.name] = {
      label: v.label,
      rps,
      p50Ms: median(runs.map((x) => x.p50Ms)),
      p99Ms: median(runs.map((x) => x.p99Ms)),
      usPerRequest: 1e6 / rps, // the app is CPU-bound on one thread: 1/throughput is its time per request
      cpuUsPerRequest: median(runs.map((x) => x.cpuUsPerRequest)),
      non2xx: runs.reduce((a, x) => a + x.non2xx, 0),
      socketErrors: runs.reduce((a, x) => a + x.socketErrors, 0)
    }
  }
  const p = out.plain.rps
  const g = out.guarded.rps
  const overhead = {
    usPerRequest: 1e6 / g - 1e6 / p,
    addedTimePct: (p / g - 1) * 100,
    throughputLossPct: (1 - g / p) * 100,
    cpuUsPerRequest: out.guarded.cpuUsPerRequest - out.plain.cpuUsPerRequest,
    cpuAddedPct: (out.guarded.cpuUsPerRequest / out.plain.cpuUsPerRequest - 1) * 100,
    // The same from each round's own pair, to show the spread.
    perRoundUs: rounds.map((r) => 1e6 / r.guarded.rps - 1e6 / r.plain.rps)
  }
  // What the request shapes (appserver-lib/request-shapes.js) save: the guarded
  // app with Node's own request classes against the same with the shapes.
  const u = out.unshaped
  const shapes = {
    usPerRequest: 1e6 / u.rps - 1e6 / g,
    cpuUsPerRequest: u.cpuUsPerRequest - out.guarded.cpuUsPerRequest,
    perRoundCpuUs: rounds.map((r) => r.unshaped.cpuUsPerRequest - r.guarded.cpuUsPerRequest)
  }
  return { variants: out, overhead, shapes }
}

function sliceKeyVerdict (micro, summary) {
  const ns = (name, len) => micro.find((m) => m.name === name && m.keyLength === len).medianNs
  const parse = micro.find((m) => m.name.startsWith('parse')).medianNs
  const guardedNs = summary.variants.guarded.usPerRequest * 1000
  return KEY_LENGTHS.map((len) => {
    const hash = ns('sliceKey() = farmhash.fingerprint32', len)
    const saved = hash - parse
    return { keyLength: len, hashNs: hash, parseNs: parse, savedNs: saved, savedPctOfRequest: (saved / guardedNs) * 100, savedPctOfOverhead: (saved / (summary.overhead.usPerRequest * 1000)) * 100 }
  })
}

function toMarkdown (result) {
  const { options: o, summary, micro, verdict, guardCheck, environment: env, command } = result
  const v = summary.variants
  const lines = [
    '# appserver-lib: cost per request',
    '',
    `\`${command}\` on ${env.cpus} × ${env.cpuModel}, Node ${env.node}, load average ${env.loadavg.join(' / ')} at the start (${env.date}).`,
    '',
    `## Throughput: \`wrk -t${o.threads} -c${o.connections} -d${o.duration}s\`, ${o.rounds} alternating rounds, medians`,
    '',
    `GET /hello?key=${KEY} → \`{"key":…,"ok":true}\`; each variant in its own process. The guarded one is \`createAppServer\` (consistency \`available\`, no controller) holding one pushed slice over the whole keyspace, so every request is hashed, looked up, counted, tracked in flight and admitted.`,
    '',
    markdownTable(['variant', 'req/s', 'p50 ms', 'p99 ms', 'µs/request (1/throughput)', 'CPU µs/request', 'non-2xx'], VARIANTS.map((x) => {
      const s = v[x.name]
      return [s.label, fmt.int(s.rps), fmt.fixed(s.p50Ms, 2), fmt.fixed(s.p99Ms, 2), fmt.fixed(s.usPerRequest, 1), fmt.fixed(s.cpuUsPerRequest, 1), s.non2xx]
    })),
    '',
    `**Overhead of the shard guard, from throughput: ${fmt.fixed(summary.overhead.usPerRequest, 1)} µs per request** (${fmt.fixed(summary.overhead.addedTimePct, 1)}% more time per request than the plain app; ${fmt.fixed(summary.overhead.throughputLossPct, 1)}% less throughput). Per round: ${summary.overhead.perRoundUs.map((x) => `${fmt.fixed(x, 1)} µs`).join(', ')}.`,
    '',
    `From the app process's own CPU time (user + system, over wrk's completed responses; less sensitive to other load on the machine): ${fmt.fixed(summary.overhead.cpuUsPerRequest, 1)} µs per request, ${fmt.fixed(summary.overhead.cpuAddedPct, 1)}% more than the plain app.`,
    '',
    `**What the request shapes save** (requests and responses born with the properties Express and the shard guard set, \`appserver-lib/request-shapes.js\`; the guarded app with Node's own classes against the same with the shapes): ${fmt.fixed(summary.shapes.cpuUsPerRequest, 1)} µs of the app process's CPU per request (per round: ${summary.shapes.perRoundCpuUs.map((x) => `${fmt.fixed(x, 1)} µs`).join(', ')}), ${fmt.fixed(summary.shapes.usPerRequest, 1)} µs from throughput.`,
    '',
    `Check: the guard admitted ${fmt.int(guardCheck.admitted)} requests while wrk counted ${fmt.int(guardCheck.wrkRequests)} completed responses on the guarded app.`,
    '',
    '## Micro-benchmarks (in process, ns per call)',
    '',
    markdownTable(['operation', 'key bytes', 'median ns', 'min', 'max'], micro.map((m) => [m.name, m.keyLength ?? '', fmt.fixed(m.medianNs, 1), fmt.fixed(m.minNs, 1), fmt.fixed(m.maxNs, 1)]), 'lrrrr'),
    '',
    '## Is it worth passing the slice key (X-Chopper-Slice-Key)?',
    '',
    'Saving = `sliceKey()` minus parsing the header; shown against the guarded app\'s whole time per request and against the guard\'s overhead.',
    '',
    markdownTable(['key bytes', 'fingerprint32 ns', 'parse header ns', 'saved ns/request', '% of a request', '% of the guard overhead'], verdict.map((x) => [x.keyLength, fmt.fixed(x.hashNs, 1), fmt.fixed(x.parseNs, 1), fmt.fixed(x.savedNs, 1), `${fmt.fixed(x.savedPctOfRequest, 2)}%`, `${fmt.fixed(x.savedPctOfOverhead, 1)}%`]))
  ]
  return lines.join('\n')
}

async function main (argv) {
  let opts
  try {
    opts = parseFlags(argv, FLAGS)
  } catch (err) {
    process.stderr.write(`${err.message}\n${USAGE}\n`)
    return 2
  }
  if (opts.help) { process.stdout.write(USAGE + '\n'); return 0 }
  if (!hasWrk()) { process.stderr.write('wrk is not installed (apt-get install -y wrk)\n'); return 2 }
  const command = `node bench/appserver-overhead.js ${argv.join(' ')}`.trim()
  const env = environment()
  const log = (line) => process.stderr.write(line + '\n')

  log(`wrk -t${opts.threads} -c${opts.connections} -d${opts.duration}s, ${opts.rounds} rounds, alternating (progress on stderr)`)
  const { rounds, guardCheck } = await measureThroughput(opts, log)
  log(`micro-benchmarks, ${opts.iterations} calls per run`)
  const micro = measureMicro(opts.iterations)
  const summary = summarise(rounds)
  const verdict = sliceKeyVerdict(micro, summary)
  const result = { command, environment: env, options: opts, key: KEY, rounds, summary, guardCheck, micro, verdict }
  const markdown = toMarkdown(result)
  const { jsonPath, mdPath } = writeResults(opts.out, 'appserver-overhead', result, markdown)
  process.stdout.write(markdown + '\n\n')
  process.stdout.write(`wrote ${jsonPath} and ${mdPath}\n`)
  return 0
}

if (require.main === module) {
  for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => { killAllChildren(); process.exit(130) })
  main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
    console.error(err)
    killAllChildren()
    process.exit(1)
  })
}

module.exports = { main, parseSliceKeyHeader }
