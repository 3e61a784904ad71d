#!/usr/bin/env node
'use strict'

// bench/noop-backend.js across N processes sharing one port (node:cluster).
// Prints the port once every worker listens. Workers exit with the primary.
// Usage: node bench/proxies/noop-backend-cluster.js --workers N
const cluster = require('node:cluster')
const path = require('node:path')
const { parseFlags } = require('../../cli/args')

const parsed = parseFlags(process.argv.slice(2), { options: { workers: { type: 'string' } }, integers: ['workers'] })
if (parsed.error || !(parsed.values.workers >= 1)) {
  process.stderr.write(`error: ${parsed.error || '--workers must be an integer >= 1'}\n`)
  process.exit(2)
}
const n = parsed.values.workers

// silent: each worker's stdout (its port line) comes to us, not to our parent.
cluster.setupPrimary({ exec: path.join(__dirname, '..', 'noop-backend.js'), silent: true })
const ports = []
for (let i = 0; i < n; i++) {
  const w = cluster.fork()
  w.process.stderr.pipe(process.stderr)
  w.process.stdout.once('data', (chunk) => {
    // Workers that listen on port 0 share one port, chosen by the primary.
    ports.push(String(chunk).trim())
    if (ports.length === n) process.stdout.write(`${ports[0]}\n`)
  })
}
let stopping = false
cluster.on('exit', (w, code, signal) => {
  if (stopping) return
  process.stderr.write(`error: backend worker ${w.id} exited (${code ?? signal})\n`)
  process.exit(1)
})
const stop = () => {
  if (stopping) return
  stopping = true
  const workers = Object.values(cluster.workers)
  let left = workers.length
  if (left === 0) process.exit(0)
  for (const w of workers) {
    w.process.once('exit', () => { if (--left === 0) process.exit(0) })
    w.process.kill('SIGTERM')
  }
  setTimeout(() => { for (const w of workers) w.process.kill('SIGKILL') }, 3000).unref()
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
