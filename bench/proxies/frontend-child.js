#!/usr/bin/env node
'use strict'

// Chopper's front end as its own process, for bench/forwarding.js, so that
// neither wrk nor the bench shares its event loop. Forwards every key to one
// backend (a one-slice assignment) and prints its data port on stdout when it
// routes. Stops on SIGTERM/SIGINT, or when the bench closes our stdin.
//
// Usage: node bench/proxies/frontend-child.js --backend http://127.0.0.1:PORT
//          [--port 0] [--host 127.0.0.1] [--forwarder undici|axios] [--data-server fast|node] [--client chopper|undici] [--workers N]
//
// --workers N runs the front end's cluster mode (startFrontendCluster from
// frontend/). On a checkout without it this exits 2, and the bench reports the
// contender as not available.
const { parseFlags } = require('../../cli/args')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { waitServing } = require('./probe')

const EXIT_UNAVAILABLE = 2

const parsed = parseFlags(process.argv.slice(2), {
  options: {
    backend: { type: 'string' },
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
    forwarder: { type: 'string', default: 'undici' },
    'data-server': { type: 'string', default: 'fast' },
    client: { type: 'string', default: 'chopper' },
    workers: { type: 'string' }
  },
  integers: ['port', 'workers'],
  choices: { forwarder: ['undici', 'axios'], 'data-server': ['fast', 'node'], client: ['chopper', 'undici'] }
})
if (parsed.error || !/^http:\/\/[^/\s]+$/.test(parsed.values.backend || '')) {
  process.stderr.write(`error: ${parsed.error || '--backend must be http://host:port'}\n`)
  process.exit(EXIT_UNAVAILABLE)
}
const flags = parsed.values
if (flags.workers !== undefined && flags.workers < 1) {
  process.stderr.write('error: --workers must be >= 1\n')
  process.exit(EXIT_UNAVAILABLE)
}

/** One slice covering the whole keyspace, owned by the backend. */
const assignment = {
  // Above any generation a cluster mode might have started from.
  generation: Date.now(),
  slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['noop'] }],
  servers: { noop: { url: flags.backend } }
}
const options = { host: flags.host, port: flags.port, forwarder: flags.forwarder, dataServer: flags['data-server'], upstreamClient: flags.client }
if (flags.forwarder === 'axios') {
  // In-process only: the axios forwarder is a bench comparison, not a front end option.
  const { AxiosForwarder } = require('../lib/axios-forwarder')
  options.forwarder = new AxiosForwarder({ connections: 64, timeoutMs: 30000 })
}

async function startSingle () {
  const { createFrontend } = require('../../frontend')
  const fe = createFrontend(options)
  const { url } = await fe.start()
  fe.table.set(assignment)
  return { url, close: () => fe.close() }
}

async function startWorkers () {
  const { startFrontendCluster } = require('../../frontend')
  if (typeof startFrontendCluster !== 'function') {
    process.stderr.write('error: --workers needs startFrontendCluster in frontend/ (the cluster mode), which this checkout lacks\n')
    process.exit(EXIT_UNAVAILABLE)
  }
  // logLevel warn: the workers log to this process's stdout, which the bench reads.
  const fe = await startFrontendCluster({ ...options, workers: flags.workers, logLevel: 'warn' })
  fe.table.set(assignment) // the primary relays it to every worker
  // Every worker must route before the bench measures: probes on fresh connections
  // spread over the workers, so a streak of 200s that long means all of them do.
  await waitServing(`${fe.url}/x?key=bench`, { times: 8 * flags.workers, timeoutMs: 15000, what: 'every front-end worker' })
  return fe
}

async function main () {
  const fe = flags.workers === undefined ? await startSingle() : await startWorkers()
  let closing = null
  const stop = () => {
    closing = closing || fe.close().then(() => process.exit(0), (err) => {
      process.stderr.write(`error: close failed: ${err.message}\n`)
      process.exit(1)
    })
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  // The bench went away (crashed or was killed): do not outlive it.
  process.stdin.on('end', stop)
  process.stdin.on('error', stop)
  process.stdin.resume()
  process.stdout.write(`${new URL(fe.url).port}\n`)
}

main().catch((err) => {
  process.stderr.write(`error: ${err.code ? err.code + ': ' : ''}${err.message}\n`)
  process.exit(1)
})
