#!/usr/bin/env node
'use strict'

// The caller of bench/client.js: a closed loop of `--connections` concurrent
// requests for `--duration` seconds, through @chopper/client straight to the
// no-op backend (`--mode client`: the client holds a one-slice map naming
// it), or through an undici Pool to a proxy (`--mode pool`: our front end or
// HAProxy, which route). The same undici request API either way, so the
// caller's own cost differs only by the routing. Prints one JSON line:
// { requests, errors, non2xx, p50Ms, p99Ms, cpuMs, wallMs }.
//
// Usage: node bench/lib/client-load-child.js --mode client|pool --target URL [--duration 5] [--connections 32]

const { performance } = require('node:perf_hooks')
const hdr = require('hdr-histogram-js')
const { Pool } = require('undici')
const { parseFlags } = require('../../cli/args')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { createClient } = require('../../client/index.js')

const parsed = parseFlags(process.argv.slice(2), {
  options: {
    mode: { type: 'string' },
    target: { type: 'string' },
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '32' }
  },
  integers: ['connections'],
  choices: { mode: ['client', 'pool'] }
})
const flags = parsed.values || {}
const durationS = Number(flags.duration)
if (parsed.error || !/^http:\/\/[^/\s]+$/.test(flags.target || '') || !(durationS > 0) || !(flags.connections >= 1)) {
  process.stderr.write(`error: ${parsed.error || 'expected --mode client|pool --target http://host:port --duration S>0 --connections N>=1'}\n`)
  process.exit(2)
}

/** The dispatcher the loop calls: the client, routing in this process, or a pool to the proxy. */
function dispatcherFor (mode, target, connections) {
  if (mode === 'pool') return new Pool(target, { connections, keepAliveTimeout: 30000 })
  // No map source to read: the map is set here, as the front end's bench child sets its own.
  const client = createClient({ members: 'http://127.0.0.1:1', pollIntervalMs: 0, connections })
  client.table.set({ generation: 1, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['noop'] }], servers: { noop: { url: target } } })
  return client
}

async function main () {
  const dispatcher = dispatcherFor(flags.mode, flags.target, flags.connections)
  const histogram = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60e6, numberOfSignificantValueDigits: 3 })
  const out = { requests: 0, errors: 0, non2xx: 0 }
  let n = 0
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  const end = t0 + durationS * 1000
  await Promise.all(Array.from({ length: flags.connections }, async () => {
    while (performance.now() < end) {
      const started = performance.now()
      try {
        const res = await dispatcher.request({ origin: flags.target, path: `/x?key=k${n++ % 1000}`, method: 'GET' })
        await res.body.text()
        if (res.statusCode !== 200) out.non2xx++
        histogram.recordValue(Math.max(1, Math.round((performance.now() - started) * 1000)))
        out.requests++
      } catch {
        out.errors++
      }
    }
  }))
  const wallMs = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  await dispatcher.close()
  process.stdout.write(JSON.stringify({
    ...out,
    p50Ms: histogram.getValueAtPercentile(50) / 1000,
    p99Ms: histogram.getValueAtPercentile(99) / 1000,
    cpuMs: (cpu.user + cpu.system) / 1000,
    wallMs
  }) + '\n')
}

main().catch((err) => {
  process.stderr.write(`client-load-child failed: ${err.stack}\n`)
  process.exitCode = 1
})
