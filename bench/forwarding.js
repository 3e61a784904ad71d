#!/usr/bin/env node
'use strict'

// Front-end forwarding throughput against a no-op backend, undici Pool vs
// axios (keep-alive agent), side by side in one run, driven by wrk.
// Usage: node bench/forwarding.js [--duration 5] [--connections 32] [--rounds 2]

const { spawn, execFile, execFileSync } = require('node:child_process')
const { promisify } = require('node:util')
const path = require('node:path')
const { parseArgs } = require('node:util')
const { once } = require('node:events')
const { createFrontend } = require('../frontend')
const { KEYSPACE_SIZE } = require('../core/keyspace')

const { values } = parseArgs({ options: { duration: { type: 'string', default: '5' }, connections: { type: 'string', default: '32' }, rounds: { type: 'string', default: '2' } } })

// Asynchronous on purpose: the front end under test shares this process's event loop.
async function wrk (url) {
  const { stdout: out } = await promisify(execFile)('wrk', ['-t1', `-c${values.connections}`, `-d${values.duration}s`, '--latency', url])
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1])
  const p50 = /^\s+50%\s+(\S+)/m.exec(out)[1]
  const p99 = /^\s+99%\s+(\S+)/m.exec(out)[1]
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(out)
  return { rps, p50, p99, non2xx: errors ? Number(errors[1]) : 0 }
}

async function main () {
  try { execFileSync('wrk', ['--version'], { stdio: 'ignore' }) } catch (err) {
    if (err.code === 'ENOENT') { console.error('wrk is not installed (apt-get install -y wrk)'); process.exit(2) }
  }
  const backend = spawn(process.execPath, [path.join(__dirname, 'noop-backend.js')], { stdio: ['ignore', 'pipe', 'inherit'] })
  const [chunk] = await once(backend.stdout, 'data')
  const backendUrl = `http://127.0.0.1:${String(chunk).trim()}`
  const assignment = { generation: 1, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['noop'] }], servers: { noop: { url: backendUrl } } }

  const results = { direct: [], undici: [], axios: [] }
  console.log(`wrk -t1 -c${values.connections} -d${values.duration}s, ${values.rounds} rounds, alternating`)
  results.direct.push(await wrk(`${backendUrl}/x?key=k`))
  for (let r = 0; r < Number(values.rounds); r++) {
    for (const kind of ['undici', 'axios']) {
      const fe = createFrontend({ forwarder: kind })
      const { url } = await fe.start()
      fe.table.set(assignment)
      await wrk(`${url}/x?key=warmup`) // warm-up run is discarded
      const res = await wrk(`${url}/x?key=bench`)
      results[kind].push(res)
      console.log(`round ${r + 1} ${kind.padEnd(6)} ${res.rps.toFixed(0).padStart(7)} req/s  p50 ${res.p50}  p99 ${res.p99}  non-2xx ${res.non2xx}`)
      await fe.close()
    }
  }
  backend.kill('SIGTERM')
  const median = (xs) => { const s = xs.map((x) => x.rps).sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }
  const u = median(results.undici)
  const a = median(results.axios)
  console.log(`\nno-op backend direct: ${results.direct[0].rps.toFixed(0)} req/s`)
  console.log(`front end, undici:    ${u.toFixed(0)} req/s (median)`)
  console.log(`front end, axios:     ${a.toFixed(0)} req/s (median)`)
  console.log(`undici / axios = ${(u / a).toFixed(2)}x`)
}

main().catch((err) => { console.error(err); process.exit(1) })
