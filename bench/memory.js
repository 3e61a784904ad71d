#!/usr/bin/env node
'use strict'

// Resident memory of a front end and an app server (issue 12, item 5), each
// in a child process of its own, measured after a forced GC:
//   1. a front end before and after installing a 100k-slice assignment;
//   2. an app server (createAppServer, trivial app) with the same assignment;
//   3. a front end with 10k client connections: open and idle, then each with
//      a request in flight to a backend that holds responses, then answered,
//      then closed.
// Writes <out>/memory.{json,md}. Not a test.

const net = require('node:net')
const path = require('node:path')
const { performance } = require('node:perf_hooks')
const { forkChild, killAllChildren } = require('./lib/child')
const { pushAssignment, request } = require('./lib/http')
const { slicedAssignment, wholeKeyspace } = require('./lib/assignments')
const { ensureFdLimit } = require('./lib/fd-limit')
const { markdownTable, environment, writeResults, fmt } = require('./lib/report')
const { parseFlags } = require('./lib/cli')
const { pollUntil } = require('../core/poll')

const FLAGS = {
  slices: { type: 'int', default: 100000, min: 1 },
  servers: { type: 'int', default: 10, min: 1 },
  connections: { type: 'int', default: 10000, min: 1 },
  batch: { type: 'int', default: 500, min: 1 },
  'deadline-s': { type: 'int', default: 300, min: 10 },
  out: { type: 'string', default: path.join(__dirname, 'results') },
  help: { type: 'boolean' }
}

const USAGE = `usage: node bench/memory.js [options]
  --slices N        slices in the assignment (default 100000)
  --servers N       servers the slices are dealt to (default 10)
  --connections N   concurrent client connections to the front end (default 10000)
  --batch N         connections opened at once (default 500; stay under the listen backlog, 511)
  --deadline-s S    give up (and kill every child) after this long (default 300)
  --out DIR         where memory.{json,md} go (default bench/results)`

const CHILD = path.join(__dirname, 'lib', 'memory-child.js')
const CHILD_OPTS = { execArgv: ['--expose-gc'], callTimeoutMs: 60000 }

/** Scenarios 1 and 2: a process holding the assignment, before and after the push. */
async function measureMapHolder (kind, body, log) {
  const child = forkChild(CHILD, CHILD_OPTS)
  try {
    const states = []
    const measure = async (state) => {
      states.push({ state, ...(await child.call('measure')) })
      log(`${kind}: ${state}`)
    }
    await measure('bare Node process')
    const urls = await child.call(`start-${kind}`)
    await measure('started, no assignment')
    const t0 = performance.now()
    const answer = await pushAssignment(urls.controlUrl, body)
    const pushMs = performance.now() - t0
    if (!answer.accepted) throw new Error(`${kind} did not accept the assignment: ${JSON.stringify(answer)}`)
    const installed = await request(`${urls.controlUrl}/v1/assignment`)
    const slices = installed.body.assignment.slices.length
    await measure('assignment installed')
    return { kind, states, pushMs, installedSlices: slices }
  } finally {
    await child.close()
  }
}

/**
 * Open `n` plain TCP connections to host:port, `batch` at a time (each batch
 * connected before the next starts, so the listen backlog never overflows).
 * Each socket records the first response it receives.
 */
async function openConnections (port, n, batch) {
  const sockets = []
  const tally = { answered: 0, statuses: {}, errors: 0, closed: 0 }
  for (let i = 0; i < n; i += batch) {
    const wave = []
    for (let j = i; j < Math.min(n, i + batch); j++) {
      const s = net.connect({ host: '127.0.0.1', port })
      s.answered = false
      s.on('data', (chunk) => {
        if (s.answered) return
        s.answered = true
        tally.answered++
        const status = /^HTTP\/1\.1 (\d{3})/.exec(chunk.toString('latin1', 0, 12))
        const code = status ? status[1] : 'unparsed'
        tally.statuses[code] = (tally.statuses[code] || 0) + 1
      })
      s.on('error', () => { tally.errors++ })
      s.on('close', () => { tally.closed++ })
      sockets.push(s)
      wave.push(new Promise((resolve, reject) => {
        s.once('connect', resolve)
        s.once('error', reject)
      }))
    }
    await Promise.all(wave)
  }
  return { sockets, tally }
}

/** Poll a child's descriptor count until `test(count)` holds. */
function waitFds (child, test, what, timeoutMs = 60000) {
  return pollUntil(async () => { const c = await child.call('fds'); return test(c) ? c : false }, { timeoutMs, intervalMs: 50, what })
}

/** Scenario 3: the front end's memory as client connections come, wait, get answered and go. */
async function measureConnections ({ connections, batch }, log) {
  const count = connections.toLocaleString('en-US')
  const backend = forkChild(CHILD, CHILD_OPTS)
  const fe = forkChild(CHILD, CHILD_OPTS)
  let clients = null
  try {
    const { url: backendUrl } = await backend.call('start-backend')
    const urls = await fe.call('start-frontend')
    await pushAssignment(urls.controlUrl, wholeKeyspace('backend', backendUrl))
    const port = Number(new URL(urls.url).port)
    // One request through with the backend answering, so the upstream pool and
    // the forwarding code are in place before the baseline.
    await backend.call('backend-release')
    const warm = await request(`${urls.url}/hold?key=warmup`)
    if (warm.status !== 200) throw new Error(`warm-up request through the front end answered ${warm.status}`)
    await backend.call('backend-hold')

    const states = []
    const measure = async (state, extra = {}) => {
      states.push({ state, ...(await fe.call('measure')), ...extra })
      log(`frontend + connections: ${state}`)
    }
    await measure('started, one slice, no client connection')
    const base = states[0].fds

    const t0 = performance.now()
    clients = await openConnections(port, connections, batch)
    await waitFds(fe, (c) => c >= base + connections, `the front end to accept ${connections} connections`)
    const openMs = performance.now() - t0
    await measure(`${count} connections open, no request yet`)

    const n = clients.sockets.length
    for (let i = 0; i < n; i++) clients.sockets[i].write(`GET /hold?key=k${i} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n`)
    // The backend holds what reaches it (the front end's upstream pool's worth);
    // the rest wait inside the front end. Measure once that number has stopped
    // growing for half a second: every request has been read and queued by then.
    let last = -1
    let stableSince = 0
    const held = await pollUntil(async () => {
      const { held: h } = await backend.call('backend-stats')
      const now = performance.now()
      if (h !== last) { last = h; stableSince = now; return false }
      return h > 0 && now - stableSince >= 500 ? h : false
    }, { timeoutMs: 60000, intervalMs: 50, what: 'requests to reach the holding backend' })
    if (clients.tally.answered > 0) throw new Error(`${clients.tally.answered} requests were answered while the backend was holding: ${JSON.stringify(clients.tally.statuses)}`)
    await measure(`${count} requests in flight (${held} at the backend, the rest queued in the front end)`, { heldAtBackend: held })

    await backend.call('backend-release')
    await pollUntil(() => clients.tally.answered >= n, { timeoutMs: 60000, intervalMs: 50, what: `${n} responses` })
    await measure(`${count} responses delivered, connections kept alive`)

    // The upstream pool stays open (keep-alive): wait for the client sockets only.
    const before = states[states.length - 1].fds
    for (const s of clients.sockets) s.destroy()
    await waitFds(fe, (c) => c <= before - connections, 'the front end to close the client connections')
    await measure('clients disconnected')
    return { states, openMs, tally: clients.tally, heldAtBackend: held }
  } finally {
    if (clients) for (const s of clients.sockets) s.destroy()
    await Promise.all([fe.close(), backend.close()])
  }
}

function toMarkdown (result) {
  const { options: o, environment: env, command, frontend, appserver, connections: c, assignmentBytes, fdLimit } = result
  const row = (label, s, base) => [label, s.state, fmt.mb(s.rss), base ? fmt.signedMb(s.rss - base.rss) : '', fmt.mb(s.heapUsed), base ? fmt.signedMb(s.heapUsed - base.heapUsed) : '', fmt.mb(s.external), fmt.mb(s.maxRss), s.fds]
  const holder = (label, r) => r.states.map((s, i) => row(i === 0 ? label : '', s, i === 0 ? null : r.states[1]))
  const conn = c.states.map((s, i) => row(i === 0 ? 'front end' : '', s, i === 0 ? null : c.states[0]))
  const d = result.derived
  return [
    '# Memory: front end and app server',
    '',
    `\`${command}\` on ${env.cpus} × ${env.cpuModel}, Node ${env.node}, ${env.totalMemMB} MB RAM (${env.date}). Each component in its own process; every figure after a forced GC (\`--expose-gc\`, two passes). Δ is against the started process without an assignment (first table) and against the front end with no client connection (second table). Open files per process: ${fdLimit.after ? fdLimit.after.soft : 'unknown'}.`,
    '',
    `## ${o.slices.toLocaleString('en-US')} slices over ${o.servers} servers (assignment JSON ${fmt.mb(assignmentBytes)} MB)`,
    '',
    markdownTable(['process', 'state', 'RSS MB', 'Δ RSS', 'heapUsed MB', 'Δ heap', 'external MB', 'peak RSS MB', 'fds'],
      [...holder('front end', frontend), ...holder('app server', appserver)], 'llrrrrrrr'),
    '',
    `Per slice (heap, Δ / slices): front end ${fmt.int(d.frontendHeapBytesPerSlice)} B, app server ${fmt.int(d.appserverHeapBytesPerSlice)} B. Push (PUT /v1/assignment, parse, validate, install): front end ${fmt.int(frontend.pushMs)} ms, app server ${fmt.int(appserver.pushMs)} ms.`,
    '',
    `## ${o.connections.toLocaleString('en-US')} client connections to one front end`,
    '',
    `Plain TCP sockets from the bench process, ${o.batch} at a time, to 127.0.0.1 (opened in ${fmt.int(c.openMs)} ms). The backend, in a third process, holds every request it receives until released; the front end forwards over its upstream keep-alive pool, so ${c.heldAtBackend} requests reach the backend and the rest wait in the front end. Client-side: ${c.tally.answered.toLocaleString('en-US')} answered (${Object.entries(c.tally.statuses).map(([k, v]) => `${k}: ${v}`).join(', ')}), ${c.tally.errors} socket errors.`,
    '',
    markdownTable(['process', 'state', 'RSS MB', 'Δ RSS', 'heapUsed MB', 'Δ heap', 'external MB', 'peak RSS MB', 'fds'], conn, 'llrrrrrrr'),
    '',
    `Per connection (Δ / connections): open and idle ${fmt.fixed(d.rssKiBPerIdleConnection, 1)} KiB RSS (${fmt.fixed(d.heapKiBPerIdleConnection, 1)} KiB heap); with a request in flight ${fmt.fixed(d.rssKiBPerInflightConnection, 1)} KiB RSS (${fmt.fixed(d.heapKiBPerInflightConnection, 1)} KiB heap).`
  ].join('\n')
}

function derive ({ frontend, appserver, connections: c, options: o }) {
  const heapDelta = (r) => r.states[2].heapUsed - r.states[1].heapUsed
  const n = o.connections
  return {
    frontendHeapBytesPerSlice: heapDelta(frontend) / o.slices,
    appserverHeapBytesPerSlice: heapDelta(appserver) / o.slices,
    frontendRssDeltaMB: (frontend.states[2].rss - frontend.states[1].rss) / 2 ** 20,
    appserverRssDeltaMB: (appserver.states[2].rss - appserver.states[1].rss) / 2 ** 20,
    rssKiBPerIdleConnection: (c.states[1].rss - c.states[0].rss) / 1024 / n,
    heapKiBPerIdleConnection: (c.states[1].heapUsed - c.states[0].heapUsed) / 1024 / n,
    rssKiBPerInflightConnection: (c.states[2].rss - c.states[0].rss) / 1024 / n,
    heapKiBPerInflightConnection: (c.states[2].heapUsed - c.states[0].heapUsed) / 1024 / n
  }
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
  const command = `node bench/memory.js ${argv.join(' ')}`.trim()
  const log = (line) => process.stderr.write(line + '\n')

  // This process holds every client socket and the front end child every
  // accepted one (children inherit the limit), plus some headroom for each.
  let fdLimit
  try {
    fdLimit = ensureFdLimit(opts.connections + 1024)
  } catch (err) {
    process.stderr.write(`${err.message}\n`)
    return 2
  }
  const deadline = setTimeout(() => {
    process.stderr.write(`memory bench: still running after ${opts['deadline-s']} s; giving up\n`)
    killAllChildren()
    process.exit(1)
  }, opts['deadline-s'] * 1000)
  deadline.unref()

  const env = environment()
  const body = JSON.stringify(slicedAssignment({ slices: opts.slices, servers: opts.servers }))
  const frontend = await measureMapHolder('frontend', body, log)
  const appserver = await measureMapHolder('appserver', body, log)
  const connections = await measureConnections(opts, log)
  clearTimeout(deadline)

  const result = { command, environment: env, options: opts, fdLimit, assignmentBytes: Buffer.byteLength(body), frontend, appserver, connections }
  result.derived = derive(result)
  const markdown = toMarkdown(result)
  const { jsonPath, mdPath } = writeResults(opts.out, 'memory', result, markdown)
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

module.exports = { main }
