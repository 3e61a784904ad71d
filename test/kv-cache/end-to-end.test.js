'use strict'

const { startDynalite, spawnRedis } = require('../../apps/kv-cache/embedded')
const { sliceKey, KEYSPACE_SIZE } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { createHarness, assignment, push, metricValue, kvUrl, call } = require('./harness')

/**
 * kv-cache through the whole data path: a front end routing by key to app
 * servers (appserver-lib with its shard guard), each with its own real
 * redis-server, and dynalite as DynamoDB. Assignments are pushed by hand to
 * every control port, as the controller would.
 */

const HALF = KEYSPACE_SIZE / 2
const TABLE = 'kv-e2e'

/** `n` keys whose slice key is below (low) or above (high) half the keyspace. */
function keysIn (half, n, prefix) {
  const out = []
  for (let i = 0; out.length < n; i++) {
    const k = `${prefix}-${i}`
    if ((sliceKey(k) < HALF) === (half === 'low')) out.push(k)
  }
  return out
}

const putText = (url, value) => call(url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: value })
const metrics = async (server) => (await call(`${server.controlUrl}/metrics`)).body

describe('kv-cache end to end (front end, app servers, redis-server, dynalite)', () => {
  let dynamo
  let h
  beforeAll(async () => { dynamo = await startDynalite() })
  afterAll(async () => { await dynamo.close() })
  beforeEach(() => { h = createHarness() })
  afterEach(async () => { await h.closeAll() })

  /** Two app servers (each spawning its own redis-server) and a front end; kv-a owns the low half. */
  async function twoServers (options = {}) {
    const a = await h.appServer('kv-a', { dynamoEndpoint: dynamo.endpoint, table: TABLE, ...options })
    const b = await h.appServer('kv-b', { dynamoEndpoint: dynamo.endpoint, table: TABLE, ...options })
    const fe = await h.frontend()
    const urls = { 'kv-a': a.url, 'kv-b': b.url }
    const controls = [a.controlUrl, b.controlUrl, fe.controlUrl]
    await push(controls, assignment(1, urls, { 'kv-a': [[0, HALF]], 'kv-b': [[HALF, KEYSPACE_SIZE]] }))
    return { a, b, fe, urls, controls }
  }

  test('write then read through a front end: the owner answers from its Redis', async () => {
    const { a, b, fe } = await twoServers()
    expect(a.kv.cache.backend).toBe('redis')
    expect(b.kv.cache.url).not.toBe(a.kv.cache.url) // one redis-server per app server, as in the paper
    const keys = [...keysIn('low', 3, 'wr'), ...keysIn('high', 3, 'wr')]
    for (const k of keys) {
      const put = await call(kvUrl(fe.url, k), { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ k, n: k.length }) })
      expect(put.status).toBe(204)
    }
    for (const k of keys) {
      const r = await call(kvUrl(fe.url, k))
      expect(r.status).toBe(200)
      expect(r.body).toEqual({ k, n: k.length })
      expect(r.headers['content-type']).toBe('application/json')
      expect(r.headers['x-served-by']).toBe(sliceKey(k) < HALF ? 'kv-a' : 'kv-b')
      expect(r.headers['x-chopper-cache']).toBe('hit')
    }
    expect(metricValue(await metrics(a), 'chopper_kv_cache_hits_total')).toBe(3)
    expect(metricValue(await metrics(b), 'chopper_kv_cache_hits_total')).toBe(3)
  })

  test('a miss is filled from DynamoDB, and the next read is a hit', async () => {
    const { a, fe } = await twoServers()
    const [k] = keysIn('low', 1, 'fill')
    await h.dynamoClient(dynamo.endpoint).put(TABLE, k, 'written straight to DynamoDB')
    const first = await call(kvUrl(fe.url, k))
    expect(first.status).toBe(200)
    expect(first.body).toBe('written straight to DynamoDB')
    expect(first.headers['x-chopper-cache']).toBe('miss')
    const second = await call(kvUrl(fe.url, k))
    expect(second.body).toBe('written straight to DynamoDB')
    expect(second.headers['x-chopper-cache']).toBe('hit')
    const text = await metrics(a)
    expect(metricValue(text, 'chopper_kv_cache_misses_total')).toBe(1)
    expect(metricValue(text, 'chopper_kv_cache_hits_total')).toBe(1)
  })

  test('TTL: an entry expires cacheTtlMs after its last access, not after its write', async () => {
    const ttl = 600
    const { a, fe } = await twoServers({ cacheTtlMs: ttl })
    const [k] = keysIn('low', 1, 'ttl')
    expect((await putText(kvUrl(fe.url, k), 'v')).status).toBe(204)
    const redis = h.redisClient(a.kv.cache.url)
    const [redisKey] = await redis.keys(`chopper:kv:kv-a:*:${k}`)
    const pttl = await redis.pttl(redisKey)
    expect(pttl).toBeGreaterThan(0)
    expect(pttl).toBeLessThanOrEqual(ttl)

    // Reads every 100 ms for three TTLs keep it alive (bounded loop).
    const until = Date.now() + 3 * ttl
    let reads = 0
    let lastAccess
    while (Date.now() < until) {
      lastAccess = Date.now() // the GETEX that restarts the TTL happens after this
      const r = await call(kvUrl(fe.url, k))
      expect(r.headers['x-chopper-cache']).toBe('hit')
      reads++
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(reads).toBeGreaterThan(5)

    // Left alone, it expires (EXISTS does not touch the TTL), and not before ttl after the last read.
    await pollUntil(async () => (await redis.exists(redisKey)) === 0, { timeoutMs: 5000, intervalMs: 20, what: 'the entry to expire' })
    expect(Date.now() - lastAccess).toBeGreaterThanOrEqual(ttl)
    const after = await call(kvUrl(fe.url, k))
    expect(after.status).toBe(200)
    expect(after.body).toBe('v')
    expect(after.headers['x-chopper-cache']).toBe('miss')
  })

  test('DELETE removes the value from DynamoDB and from the owner\'s Redis', async () => {
    const { b, fe } = await twoServers()
    const [k] = keysIn('high', 1, 'del')
    await putText(kvUrl(fe.url, k), 'doomed')
    expect((await call(kvUrl(fe.url, k))).headers['x-chopper-cache']).toBe('hit')
    const del = await call(kvUrl(fe.url, k), { method: 'DELETE' })
    expect(del.status).toBe(204)
    expect(del.headers['x-served-by']).toBe('kv-b')
    const get = await call(kvUrl(fe.url, k))
    expect(get.status).toBe(404)
    expect(get.body.error.code).toBe('CHOPPER_ERR_NOT_FOUND')
    expect(await h.dynamoClient(dynamo.endpoint).get(TABLE, k)).toBeNull()
    expect(await h.redisClient(b.kv.cache.url).keys(`chopper:kv:kv-b:*:${k}`)).toEqual([])
    expect(metricValue(await metrics(b), 'chopper_kv_cache_invalidations_total', { reason: 'delete' })).toBe(1)
    expect((await call(kvUrl(fe.url, k), { method: 'DELETE' })).status).toBe(204) // idempotent
  })

  test('a slice moved away and back, after a write on the other server, never yields the old value', async () => {
    const { b, fe, urls, controls } = await twoServers()
    const started = Date.now()
    const keys = keysIn('low', 4, 'move')
    await push(controls, assignment(2, urls, { 'kv-a': 'all' }))
    for (const k of keys) await putText(kvUrl(fe.url, k), `old ${k}`)
    for (const k of keys) expect((await call(kvUrl(fe.url, k))).headers['x-chopper-cache']).toBe('hit') // cached on kv-a

    await push(controls, assignment(3, urls, { 'kv-b': 'all' }))
    for (const k of keys) {
      const r = await putText(kvUrl(fe.url, k), `new ${k}`)
      expect(r.status).toBe(204)
      expect(r.headers['x-served-by']).toBe('kv-b')
    }

    await push(controls, assignment(4, urls, { 'kv-a': 'all' }))
    for (const k of keys) {
      const r = await call(kvUrl(fe.url, k))
      expect(r.headers['x-served-by']).toBe('kv-a')
      expect(r.body).toBe(`new ${k}`)
      expect(r.headers['x-chopper-cache']).toBe('miss')
      expect((await call(kvUrl(fe.url, k))).body).toBe(`new ${k}`)
    }
    // All of it happened well within the 10 s TTL the paper relied on.
    expect(Date.now() - started).toBeLessThan(10000)
    expect(metricValue(await metrics(b), 'chopper_kv_cache_hits_total')).toBe(0)
  })

  test('Redis killed mid-test: reads and writes stay correct, and the metrics show degraded mode', async () => {
    const redis = await spawnRedis()
    h.track(() => redis.close())
    const a = await h.appServer('kv-a', { dynamoEndpoint: dynamo.endpoint, table: TABLE, redisUrl: redis.url })
    const fe = await h.frontend()
    const controls = [a.controlUrl, fe.controlUrl]
    await push(controls, assignment(1, { 'kv-a': a.url }, { 'kv-a': 'all' }))
    expect(metricValue(await metrics(a), 'chopper_kv_cache_degraded')).toBe(0)
    await putText(kvUrl(fe.url, 'rk-1'), 'v1')
    expect((await call(kvUrl(fe.url, 'rk-1'))).headers['x-chopper-cache']).toBe('hit')

    redis.child.kill('SIGKILL')
    await pollUntil(async () => metricValue(await metrics(a), 'chopper_kv_cache_degraded') === 1, { timeoutMs: 5000, what: 'degraded mode' })

    expect((await putText(kvUrl(fe.url, 'rk-1'), 'v2')).status).toBe(204)
    const r1 = await call(kvUrl(fe.url, 'rk-1'))
    expect([r1.status, r1.body, r1.headers['x-chopper-cache']]).toEqual([200, 'v2', 'miss'])
    expect((await putText(kvUrl(fe.url, 'rk-2'), 'w')).status).toBe(204)
    expect((await call(kvUrl(fe.url, 'rk-2'))).body).toBe('w')
    expect((await call(kvUrl(fe.url, 'rk-1'), { method: 'DELETE' })).status).toBe(204)
    expect((await call(kvUrl(fe.url, 'rk-1'))).status).toBe(404)
    const down = await metrics(a)
    expect(metricValue(down, 'chopper_kv_cache_degraded')).toBe(1)
    expect(metricValue(down, 'chopper_kv_store_errors_total', { store: 'redis' })).toBeGreaterThan(0)

    // Redis comes back on the same port: the client reconnects and the cache is used again.
    const again = await spawnRedis({ port: redis.port })
    h.track(() => again.close())
    await pollUntil(async () => metricValue(await metrics(a), 'chopper_kv_cache_degraded') === 0, { timeoutMs: 10000, what: 'Redis to be used again' })
    expect((await call(kvUrl(fe.url, 'rk-1'))).status).toBe(404)
    expect((await call(kvUrl(fe.url, 'rk-2'))).headers['x-chopper-cache']).toBe('miss')
    const hit = await call(kvUrl(fe.url, 'rk-2'))
    expect([hit.body, hit.headers['x-chopper-cache']]).toEqual(['w', 'hit'])
  })

  test('DynamoDB stopped: writes get 503 and nothing acknowledged is lost after it returns', async () => {
    const own = await startDynalite() // stopped mid-test, so not the shared one
    h.track(() => own.close())
    const a = await h.appServer('kv-a', { dynamoEndpoint: own.endpoint, table: TABLE })
    const fe = await h.frontend()
    await push([a.controlUrl, fe.controlUrl], assignment(1, { 'kv-a': a.url }, { 'kv-a': 'all' }))
    const acked = {}
    for (let i = 0; i < 10; i++) {
      const r = await putText(kvUrl(fe.url, `dk-${i}`), `v1-${i}`)
      if (r.status === 204) acked[`dk-${i}`] = `v1-${i}`
    }
    expect(Object.keys(acked)).toHaveLength(10)
    await putText(kvUrl(fe.url, 'untouched'), 'cached')

    await own.stop()
    const refused = await call(kvUrl(fe.url, 'dk-0'), { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'never acknowledged' })
    expect(refused.status).toBe(503)
    expect(refused.body.error.code).toBe('CHOPPER_ERR_STORE_UNAVAILABLE')
    expect(refused.body.error.message).toMatch(/DynamoDB unavailable/)
    expect((await call(kvUrl(fe.url, 'dk-1'), { method: 'DELETE' })).status).toBe(503)
    // Writes in flight together during the outage: every one refused, none acknowledged.
    const burst = await Promise.all(Array.from({ length: 10 }, (_, i) => putText(kvUrl(fe.url, `dk-${i}`), `outage-${i}`)))
    for (const r of burst) {
      expect(r.status).toBe(503)
      expect(r.body.error.code).toBe('CHOPPER_ERR_STORE_UNAVAILABLE')
    }
    // The look-aside cache still answers for a key no failed write touched...
    const cached = await call(kvUrl(fe.url, 'untouched'))
    expect([cached.status, cached.body, cached.headers['x-chopper-cache']]).toEqual([200, 'cached', 'hit'])
    // ...but not for one a failed write may have changed: DynamoDB alone knows.
    expect(await call(kvUrl(fe.url, 'dk-0'))).toMatchObject({ status: 503 })
    expect(metricValue(await metrics(a), 'chopper_kv_store_errors_total', { store: 'dynamodb' })).toBeGreaterThanOrEqual(12)

    await own.start()
    await pollUntil(async () => (await putText(kvUrl(fe.url, 'probe'), 'p')).status === 204, { timeoutMs: 10000, what: 'DynamoDB to answer again' })
    const direct = h.dynamoClient(own.endpoint)
    for (const [k, v] of Object.entries(acked)) {
      expect(await direct.get(TABLE, k)).toBe(v)
      expect((await call(kvUrl(fe.url, k))).body).toBe(v)
    }
  })
})
