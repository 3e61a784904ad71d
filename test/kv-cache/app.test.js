'use strict'

const net = require('node:net')
const { Writable } = require('node:stream')
const pino = require('pino')
const { DynamoStore } = require('../../apps/kv-cache/dynamo-store')
const { sliceKey, KEYSPACE_SIZE } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { startDynalite, spawnRedis } = require('../../apps/kv-cache/embedded')
const { useKvStack, registryValue, kvUrl, call } = require('./harness')

/**
 * The app on its own behind a bare Express server, with the ownership hooks
 * called directly (as appserver-lib would), against a real redis-server and
 * dynalite: input validation, the move races, cache failures and fallbacks.
 */

const TABLE = 'kv-app'
const ALL = [{ start: 0, end: KEYSPACE_SIZE }]
const putText = (url, value, type = 'text/plain') => call(url, { method: 'PUT', headers: { 'content-type': type }, body: value })

describe('kv-cache app', () => {
  const env = useKvStack()

  const kvOn = (options = {}) => env.h.standalone({ dynamoEndpoint: env.dynamo.endpoint, table: TABLE, redisUrl: env.redis.url, ...options })

  test('values round-trip byte for byte with their content type', async () => {
    const { url } = await kvOn()
    const bytes = Buffer.from([0, 1, 2, 254, 255, 10, 13])
    expect((await call(kvUrl(url, 'bin'), { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: bytes })).status).toBe(204)
    const res = await fetch(kvUrl(url, 'bin'))
    expect(res.headers.get('content-type')).toBe('application/octet-stream')
    expect(Buffer.from(await res.arrayBuffer())).toEqual(bytes)

    await putText(kvUrl(url, 'txt'), 'héllo wörld', 'text/plain; charset=utf-8')
    const txt = await call(kvUrl(url, 'txt'))
    expect([txt.body, txt.headers['content-type']]).toEqual(['héllo wörld', 'text/plain; charset=utf-8'])

    // The key may also come in the X-Chopper-Key header, as the shard guard allows.
    await call(`${url}/kv`, { method: 'PUT', headers: { 'x-chopper-key': 'via header', 'content-type': 'text/plain' }, body: 'h' })
    expect((await call(kvUrl(url, 'via header'))).body).toBe('h')
  })

  test('bad input gets a JSON 4xx with a clear message, and stores nothing', async () => {
    const { url } = await kvOn({ maxValueBytes: 1000 })
    const cases = [
      [await call(`${url}/kv`), 400, 'CHOPPER_ERR_MISSING_KEY', /missing key/],
      [await call(`${url}/kv?key=`, { method: 'PUT', body: 'x' }), 400, 'CHOPPER_ERR_MISSING_KEY', /missing key/],
      [await putText(kvUrl(url, 'big'), 'x'.repeat(1001)), 413, 'CHOPPER_ERR_PAYLOAD_TOO_LARGE', /1001 bytes\): the limit \(maxValueBytes\) is 1000 bytes/],
      // Chunked, so no Content-Length to refuse up front: the body reader stops at the limit.
      [await call(kvUrl(url, 'big'), { method: 'PUT', body: (async function * () { for (let i = 0; i < 3; i++) yield Buffer.alloc(500, 97) })() }), 413, 'CHOPPER_ERR_PAYLOAD_TOO_LARGE', /limit \(maxValueBytes\) is 1000 bytes/],
      [await call(kvUrl(url, 'k'), { method: 'POST', body: 'x' }), 405, 'CHOPPER_ERR_METHOD_NOT_ALLOWED', /POST not allowed on \/kv; use GET, PUT or DELETE/],
      [await call(kvUrl(url, 'k'), { method: 'PATCH', body: 'x' }), 405, 'CHOPPER_ERR_METHOD_NOT_ALLOWED', /PATCH/],
      [await putText(kvUrl(url, 'json'), '{"a": 1', 'application/json'), 400, 'CHOPPER_ERR_MALFORMED_BODY', /malformed JSON value/],
      [await putText(kvUrl(url, 'json'), '[1,]', 'application/vnd.thing+json'), 400, 'CHOPPER_ERR_MALFORMED_BODY', /malformed JSON value/],
      [await call(kvUrl(url, 'enc'), { method: 'PUT', headers: { 'content-type': 'text/plain', 'content-encoding': 'gzip' }, body: 'not gzip' }), 400, 'CHOPPER_ERR_MALFORMED_BODY', /malformed body/],
      [await call(kvUrl(url, 'k'.repeat(2049))), 400, 'CHOPPER_ERR_INVALID_ARG', /key too long: 2049 bytes/],
      [await call(kvUrl(url, 'absent')), 404, 'CHOPPER_ERR_NOT_FOUND', /no value for key "absent"/]
    ]
    for (const [res, status, code, message] of cases) {
      expect(res.status).toBe(status)
      expect(res.headers['content-type']).toMatch(/^application\/json/)
      expect(res.body.error.code).toBe(code)
      expect(res.body.error.message).toMatch(message)
    }
    expect((await call(kvUrl(url, 'k'), { method: 'POST' })).headers.allow).toBe('GET, HEAD, PUT, DELETE')
    for (const k of ['big', 'json', 'enc']) expect((await call(kvUrl(url, k))).status).toBe(404)
    // A valid JSON value is accepted.
    expect((await putText(kvUrl(url, 'json'), '{"a": [1, 2]}', 'application/json')).status).toBe(204)
    expect((await call(kvUrl(url, 'json'))).body).toEqual({ a: [1, 2] })
  })

  test('a value within maxValueBytes but over DynamoDB\'s 400 KB item limit gets 413, not 500', async () => {
    const { url } = await kvOn() // default maxValueBytes: 400 KB, which leaves no room for the key
    const res = await putText(kvUrl(url, 'at-the-limit'), 'x'.repeat(400 * 1024))
    expect(res.status).toBe(413)
    expect(res.body.error.message).toMatch(/DynamoDB's 400 KB item limit/)
    expect((await putText(kvUrl(url, 'under'), 'x'.repeat(400 * 1024 - 100))).status).toBe(204)
  })

  test('moved away and back by the hooks: a value cached before the loss is never served', async () => {
    const a = await kvOn({ serverId: 'a' })
    const b = await kvOn({ serverId: 'b' })
    a.kv.onAcquire(ALL)
    await putText(kvUrl(a.url, 'm'), 'old')
    expect((await call(kvUrl(a.url, 'm'))).headers['x-chopper-cache']).toBe('hit')
    a.kv.onRelease(ALL)
    // A request admitted just before the switch, reading in the same tick: the
    // entry is still in Redis (the background drop's UNLINK comes later on the
    // connection), but a released range is not trusted, so it goes to DynamoDB.
    const inFlight = await a.kv.service.get('m', sliceKey('m'))
    expect([inFlight.value.toString(), inFlight.cached]).toEqual(['old', false])
    b.kv.onAcquire(ALL)
    await putText(kvUrl(b.url, 'm'), 'new')
    b.kv.onRelease(ALL)
    a.kv.onAcquire(ALL)
    const r = await call(kvUrl(a.url, 'm'))
    expect([r.body, r.headers['x-chopper-cache']]).toEqual(['new', 'miss'])
  })

  test('a fill that lands after the slice was lost and regained is distrusted, even though Redis holds it', async () => {
    const a = await kvOn({ serverId: 'a' })
    const b = await kvOn({ serverId: 'b' })
    const direct = env.h.dynamoClient(env.dynamo.endpoint)
    await direct.put(TABLE, 'race', 'old')
    a.kv.onAcquire(ALL)

    // Hold kv-a's DynamoDB answer (the real one) until the slice has moved away and back.
    const store = a.kv.service.store
    const realGet = store.get.bind(store)
    let release
    const held = new Promise((resolve) => { release = resolve })
    let reads = 0
    store.get = async (key) => {
      const item = await realGet(key)
      if (reads++ === 0) await held
      return item
    }
    const slowRead = call(kvUrl(a.url, 'race'))
    await pollUntil(() => reads === 1, { what: 'the slow read to reach DynamoDB' })

    a.kv.onRelease(ALL)
    b.kv.onAcquire(ALL)
    expect((await putText(kvUrl(b.url, 'race'), 'new')).status).toBe(204)
    b.kv.onRelease(ALL)
    a.kv.onAcquire(ALL)
    await a.kv.service.settle() // the background drop of the released range is done
    release()
    expect((await slowRead).body).toBe('old') // it started before the write: fine to answer

    // The late fill put "old" into kv-a's Redis after the drop...
    const r = env.h.redisClient(env.redis.url)
    const [redisKey] = await r.keys('chopper:kv:a:*:race')
    expect((await r.getBuffer(redisKey)).toString()).toMatch(/old$/)
    // ...and it is never served.
    const after = await call(kvUrl(a.url, 'race'))
    expect([after.body, after.headers['x-chopper-cache']]).toEqual(['new', 'miss'])
    expect(await registryValue(a.registry, 'chopper_kv_cache_invalidations_total', { reason: 'stale' })).toBe(1)
    expect((await call(kvUrl(a.url, 'race'))).headers['x-chopper-cache']).toBe('hit')
  })

  test('releasing a range drops its entries from Redis in the background, and only those', async () => {
    const a = await kvOn({ serverId: 'a' })
    a.kv.onAcquire(ALL)
    const half = KEYSPACE_SIZE / 2
    const keys = Array.from({ length: 20 }, (_, i) => `rel-${i}`)
    for (const k of keys) await putText(kvUrl(a.url, k), k)
    const low = keys.filter((k) => sliceKey(k) < half)
    a.kv.onRelease([{ start: 0, end: half }])
    await pollUntil(async () => (await registryValue(a.registry, 'chopper_kv_cache_invalidations_total', { reason: 'release' })) === low.length, { what: 'the drop' })
    const left = (await env.h.redisClient(env.redis.url).keys(`${a.kv.service.cache.prefix}*`)).map((k) => k.split(':').pop()).sort()
    expect(left).toEqual(keys.filter((k) => !low.includes(k)).sort())
  })

  test('concurrent writes to one key leave the cache agreeing with DynamoDB; concurrent misses share one read', async () => {
    const { url, kv, registry } = await kvOn()
    const writes = Array.from({ length: 25 }, (_, i) => putText(kvUrl(url, 'hot'), `v${i}`))
    for (const r of await Promise.all(writes)) expect(r.status).toBe(204)
    const truth = await env.h.dynamoClient(env.dynamo.endpoint).get(TABLE, 'hot')
    const cached = await call(kvUrl(url, 'hot'))
    expect([cached.body, cached.headers['x-chopper-cache']]).toEqual([truth, 'hit'])

    await env.h.dynamoClient(env.dynamo.endpoint).put(TABLE, 'cold', 'c')
    const spy = jest.spyOn(kv.service.store, 'get') // counts calls; the real read still runs
    const reads = await Promise.all(Array.from({ length: 10 }, () => call(kvUrl(url, 'cold'))))
    for (const r of reads) expect(r.body).toBe('c')
    expect(spy.mock.calls.length).toBeLessThan(10)
    // the ones that read nothing themselves say so (a cost model charges them as hits) and are counted
    const shared = reads.filter((r) => r.headers['x-kv-outcome'] === 'shared').length
    expect(shared).toBe(10 - spy.mock.calls.length)
    expect(reads.filter((r) => r.headers['x-kv-outcome'] === 'miss').length).toBe(spy.mock.calls.length)
    expect(await registryValue(registry, 'chopper_kv_shared_reads_total', { with: 'fill' })).toBe(shared)
    spy.mockRestore()
  })

  test('a cache write that fails (Redis out of memory) never leaves a stale value servable', async () => {
    const own = await spawnRedis()
    env.h.track(() => own.close())
    const { url, registry } = await kvOn({ redisUrl: own.url })
    await putText(kvUrl(url, 'oom'), 'v1')
    expect((await call(kvUrl(url, 'oom'))).headers['x-chopper-cache']).toBe('hit')
    const admin = env.h.redisClient(own.url)
    await admin.config('SET', 'maxmemory-policy', 'noeviction')
    await admin.config('SET', 'maxmemory', '1')
    // DynamoDB accepts the write; Redis refuses to store the new value and keeps v1.
    expect((await putText(kvUrl(url, 'oom'), 'v2')).status).toBe(204)
    expect((await call(kvUrl(url, 'oom'))).body).toBe('v2')
    await admin.config('SET', 'maxmemory', '0')
    const [redisKey] = await admin.keys('chopper:kv:*:oom')
    expect((await admin.getBuffer(redisKey)).toString()).toMatch(/v1$/)
    const r = await call(kvUrl(url, 'oom'))
    expect([r.body, r.headers['x-chopper-cache']]).toEqual(['v2', 'miss'])
    expect(await registryValue(registry, 'chopper_kv_cache_invalidations_total', { reason: 'cache_error' })).toBeGreaterThan(0)
    expect(await registryValue(registry, 'chopper_kv_store_errors_total', { store: 'redis', op: 'set' })).toBeGreaterThan(0)
  })

  test('Redis hung (SIGSTOP): requests fall back to DynamoDB after redisTimeoutMs and stay correct', async () => {
    const own = await spawnRedis()
    env.h.track(() => own.close())
    const { url, registry } = await kvOn({ redisUrl: own.url, redisTimeoutMs: 200 })
    await putText(kvUrl(url, 'hung'), 'v1')
    expect((await call(kvUrl(url, 'hung'))).headers['x-chopper-cache']).toBe('hit')
    own.child.kill('SIGSTOP')
    try {
      const t0 = Date.now()
      expect((await putText(kvUrl(url, 'hung'), 'v2')).status).toBe(204)
      const r = await call(kvUrl(url, 'hung'))
      expect([r.status, r.body, r.headers['x-chopper-cache']]).toEqual([200, 'v2', 'miss'])
      expect(Date.now() - t0).toBeLessThan(5000)
      expect(await registryValue(registry, 'chopper_kv_cache_degraded')).toBe(1)
    } finally {
      own.child.kill('SIGCONT')
    }
    // Redis now applies the commands it had queued; none of them may resurface v1.
    await pollUntil(async () => (await call(kvUrl(url, 'hung'))).headers['x-chopper-cache'] === 'hit', { timeoutMs: 5000, what: 'the cache to be used again' })
    expect((await call(kvUrl(url, 'hung'))).body).toBe('v2')
    expect(await registryValue(registry, 'chopper_kv_cache_degraded')).toBe(0)
  })

  test('DynamoDB hung (accepts connections, never answers): 503 after the timeout, not a hung request', async () => {
    const sockets = new Set()
    const blackHole = net.createServer((s) => { sockets.add(s); s.on('close', () => sockets.delete(s)) })
    await new Promise((resolve) => blackHole.listen(0, '127.0.0.1', resolve))
    env.h.track(() => new Promise((resolve) => { for (const s of sockets) s.destroy(); blackHole.close(resolve) }))
    const store = new DynamoStore({ table: TABLE, endpoint: `http://127.0.0.1:${blackHole.address().port}`, region: 'us-west-2', timeoutMs: 200 })
    env.h.track(() => store.close())
    const t0 = Date.now()
    await expect(store.put('k', Buffer.from('v'), 'text/plain')).rejects.toMatchObject({ code: 'CHOPPER_ERR_STORE_UNAVAILABLE', status: 503 })
    expect(Date.now() - t0).toBeLessThan(5000) // three 200 ms attempts plus backoff
  })

  test('Redis unreachable from the start: served from DynamoDB, degraded, and a warning logged', async () => {
    const lines = []
    const logger = pino({ level: 'info' }, new Writable({ write (chunk, enc, cb) { lines.push(JSON.parse(chunk)); cb() } }))
    const { url, registry, kv } = await kvOn({ redisUrl: 'redis://:hunter2@127.0.0.1:1', logger })
    expect(kv.cache.backend).toBe('redis')
    expect((await putText(kvUrl(url, 'nr'), 'v')).status).toBe(204)
    const r = await call(kvUrl(url, 'nr'))
    expect([r.status, r.body, r.headers['x-chopper-cache']]).toEqual([200, 'v', 'miss'])
    expect(await registryValue(registry, 'chopper_kv_cache_degraded')).toBe(1)
    expect(await registryValue(registry, 'chopper_kv_store_errors_total', { store: 'redis' })).toBeGreaterThan(0)
    expect(lines.some((l) => l.level === 40 && /Redis not reachable at start/.test(l.msg))).toBe(true)
    expect(JSON.stringify(lines)).not.toMatch(/hunter2/) // the password never reaches the logs
  })

  test('no redisUrl and spawnRedis false: the in-process TTL cache, with the same move safety', async () => {
    const a = await kvOn({ redisUrl: undefined, spawnRedis: false, cacheTtlMs: 300, serverId: 'a' })
    const b = await kvOn({ redisUrl: undefined, spawnRedis: false, serverId: 'b' })
    expect(a.kv.cache.backend).toBe('memory')
    expect(await registryValue(a.registry, 'chopper_kv_cache_backend', { backend: 'memory' })).toBe(1)
    a.kv.onAcquire(ALL)
    await putText(kvUrl(a.url, 'mem'), 'old')
    expect((await call(kvUrl(a.url, 'mem'))).headers['x-chopper-cache']).toBe('hit')
    a.kv.onRelease(ALL)
    b.kv.onAcquire(ALL)
    await putText(kvUrl(b.url, 'mem'), 'new')
    a.kv.onAcquire(ALL)
    expect((await call(kvUrl(a.url, 'mem'))).body).toBe('new')
    // TTL: left alone past cacheTtlMs, the entry is gone.
    expect((await call(kvUrl(a.url, 'mem'))).headers['x-chopper-cache']).toBe('hit')
    await pollUntil(async () => (await a.kv.service.cache.get('mem')) === null, { timeoutMs: 3000, intervalMs: 400, what: 'expiry' })
    expect((await call(kvUrl(a.url, 'mem'))).headers['x-chopper-cache']).toBe('miss')
  })

  test('no redisUrl and no redis-server binary: in-process cache and a clear warning', async () => {
    const lines = []
    const logger = pino({ level: 'info' }, new Writable({ write (chunk, enc, cb) { lines.push(JSON.parse(chunk)); cb() } }))
    const path = process.env.PATH
    process.env.PATH = '/nonexistent'
    let app
    try {
      app = await kvOn({ redisUrl: undefined, logger })
    } finally {
      process.env.PATH = path
    }
    expect(app.kv.cache.backend).toBe('memory')
    const warning = lines.find((l) => l.level === 40 && /redis-server is not installed/.test(l.msg))
    expect(warning).toBeDefined()
    expect(warning.component).toBe('kv-cache')
    await putText(kvUrl(app.url, 'nb'), 'v')
    expect((await call(kvUrl(app.url, 'nb'))).headers['x-chopper-cache']).toBe('hit')
  })

  test('no redisUrl with the binary installed: a private redis-server, stopped on close', async () => {
    const { kv } = await kvOn({ redisUrl: undefined })
    expect(kv.cache.backend).toBe('redis')
    const probe = env.h.redisClient(kv.cache.url)
    expect(await probe.ping()).toBe('PONG')
    expect(await probe.config('GET', 'save')).toEqual(['save', ''])
    await kv.close()
    await pollUntil(async () => {
      try {
        await probe.ping()
        return false
      } catch {
        return true
      }
    }, { timeoutMs: 5000, what: 'the spawned redis-server to stop' })
  })

  test('DynamoDB unreachable at start: create fails with a clear 503-class error', async () => {
    const gone = await startDynalite()
    await gone.close()
    await expect(env.h.standalone({ dynamoEndpoint: gone.endpoint, table: TABLE, spawnRedis: false })).rejects.toMatchObject({
      code: 'CHOPPER_ERR_STORE_UNAVAILABLE',
      message: expect.stringMatching(/DynamoDB unavailable \(describeTable on table kv-app\)/)
    })
  })
})
