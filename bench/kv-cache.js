#!/usr/bin/env node
'use strict'

/**
 * Prints what the look-aside cache buys and what key churn costs: latency of
 * PUTs, cache hits and cache misses (a strongly consistent DynamoDB read plus
 * a fill) through a front end of a local cluster, for the Redis cache and the
 * in-process fallback. DynamoDB is an in-process dynalite, so a miss here is
 * far cheaper than against real DynamoDB: read the hit/miss gap as a floor.
 *
 *   node bench/kv-cache.js [--keys N] [--concurrency C] [--value-bytes B]
 *
 * Talks only to 127.0.0.1; bounded by --keys (requests per phase).
 */

const { parseArgs } = require('node:util')
const { Agent, request } = require('undici')
const { DynamoDBClient, BatchWriteItemCommand } = require('@aws-sdk/client-dynamodb')
const { startLocalCluster } = require('../cluster/local-cluster')
const { startDynalite } = require('../apps/kv-cache/embedded')

const { values } = parseArgs({
  options: {
    keys: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '8' },
    'value-bytes': { type: 'string', default: '100' }
  }
})
const KEYS = Number(values.keys)
const CONCURRENCY = Number(values.concurrency)
const VALUE_BYTES = Number(values['value-bytes'])
for (const [name, v] of [['keys', KEYS], ['concurrency', CONCURRENCY], ['value-bytes', VALUE_BYTES]]) {
  if (!Number.isInteger(v) || v < 1 || v > 1e6) {
    process.stderr.write(`--${name} must be an integer from 1 to 1000000\n`)
    process.exit(2)
  }
}

const dispatcher = new Agent({ connections: CONCURRENCY })

async function timed (tasks) {
  const lat = []
  let next = 0
  const t0 = process.hrtime.bigint()
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < tasks.length) {
      const task = tasks[next++]
      const s = process.hrtime.bigint()
      const status = await task()
      lat.push(Number(process.hrtime.bigint() - s) / 1e6)
      if (status >= 300) throw new Error(`unexpected status ${status}`)
    }
  }))
  const secs = Number(process.hrtime.bigint() - t0) / 1e9
  lat.sort((a, b) => a - b)
  const q = (p) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]
  return { n: lat.length, rps: lat.length / secs, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: lat[lat.length - 1] }
}

async function send (url, opts = {}) {
  const res = await request(url, { dispatcher, ...opts })
  await res.body.dump()
  return res.statusCode
}

async function seedDynamo (endpoint, keys, value) {
  const c = new DynamoDBClient({ endpoint, region: 'us-west-2', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } })
  for (let i = 0; i < keys.length; i += 25) {
    const RequestItems = { 'chopper-kv': keys.slice(i, i + 25).map((k) => ({ PutRequest: { Item: { k: { S: k }, v: { B: value }, ct: { S: 'text/plain' } } } })) }
    await c.send(new BatchWriteItemCommand({ RequestItems }))
  }
  c.destroy()
}

async function run (label, appOptions, dynamo) {
  const cluster = await startLocalCluster({ app: 'kv-cache', frontends: 1, servers: 2, port: 0, periodMs: 3600000, appOptions: { dynamoEndpoint: dynamo.endpoint, ...appOptions } })
  try {
    const fe = cluster.frontends[0].url
    const value = Buffer.alloc(VALUE_BYTES, 120)
    const tag = `${label}-${Date.now()}`
    const keys = Array.from({ length: KEYS }, (_, i) => `${tag}-${i}`)
    const url = (k) => `${fe}/kv?key=${encodeURIComponent(k)}`
    const rows = {}
    rows.put = await timed(keys.map((k) => () => send(url(k), { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: value })))
    rows['get hit'] = await timed(keys.map((k) => () => send(url(k))))
    const cold = keys.map((k) => `${k}-cold`)
    await seedDynamo(dynamo.endpoint, cold, value) // in DynamoDB, never cached
    rows['get miss'] = await timed(cold.map((k) => () => send(url(k))))
    return rows
  } finally {
    await cluster.close()
  }
}

async function main () {
  const dynamo = await startDynalite()
  try {
    const results = {
      redis: await run('redis', {}, dynamo),
      memory: await run('memory', { spawnRedis: false }, dynamo)
    }
    console.log(`kv-cache through 1 front end, 2 app servers, dynalite; ${KEYS} requests per row, concurrency ${CONCURRENCY}, ${VALUE_BYTES}-byte values`)
    console.log('cache   op        n      req/s   p50 ms  p90 ms  p99 ms  max ms')
    for (const [backend, rows] of Object.entries(results)) {
      for (const [op, r] of Object.entries(rows)) {
        console.log(`${backend.padEnd(7)} ${op.padEnd(9)} ${String(r.n).padStart(5)} ${r.rps.toFixed(0).padStart(8)} ${r.p50.toFixed(2).padStart(8)} ${r.p90.toFixed(2).padStart(7)} ${r.p99.toFixed(2).padStart(7)} ${r.max.toFixed(2).padStart(7)}`)
      }
    }
  } finally {
    await dynamo.close()
    await dispatcher.close()
  }
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`)
  process.exitCode = 1
})
