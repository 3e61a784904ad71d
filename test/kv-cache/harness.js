'use strict'

const http = require('node:http')
const express = require('express')
const Redis = require('ioredis')
const { Registry } = require('prom-client')
const { DynamoDBClient, GetItemCommand, PutItemCommand } = require('@aws-sdk/client-dynamodb')
const kvCache = require('../../apps/kv-cache')
const { startDynalite, spawnRedis } = require('../../apps/kv-cache/embedded')
const { createAppServer } = require('../../appserver-lib/index.js')
const { createFrontend } = require('../../frontend')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { listen, close } = require('../../core/http')
const { call } = require('../helpers/http')

/**
 * Test harness for kv-cache: real dynalite and redis-server (from
 * apps/kv-cache/embedded.js), real app servers and front ends on port 0.
 * Everything started through `track` is closed by `closeAll`, newest first.
 */
function createHarness () {
  const closers = []
  const track = (fn) => closers.push(fn)
  async function closeAll () {
    while (closers.length) await closers.pop()()
  }

  /**
   * The app alone behind a bare Express server (hooks are called by the test).
   * `middleware` runs first, e.g. to set req.chopperGeneration as the shard guard would.
   */
  async function standalone (options, { middleware } = {}) {
    const registry = new Registry()
    const kv = await kvCache.create({ registry, ...options })
    track(() => kv.close())
    const app = express()
    if (middleware) app.use(middleware)
    app.use(kv.app)
    const server = http.createServer(app)
    const port = await listen(server, 0, '127.0.0.1')
    track(() => close(server))
    return { kv, registry, url: `http://127.0.0.1:${port}` }
  }

  /** kv-cache hosted by appserver-lib: the shard guard runs first, hooks fire on pushes. */
  async function appServer (id, options) {
    const registry = new Registry()
    const kv = await kvCache.create({ serverId: id, registry, ...options })
    track(() => kv.close())
    const server = createAppServer({ id, app: kv.app, onAcquire: kv.onAcquire, onRelease: kv.onRelease, onAssignment: kv.onAssignment, admitJoining: kv.admitJoining, registry })
    const urls = await server.start()
    track(() => server.close())
    return { id, kv, registry, server, ...urls }
  }

  async function frontend () {
    const fe = createFrontend({ pullIntervalMs: 0 })
    const urls = await fe.start()
    track(() => fe.close())
    return { fe, ...urls }
  }

  function redisClient (url) {
    const r = new Redis(url, { maxRetriesPerRequest: 1, protocol: 2, disconnectTimeout: 100 })
    r.on('error', () => {})
    track(() => r.status === 'ready' ? r.quit().catch(() => r.disconnect()) : r.disconnect())
    return r
  }

  function dynamoClient (endpoint) {
    const c = new DynamoDBClient({ endpoint, region: 'us-west-2', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } })
    track(() => c.destroy())
    async function item (table, key) {
      const out = await c.send(new GetItemCommand({ TableName: table, Key: { k: { S: key } }, ConsistentRead: true }))
      return out.Item || null
    }
    return {
      /** The live value as a string; null when absent or a tombstone. */
      async get (table, key) {
        const it = await item(table, key)
        return it && !(it.del && it.del.BOOL) ? Buffer.from(it.v.B).toString() : null
      },
      /** The raw item, with `ver` as a BigInt (absent: null) and `del` as a boolean. */
      async item (table, key) {
        const it = await item(table, key)
        return it && { ...it, ver: it.ver ? BigInt(it.ver.N) : null, del: Boolean(it.del && it.del.BOOL) }
      },
      /** A put without a version, as items written before versions existed. */
      async put (table, key, value, contentType = 'text/plain') {
        await c.send(new PutItemCommand({ TableName: table, Item: { k: { S: key }, v: { B: Buffer.from(value) }, ct: { S: contentType } } }))
      }
    }
  }

  return { track, closeAll, standalone, appServer, frontend, redisClient, dynamoClient }
}

/**
 * A hand-made assignment: `owners` maps each server id to its list of
 * `[start, end)` ranges (or the string 'all'); `servers` maps ids to data URLs.
 */
function assignment (generation, servers, owners) {
  const slices = []
  for (const [id, ranges] of Object.entries(owners)) {
    for (const r of ranges === 'all' ? [[0, KEYSPACE_SIZE]] : ranges) slices.push({ start: r[0], end: r[1], servers: [id] })
  }
  slices.sort((a, b) => a.start - b.start)
  return { generation, slices, servers: Object.fromEntries(Object.entries(servers).map(([id, url]) => [id, { url }])) }
}

/** Push one assignment to every control URL (app servers and front ends), as the controller does. */
async function push (controlUrls, a) {
  for (const u of controlUrls) {
    const r = await call(`${u}/v1/assignment`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(a) })
    if (r.status !== 200) throw new Error(`push to ${u} failed: ${r.status} ${JSON.stringify(r.body)}`)
  }
}

/** Sum of the samples of `name` whose labels include `labels`, in Prometheus text (0 when absent). */
function metricValue (text, name, labels = {}) {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`)
  let sum = 0
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)$/.exec(line)
    if (!m || m[1] !== name) continue
    const have = m[3] ? m[3].split(',') : []
    if (want.every((w) => have.includes(w))) sum += Number(m[4])
  }
  return sum
}

async function registryValue (registry, name, labels) {
  return metricValue(await registry.metrics(), name, labels)
}

const kvUrl = (base, key) => `${base}/kv?key=${encodeURIComponent(key)}`

/**
 * The usual kv-cache suite setup: one dynalite and one redis-server for the
 * file, a fresh harness per test (closed after it). Call at describe level;
 * the fields are set once the hooks ran.
 * @returns {{ dynamo, redis, h }}
 */
function useKvStack () {
  const env = { dynamo: null, redis: null, h: null }
  beforeAll(async () => {
    env.dynamo = await startDynalite()
    env.redis = await spawnRedis()
  })
  afterAll(async () => {
    await env.redis.close()
    await env.dynamo.close()
  })
  beforeEach(() => { env.h = createHarness() })
  afterEach(async () => { await env.h.closeAll() })
  return env
}

module.exports = { createHarness, useKvStack, assignment, push, metricValue, registryValue, kvUrl, call }
