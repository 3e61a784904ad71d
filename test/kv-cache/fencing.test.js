'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnRedis } = require('../../apps/kv-cache/embedded')
const { generationOf } = require('../../apps/kv-cache/version')
const { sliceKey } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { describeEachDynamo } = require('../helpers/dynamo-backends')
const { createHarness, registryValue, kvUrl, call } = require('./harness')

/**
 * The cache side of fenced writes, against real redis-server and each
 * DynamoDB backend (dynalite, DynamoDB Local):
 * cache entries carry versions, a deposed owner's write never shows through
 * the cache, and a Redis that comes back (possibly from an older snapshot) is
 * distrusted.
 */

const TABLE = 'kv-fence'

describeEachDynamo('kv-cache versions, fencing and Redis restarts', (endpoint) => {
  let redis
  let h
  beforeAll(async () => { redis = await spawnRedis() })
  afterAll(async () => { await redis.close() })
  beforeEach(() => { h = createHarness() })
  afterEach(async () => { await h.closeAll() })

  const kvOn = (options = {}, extra) => h.standalone({ dynamoEndpoint: endpoint(), table: TABLE, redisUrl: redis.url, ...options }, extra)
  const read = async (service, key) => {
    const item = await service.get(key, sliceKey(key))
    return item && { value: item.value.toString(), ver: item.ver, cached: item.cached }
  }
  /** The raw Redis entry of `key`: its version, as written in the header, and its bytes. */
  async function redisEntry (url, prefix, key) {
    const r = h.redisClient(url)
    const [k] = await r.keys(`${prefix}*:${key}`)
    if (!k) return null
    const buf = await r.getBuffer(k)
    return { ver: BigInt(buf.toString('latin1', 0, 40)), text: buf.toString('latin1') }
  }

  test('across fenced writes and deletes the cache holds versions and never serves a value older than the last acknowledged write', async () => {
    for (const cacheOptions of [{}, { redisUrl: undefined, spawnRedis: false }]) {
      const { kv, registry } = await kvOn(cacheOptions)
      const s = kv.service
      const key = `seq-${kv.cache.backend}`
      const slice = sliceKey(key)

      const v5 = await s.put(key, slice, Buffer.from('gen 5'), 'text/plain', { generation: 5 })
      expect(generationOf(v5)).toBe(5)
      expect(await read(s, key)).toEqual({ value: 'gen 5', ver: v5, cached: true })
      if (kv.cache.backend === 'redis') expect((await redisEntry(redis.url, s.cache.prefix, key)).ver).toBe(v5)

      // A deposed owner's write: refused, not acknowledged, and never visible.
      await expect(s.put(key, slice, Buffer.from('gen 3'), 'text/plain', { generation: 3 })).rejects.toMatchObject({ code: 'CHOPPER_ERR_FENCED_WRITE', status: 421 })
      for (let i = 0; i < 2; i++) expect(await read(s, key)).toMatchObject({ value: 'gen 5', ver: v5 })

      const vDel = await s.delete(key, slice, { generation: 6 })
      expect(vDel).toBeGreaterThan(v5)
      expect(await read(s, key)).toBeNull()
      // A late put of a lower generation does not resurrect the key, in DynamoDB or in the cache.
      await expect(s.put(key, slice, Buffer.from('gen 4'), 'text/plain', { generation: 4 })).rejects.toMatchObject({ code: 'CHOPPER_ERR_FENCED_WRITE' })
      for (let i = 0; i < 2; i++) expect(await read(s, key)).toBeNull()
      expect(await h.dynamoClient(endpoint()).get(TABLE, key)).toBeNull()

      const v7 = await s.put(key, slice, Buffer.from('gen 7'), 'text/plain', { generation: 7 })
      expect(await read(s, key)).toEqual({ value: 'gen 7', ver: v7, cached: true })
      expect(await registryValue(registry, 'chopper_kv_fenced_writes_total', { op: 'put' })).toBe(2)
    }
  })

  test('a server whose write was fenced off stops serving its cached value for that key', async () => {
    const a = await kvOn({ serverId: 'a' })
    const b = await kvOn({ serverId: 'b' })
    const key = 'deposed'
    await a.kv.service.put(key, sliceKey(key), Buffer.from('a at gen 5'), 'text/plain', { generation: 5 })
    expect(await read(a.kv.service, key)).toMatchObject({ value: 'a at gen 5', cached: true })
    // The slice moved to b, but a has not heard yet (no hooks called) and still admits under 5.
    await b.kv.service.put(key, sliceKey(key), Buffer.from('b at gen 6'), 'text/plain', { generation: 6 })
    await expect(a.kv.service.put(key, sliceKey(key), Buffer.from('a again'), 'text/plain', { generation: 5 })).rejects.toMatchObject({ code: 'CHOPPER_ERR_FENCED_WRITE' })
    // The refusal told a its entry is older than the truth: dropped.
    expect(await read(a.kv.service, key)).toMatchObject({ value: 'b at gen 6', cached: false })
    expect(await registryValue(a.registry, 'chopper_kv_cache_invalidations_total', { reason: 'fenced' })).toBe(1)
  })

  test('a restarted server (new service and store) at the same generation can still write, and reads its newer value', async () => {
    const first = await kvOn({ serverId: 'r' })
    const key = 'restart'
    const v1 = await first.kv.service.put(key, sliceKey(key), Buffer.from('first run'), 'text/plain', { generation: 2 })
    await first.kv.close()
    const second = await kvOn({ serverId: 'r' })
    const v2 = await second.kv.service.put(key, sliceKey(key), Buffer.from('second run'), 'text/plain', { generation: 2 })
    expect(v2).toBeGreaterThan(v1)
    expect(await read(second.kv.service, key)).toEqual({ value: 'second run', ver: v2, cached: true })
  })

  test('a cache set never replaces a newer version, even without the key queue', async () => {
    for (const cacheOptions of [{}, { redisUrl: undefined, spawnRedis: false }]) {
      const { kv } = await kvOn(cacheOptions)
      const s = kv.service
      const key = `older-${kv.cache.backend}`
      const slice = sliceKey(key)
      await s.put(key, slice, Buffer.from('v1'), 'text/plain', { generation: 1 })
      const v1 = (await read(s, key)).ver
      const v2 = await s.put(key, slice, Buffer.from('v2'), 'text/plain', { generation: 1 })
      // A fill that read v1 and reached the cache late, bypassing the key queue.
      const stale = { tag: s.epochs.now(), ver: v1, contentType: 'text/plain', value: Buffer.from('v1') }
      expect(await s.cache.set(key, slice, stale)).toBe(false)
      expect(await read(s, key)).toEqual({ value: 'v2', ver: v2, cached: true })
      // An equal or newer version is written.
      expect(await s.cache.set(key, slice, { ...stale, ver: v2, value: Buffer.from('v2 again') })).toBe(true)
      expect(await s.cache.set(key, slice, { ...stale, ver: v2 + 1n, value: Buffer.from('v3') })).toBe(true)
      expect((await read(s, key)).value).toBe('v3')
    }
  })

  test('over HTTP a fenced write answers 421 CHOPPER_ERR_FENCED_WRITE and leaves the newer value', async () => {
    // Stands in for the shard guard, which sets req.chopperGeneration.
    const guard = (req, res, next) => {
      if (req.headers['x-test-generation'] !== undefined) req.chopperGeneration = Number(req.headers['x-test-generation'])
      next()
    }
    const { url } = await kvOn({}, { middleware: guard })
    const put = (gen, body) => call(kvUrl(url, 'http'), { method: 'PUT', headers: { 'content-type': 'text/plain', ...(gen === undefined ? {} : { 'x-test-generation': String(gen) }) }, body })
    expect((await put(undefined, 'standalone')).status).toBe(204) // no guard: generation 0
    expect((await put(5, 'new owner')).status).toBe(204)
    for (const [gen, method] of [[4, 'PUT'], [undefined, 'PUT'], [3, 'DELETE']]) {
      const res = method === 'PUT'
        ? await put(gen, 'deposed')
        : await call(kvUrl(url, 'http'), { method, headers: { 'x-test-generation': String(gen) } })
      expect(res.status).toBe(421)
      expect(res.body.error).toEqual({
        code: 'CHOPPER_ERR_FENCED_WRITE',
        message: expect.stringMatching(/^a newer owner has written key "http"; this server's ownership is stale/)
      })
    }
    const r = await call(kvUrl(url, 'http'))
    expect([r.status, r.body]).toEqual([200, 'new owner'])
    expect((await call(kvUrl(url, 'http'), { method: 'DELETE', headers: { 'x-test-generation': '6' } })).status).toBe(204)
    expect((await call(kvUrl(url, 'http'))).status).toBe(404)
  })

  test('Redis restarted from an older snapshot: nothing cached before the restart is served', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-kv-snap-'))
    h.track(() => fs.rmSync(dir, { recursive: true, force: true }))
    const args = ['--dir', dir, '--dbfilename', 'snap.rdb']
    const own = await spawnRedis({ args })
    h.track(() => own.close())
    const { url, kv, registry } = await kvOn({ redisUrl: own.url })
    const prefix = kv.service.cache.prefix
    const admin = h.redisClient(own.url)

    expect((await call(kvUrl(url, 'snap'), { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'v1' })).status).toBe(204)
    expect((await call(kvUrl(url, 'planted'), { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'real' })).status).toBe(204)
    // An entry changed behind our back, with a valid header: served while Redis stays up.
    const [plantedKey] = await admin.keys(`${prefix}*:planted`)
    const head = (await redisEntry(own.url, prefix, 'planted')).text.split('\n')[0]
    await admin.set(plantedKey, `${head}\nplanted`)
    const before = await call(kvUrl(url, 'planted'))
    expect([before.body, before.headers['x-chopper-cache']]).toEqual(['planted', 'hit'])

    await admin.save() // the snapshot holds snap = v1 and the planted entry
    expect((await call(kvUrl(url, 'snap'), { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'v2' })).status).toBe(204)
    expect((await call(kvUrl(url, 'snap'))).headers['x-chopper-cache']).toBe('hit')

    own.child.kill('SIGKILL')
    await pollUntil(async () => (await registryValue(registry, 'chopper_kv_cache_degraded')) === 1, { timeoutMs: 5000, what: 'degraded mode' })
    const again = await spawnRedis({ port: own.port, args })
    h.track(() => again.close())
    await pollUntil(async () => (await registryValue(registry, 'chopper_kv_cache_degraded')) === 0, { timeoutMs: 10000, what: 'Redis to be used again' })
    // Redis really came back with the old entries...
    expect((await redisEntry(own.url, prefix, 'snap')).text).toMatch(/\nv1$/)
    expect((await redisEntry(own.url, prefix, 'planted')).text).toMatch(/\nplanted$/)
    // ...and neither is served.
    const snap = await call(kvUrl(url, 'snap'))
    expect([snap.body, snap.headers['x-chopper-cache']]).toEqual(['v2', 'miss'])
    const planted = await call(kvUrl(url, 'planted'))
    expect([planted.body, planted.headers['x-chopper-cache']]).toEqual(['real', 'miss'])
    expect(await registryValue(registry, 'chopper_kv_cache_invalidations_total', { reason: 'reconnect' })).toBe(1)
    // The refills are trusted: the cache is in use again.
    const hit = await call(kvUrl(url, 'snap'))
    expect([hit.body, hit.headers['x-chopper-cache']]).toEqual(['v2', 'hit'])
  })
})
