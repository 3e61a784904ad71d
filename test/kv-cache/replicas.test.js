'use strict'

const { sliceKey, KEYSPACE_SIZE } = require('../../core/keyspace')
const { freePort } = require('../../core/http')
const { useKvStack, registryValue, kvUrl, call, push } = require('./harness')
const { pollUntil } = require('../../core/poll')
const { StoreUnavailableError } = require('../../core/errors')

/**
 * kv-cache on a replicated slice (docs/replication.md), without the shard
 * guard: a middleware sets what it would (req.chopperReplicas, the
 * generation, the servers' URLs). Real dynalite and redis-server. The
 * primary holds the key on every replica before its DynamoDB write and
 * fences it after, so no replica serves the old value once any read could
 * have returned the new one.
 */

const TABLE = 'kv-replicas'
const GEN = 5
const ASK = { heldReads: 'ask', heldReadWaitMs: 0 } // ask at once (the default waits up to 500 ms for the release first)
const putText = (url, value) => call(url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: value })

function gate () {
  let open
  const p = new Promise((resolve) => { open = resolve })
  return { p, open }
}

/**
 * `node`'s DynamoDB puts, once applied, wait for `resume()` before they
 * return: `landed` resolves when one has been applied; `restore()` undoes it.
 */
function stallPutsAfterLanding (node) {
  const landed = gate()
  const resume = gate()
  const store = node.kv.service.store
  const realPut = store.put.bind(store)
  store.put = async (...args) => {
    const ver = await realPut(...args)
    landed.open()
    await resume.p
    return ver
  }
  return { landed: landed.p, resume: resume.open, restore: () => { store.put = realPut } }
}

/**
 * `node`'s holds wait for `resume()` before they are sent: `holding` resolves
 * when the first one waits; `restore()` sends later ones at once again.
 */
function gateHolds (node) {
  const holding = gate()
  const resume = gate()
  const fencer = node.kv.service.fencer
  const realSend = fencer.send.bind(fencer)
  fencer.send = async (phase, ...rest) => {
    if (phase === 'hold') { holding.open(); await resume.p }
    return realSend(phase, ...rest)
  }
  return { holding: holding.p, resume: resume.open, restore: () => { fencer.send = realSend } }
}

/** The keys `node` reads from DynamoDB from now on. */
function countStoreGets (node) {
  const calls = []
  const get0 = node.kv.service.store.get.bind(node.kv.service.store)
  node.kv.service.store.get = (key) => { calls.push(key); return get0(key) }
  return calls
}

describe('kv-cache with replicated slices', () => {
  const env = useKvStack()

  /**
   * Servers A (primary), B, C of one slice. `intercept[id](req, res)` may
   * answer a request itself (return true) before the app sees it.
   * `withServers: false` leaves req.chopperServers unset (URLs from the hooks).
   */
  async function replicaSet ({ ids = ['A', 'B', 'C'], options = {}, nodeOptions = {}, intercept = {}, withServers = true, admitGeneration = (req) => Math.max(GEN, Number(req.headers['x-chopper-generation']) || 0), listed = () => ids } = {}) {
    const servers = {}
    const nodes = {}
    for (const id of ids) {
      const node = await env.h.standalone({ dynamoEndpoint: env.dynamo.endpoint, table: TABLE, redisUrl: env.redis.url, serverId: id, ...options, ...nodeOptions[id] }, {
        middleware (req, res, next) {
          if (intercept[id] && intercept[id](req, res)) return
          // as the shard guard would: by default it admits a fence only once it has the writer's map
          req.chopperGeneration = admitGeneration(req)
          req.chopperReplicas = listed(id)
          if (withServers) req.chopperServers = servers
          next()
        }
      })
      servers[id] = { url: node.url }
      nodes[id] = node
    }
    return { nodes, servers }
  }

  const get = async (node, key) => {
    const r = await call(kvUrl(node.url, key))
    return { status: r.status, body: r.body, outcome: r.headers['x-kv-outcome'] }
  }
  const isFence = (req) => req.path === '/kv/_fence'

  test('a write on the primary is served by every replica at once, from its cache (the release carries the value); a replica never serves the value it had cached', async () => {
    const { nodes: { A, B, C } } = await replicaSet()
    expect((await putText(kvUrl(A.url, 'k1'), 'v1')).status).toBe(204)
    // The release carried the value: every replica's next read is a hit (write-through).
    for (const n of [B, C]) expect(await get(n, 'k1')).toEqual({ status: 200, body: 'v1', outcome: 'hit' })
    const w = await putText(kvUrl(A.url, 'k1'), 'v2')
    expect([w.status, w.headers['x-kv-outcome']]).toEqual([204, 'write'])
    for (const n of [A, B, C]) expect((await get(n, 'k1')).body).toBe('v2')
    expect(await get(B, 'k1')).toEqual({ status: 200, body: 'v2', outcome: 'hit' })
    // Each replica got a hold and a release per write; nothing is held afterwards.
    expect(await registryValue(B.registry, 'chopper_kv_fences_received_total', { phase: 'hold' })).toBe(2)
    expect(await registryValue(B.registry, 'chopper_kv_fences_received_total', { phase: 'release' })).toBe(2)
    for (const n of [A, B, C]) expect(n.kv.service.holds.size).toBe(0)
    // The primary timed each phase of both writes (the releases after they were answered),
    // and counted each release once every replica had answered it.
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the releases' })
    expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { phase: 'release', outcome: 'ok' })).toBe(4)
    for (const phase of ['hold', 'store', 'release']) {
      expect(await registryValue(A.registry, 'chopper_kv_write_phase_seconds_count', { phase })).toBe(2)
      expect(await registryValue(A.registry, 'chopper_kv_write_phase_seconds_sum', { phase })).toBeGreaterThan(0)
    }
    expect(await registryValue(B.registry, 'chopper_kv_write_phase_seconds_count')).toBe(0) // replicas write nothing

    expect((await call(kvUrl(A.url, 'k1'), { method: 'DELETE' })).status).toBe(204)
    for (const n of [A, B, C]) expect(await get(n, 'k1')).toMatchObject({ status: 404, outcome: 'miss' })
  })

  test('heldReads wait: once DynamoDB took the write, before it is acknowledged, no replica (nor the primary) serves the old value', async () => {
    const { nodes: { A, B, C } } = await replicaSet({ options: { heldReads: 'wait', heldReadWaitMs: 100 } })
    await putText(kvUrl(A.url, 'k2'), 'old')
    for (const n of [A, B, C]) await get(n, 'k2')
    expect((await get(B, 'k2')).outcome).toBe('hit')

    const stall = stallPutsAfterLanding(A)
    const w = putText(kvUrl(A.url, 'k2'), 'new')
    await stall.landed
    // A read that returns 'new' here, then one that returns 'old', would not be linearizable.
    for (const n of [B, C, A]) expect(await get(n, 'k2')).toEqual({ status: 200, body: 'new', outcome: 'miss' })
    stall.resume()
    expect((await w).status).toBe(204)
    stall.restore()
    expect(await get(B, 'k2')).toMatchObject({ body: 'new' })
    expect(await get(B, 'k2')).toEqual({ status: 200, body: 'new', outcome: 'hit' })
  })

  /**
   * `node`'s cache sets of `key` wait for `resume()` before they run;
   * `started` resolves when one has been asked for. The fence phases the
   * node sends are recorded in `phases` from now on.
   */
  function stallCacheSets (node, key) {
    const started = gate()
    const resume = gate()
    const cache = node.kv.service.cache
    const realSet = cache.set.bind(cache)
    cache.set = async (k, ...rest) => {
      if (k === key) { started.open(); await resume.p }
      return realSet(k, ...rest)
    }
    const phases = []
    const fencer = node.kv.service.fencer
    const realSend = fencer.send.bind(fencer)
    fencer.send = (phase, ...rest) => { phases.push(phase); return realSend(phase, ...rest) }
    return { started: started.p, resume: resume.open, phases }
  }

  test('heldReads wait: the releases go as soon as DynamoDB took the write, alongside the writer\'s own cache update: the replicas serve the new value while the writer, still held, serves nothing of the key from its cache', async () => {
    const { nodes: { A, B, C } } = await replicaSet({ options: { heldReads: 'wait', heldReadWaitMs: 100 } })
    await putText(kvUrl(A.url, 'k50'), 'old')
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of old' })
    const stall = stallCacheSets(A, 'k50')
    const w = putText(kvUrl(A.url, 'k50'), 'new')
    await stall.started
    expect(stall.phases).toEqual(['hold', 'release']) // the release left before the writer's own cache set
    await pollUntil(() => !B.kv.service.holds.held('k50') && !C.kv.service.holds.held('k50'), { what: 'the releases' })
    for (const n of [B, C]) expect(await get(n, 'k50')).toEqual({ status: 200, body: 'new', outcome: 'hit' })
    // the writer holds itself until its cache has the value: its read waits, then reads DynamoDB
    expect(A.kv.service.holds.held('k50')).toBe(true)
    expect(await get(A, 'k50')).toEqual({ status: 200, body: 'new', outcome: 'miss' })
    stall.resume()
    expect((await w).status).toBe(204)
    expect(A.kv.service.holds.held('k50')).toBe(false)
    expect(await get(A, 'k50')).toEqual({ status: 200, body: 'new', outcome: 'hit' })
  })

  test('heldReads wait: through its hold phase (before its DynamoDB write) the writer still serves the key from its cache, and holds itself from its DynamoDB write on', async () => {
    const { nodes: { A, B } } = await replicaSet({ ids: ['A', 'B'], options: { heldReads: 'wait', heldReadWaitMs: 100 } })
    await putText(kvUrl(A.url, 'k53'), 'old')
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of old' })
    const holds = gateHolds(A)
    const stall = stallPutsAfterLanding(A)
    const w = putText(kvUrl(A.url, 'k53'), 'new')
    await holds.holding
    expect(A.kv.service.holds.held('k53')).toBe(false)
    expect(await get(A, 'k53')).toEqual({ status: 200, body: 'old', outcome: 'hit' })
    holds.resume()
    await stall.landed
    expect(A.kv.service.holds.held('k53')).toBe(true) // DynamoDB has 'new': the writer serves nothing of the key from its cache
    expect(B.kv.service.holds.held('k53')).toBe(true)
    stall.resume()
    expect((await w).status).toBe(204)
    stall.restore()
    expect(await get(A, 'k53')).toEqual({ status: 200, body: 'new', outcome: 'hit' })
  })

  test('a write that arrives while the running batch still holds its replicas joins that batch: one hold, one DynamoDB write, one release for both; one that arrives after its DynamoDB write began runs next', async () => {
    const { nodes: { A, B } } = await replicaSet({ ids: ['A', 'B'] })
    await putText(kvUrl(A.url, 'k61'), 'v0')
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of v0' })
    const fences = (phase) => registryValue(B.registry, 'chopper_kv_fences_received_total', { phase })
    const [holds0, releases0] = [await fences('hold'), await fences('release')]
    const joined0 = await registryValue(A.registry, 'chopper_kv_batched_writes_total')
    const holds = gateHolds(A)
    const puts = []
    const store = A.kv.service.store
    const realPut = store.put.bind(store)
    store.put = (key, value, ...rest) => { puts.push(value.toString()); return realPut(key, value, ...rest) }
    const first = putText(kvUrl(A.url, 'k61'), 'v1')
    await holds.holding // v1's batch is running: its holds are out, no DynamoDB write yet
    const second = putText(kvUrl(A.url, 'k61'), 'v2')
    await pollUntil(async () => (await registryValue(A.registry, 'chopper_kv_batched_writes_total')) === joined0 + 1, { what: 'v2 to join the running batch' })
    holds.restore()
    holds.resume()
    const [r1, r2] = await Promise.all([first, second])
    expect([r1.status, r2.status]).toEqual([204, 204])
    expect(puts).toEqual(['v2']) // one DynamoDB write, of the batch's last value
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release' })
    expect(await fences('hold')).toBe(holds0 + 1)
    expect(await fences('release')).toBe(releases0 + 1)
    for (const n of [A, B]) expect(await get(n, 'k61')).toEqual({ status: 200, body: 'v2', outcome: 'hit' })

    // Once the batch's DynamoDB write began, it is sealed: a write arriving then is a batch of its own, after it.
    const stall = stallPutsAfterLanding(A)
    const third = putText(kvUrl(A.url, 'k61'), 'v3')
    await stall.landed
    const fourth = putText(kvUrl(A.url, 'k61'), 'v4')
    await pollUntil(() => A.kv.service.writer.batches.size === 1, { what: 'v4 to open the next batch' })
    stall.resume()
    expect((await third).status).toBe(204)
    stall.restore()
    expect((await fourth).status).toBe(204)
    expect(puts).toEqual(['v2', 'v3', 'v4'])
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the releases' })
    expect(await fences('hold')).toBe(holds0 + 3)
    for (const n of [A, B]) expect((await get(n, 'k61')).body).toBe('v4')
  })

  test('heldReads ask: the releases wait for the writer\'s own cache update, where the write takes effect', async () => {
    const { nodes: { A, B } } = await replicaSet({ options: ASK })
    await putText(kvUrl(A.url, 'k51'), 'old')
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of old' })
    const stall = stallCacheSets(A, 'k51')
    const w = putText(kvUrl(A.url, 'k51'), 'new')
    await stall.started
    expect(stall.phases).toEqual(['hold']) // no release before the writer's cache has the value
    expect(B.kv.service.holds.held('k51')).toBe(true)
    expect(await get(A, 'k51')).toEqual({ status: 200, body: 'old', outcome: 'hit' }) // not yet in effect
    stall.resume()
    expect((await w).status).toBe(204)
    expect(stall.phases).toEqual(['hold', 'release'])
    await pollUntil(() => !B.kv.service.holds.held('k51'), { what: 'the release' })
    expect(await get(B, 'k51')).toEqual({ status: 200, body: 'new', outcome: 'hit' })
  })

  test('heldReads wait: a hold keeps the replica\'s cached entry but never serves it while held; an abort (the write was not applied) serves it again, with no DynamoDB read', async () => {
    const { nodes: { A, B }, servers } = await replicaSet({ ids: ['A', 'B'], options: { heldReads: 'wait', heldReadWaitMs: 0 } })
    await putText(kvUrl(A.url, 'k52'), 'v1')
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of v1' })
    const slice = sliceKey('k52')
    B.kv.service.hold('k52', slice, 'A:t:52', { from: 'A', url: servers.A.url, generation: GEN })
    expect((await B.kv.service.cache.get('k52', slice)).value.toString()).toBe('v1') // kept, no Redis call
    const storeGets = countStoreGets(B)
    expect(await get(B, 'k52')).toEqual({ status: 200, body: 'v1', outcome: 'miss' }) // held: from DynamoDB
    expect(storeGets).toEqual(['k52'])
    await B.kv.service.release('k52', slice, 'A:t:52') // an abort
    expect(await get(B, 'k52')).toEqual({ status: 200, body: 'v1', outcome: 'hit' })
    expect(storeGets).toEqual(['k52'])
  })

  test('heldReads ask: until the writer\'s DynamoDB write returned, the writer and every replica serve the old value (the writer vouches for the replicas\' cached one); from then on the new one', async () => {
    const { nodes: { A, B, C } } = await replicaSet({ options: ASK })
    await putText(kvUrl(A.url, 'k2'), 'old')
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of old' })
    const storeGets = [countStoreGets(B), countStoreGets(C)]
    const stall = stallPutsAfterLanding(A)
    const w = putText(kvUrl(A.url, 'k2'), 'new')
    await stall.landed
    expect(B.kv.service.holds.held('k2')).toBe(true)
    // DynamoDB has 'new', but nobody has served it: the write takes effect when the writer's returns
    for (const n of [B, C, A]) expect(await get(n, 'k2')).toEqual({ status: 200, body: 'old', outcome: 'hit' })
    stall.resume()
    expect((await w).status).toBe(204)
    stall.restore()
    // answered before its releases: a replica still held asks the writer, which now has 'new'
    for (const n of [A, B, C]) expect((await get(n, 'k2')).body).toBe('new')
    expect(storeGets).toEqual([[], []]) // no replica read DynamoDB
    expect(await registryValue(B.registry, 'chopper_kv_held_reads_total', { outcome: 'writer' })).toBeGreaterThanOrEqual(1)
    expect(await registryValue(B.registry, 'chopper_kv_writer_asks_total', { outcome: 'current' })).toBeGreaterThanOrEqual(1)
    expect(await registryValue(A.registry, 'chopper_kv_fences_received_total', { phase: 'read' })).toBeGreaterThanOrEqual(2)
  })

  for (const heldReads of ['ask', 'wait']) {
    test(`a replica's fill that read DynamoDB before a write never lands in its cache afterwards (heldReads: ${heldReads})`, async () => {
      const { nodes: { A, B } } = await replicaSet({ ids: ['A', 'B'], options: { heldReads } })
      await putText(kvUrl(A.url, 'k3'), 'v1')
      await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of v1' }) // answered before it
      await B.kv.service.cache.del('k3', sliceKey('k3')) // the release cached v1 there: make B fill from DynamoDB
      const read = gate()
      const resume = gate()
      const store = B.kv.service.store
      const realGet = store.get.bind(store)
      store.get = async (key) => {
        const item = await realGet(key)
        store.get = realGet
        read.open()
        await resume.p
        return item
      }
      const slowRead = get(B, 'k3')
      await read.p // B's fill holds v1 from DynamoDB
      expect((await putText(kvUrl(A.url, 'k3'), 'v2')).status).toBe(204)
      resume.open()
      // Concurrent with the write: either value is linearizable. wait serves the fill's v1; ask
      // serves no fill a hold overtook (it may have read a write its writer did not serve yet) and
      // asks the writer, which has v2 by now.
      expect((await slowRead).body).toBe(heldReads === 'ask' ? 'v2' : 'v1')
      // the late fill of v1 was refused: B has v2 (from the release), never v1
      expect(await get(B, 'k3')).toEqual({ status: 200, body: 'v2', outcome: 'hit' })
    })
  }

  /** Hold `key` on `node` for a write of server `from` at `url`, as its hold fence would. */
  const holdFor = async (node, key, from, url, id = `${from}:t:${Math.random().toString(36).slice(2)}`) => {
    node.kv.service.hold(key, sliceKey(key), id, { from, url, generation: GEN, heldReads: 'ask' })
    return id
  }

  test('heldReads ask: a held read is answered by the writer, which vouches for the cached version (a hit) or sends its value (shared), or says there is none; no DynamoDB read; counted', async () => {
    const { nodes: { A, B }, servers } = await replicaSet({ options: ASK })
    expect((await putText(kvUrl(A.url, 'k30'), 'v1')).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of v1' })
    const storeGets = countStoreGets(B)
    await holdFor(B, 'k30', 'A', servers.A.url)
    await holdFor(B, 'k31', 'A', servers.A.url) // never written
    expect(await get(B, 'k30')).toEqual({ status: 200, body: 'v1', outcome: 'hit' }) // B's cached v1 is A's
    await B.kv.service.cache.del('k30', sliceKey('k30'))
    expect(await get(B, 'k30')).toEqual({ status: 200, body: 'v1', outcome: 'shared' }) // nothing cached: A's value
    expect(await get(B, 'k31')).toMatchObject({ status: 404 })
    expect(storeGets).toEqual([])
    expect(await registryValue(B.registry, 'chopper_kv_held_reads_total', { outcome: 'writer' })).toBe(3)
    for (const [outcome, n] of [['current', 1], ['value', 1], ['none', 1]]) {
      expect(await registryValue(B.registry, 'chopper_kv_writer_asks_total', { outcome })).toBe(n)
    }
    expect(await registryValue(A.registry, 'chopper_kv_fences_received_total', { phase: 'read' })).toBe(3)
    expect(B.kv.service.holds.held('k30')).toBe(true) // still held: nothing was lifted to answer
  })

  test('heldReads ask: a held read first waits up to heldReadWaitMs for the release (served without asking when it comes), then asks the writer', async () => {
    const { nodes: { A, B }, servers } = await replicaSet({ options: { heldReads: 'ask', heldReadWaitMs: 300 } })
    expect((await putText(kvUrl(A.url, 'k36'), 'v1')).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of v1' })
    const id = await holdFor(B, 'k36', 'A', servers.A.url)
    let read = null
    get(B, 'k36').then((r) => { read = r })
    await pollUntil(() => B.kv.service.holds.waiters.has('k36'), { what: 'the read to wait for the release' })
    await B.kv.service.release('k36', sliceKey('k36'), id) // an abort: lifted, B's v1 stands
    await pollUntil(() => read !== null, { what: 'the read, once lifted' })
    expect(read).toEqual({ status: 200, body: 'v1', outcome: 'hit' })
    expect(await registryValue(B.registry, 'chopper_kv_held_reads_total', { outcome: 'lifted' })).toBe(1)
    expect(await registryValue(B.registry, 'chopper_kv_writer_asks_total')).toBe(0)
    expect(await registryValue(B.registry, 'chopper_kv_held_read_wait_seconds_count')).toBe(1)
    expect(await registryValue(B.registry, 'chopper_kv_held_read_wait_seconds_bucket', { le: '2.5' })).toBe(1) // lifted, not timed out (300 ms)
    // no release: after heldReadWaitMs it asks
    await holdFor(B, 'k36', 'A', servers.A.url)
    const t0 = Date.now()
    expect(await get(B, 'k36')).toEqual({ status: 200, body: 'v1', outcome: 'hit' })
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290)
    expect(await registryValue(B.registry, 'chopper_kv_writer_asks_total', { outcome: 'current' })).toBe(1)
    // That wait ran out: counted too, for its whole heldReadWaitMs.
    expect(await registryValue(B.registry, 'chopper_kv_held_read_wait_seconds_count')).toBe(2)
    expect(await registryValue(B.registry, 'chopper_kv_held_read_wait_seconds_sum')).toBeGreaterThanOrEqual(0.29)
  })

  test('heldReads ask: a write that a replica did not take the hold of (421, or dropped) holds its writer too: a read the replica admitted before may fill from DynamoDB after the write landed', async () => {
    const refuse = (req, res) => {
      if (!isFence(req)) return false
      res.status(421).json({ error: { code: 'CHOPPER_ERR_NOT_OWNER', message: 'not mine' } })
      return true
    }
    const { nodes: { A, B } } = await replicaSet({ options: ASK, intercept: { C: refuse } })
    expect((await putText(kvUrl(A.url, 'k38'), 'old')).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of old' })
    expect(await get(A, 'k38')).toEqual({ status: 200, body: 'old', outcome: 'hit' })
    const stall = stallPutsAfterLanding(A)
    const w = putText(kvUrl(A.url, 'k38'), 'new')
    await stall.landed
    expect(A.kv.service.holds.held('k38')).toBe(true)
    // C could have served DynamoDB's 'new' already: nobody serves 'old' now
    expect(await get(A, 'k38')).toEqual({ status: 200, body: 'new', outcome: 'miss' })
    expect((await get(B, 'k38')).body).toBe('new') // asked A, which read DynamoDB
    stall.resume()
    expect((await w).status).toBe(204)
    stall.restore()
    expect(A.kv.service.holds.held('k38')).toBe(false)
  })

  test('heldReads is the writer\'s choice, sent with its holds: a replica set to wait asks a writer set to ask, and one set to ask waits for a writer set to wait', async () => {
    const { nodes: { A, B }, servers } = await replicaSet({ ids: ['A', 'B'], nodeOptions: { A: ASK, B: { heldReads: 'wait', heldReadWaitMs: 50 } } })
    // A (ask) writes: its hold tells B to ask; B keeps its cached entry and A vouches for it
    expect((await putText(kvUrl(A.url, 'k37'), 'v1')).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of v1' })
    const bGets = countStoreGets(B)
    const stall = stallPutsAfterLanding(A)
    const w = putText(kvUrl(A.url, 'k37'), 'v2')
    await stall.landed
    expect(B.kv.service.holds.held('k37')).toBe(true)
    expect(await get(B, 'k37')).toEqual({ status: 200, body: 'v1', outcome: 'hit' }) // not DynamoDB's v2: A has not served it
    expect(bGets).toEqual([])
    expect(await registryValue(B.registry, 'chopper_kv_writer_asks_total', { outcome: 'current' })).toBe(1)
    stall.resume()
    expect((await w).status).toBe(204)
    stall.restore()
    // a write of B's (wait) holds A, set to ask: A waits (heldReadWaitMs 0 here), then reads DynamoDB
    await pollUntil(() => !B.kv.service.holds.held('k37'), { what: 'the release of v2' })
    A.kv.service.hold('k37', sliceKey('k37'), 'B:t:1', { from: 'B', url: servers.B.url, generation: GEN })
    const aGets = countStoreGets(A)
    expect(await get(A, 'k37')).toEqual({ status: 200, body: 'v2', outcome: 'miss' })
    expect(aGets).toEqual(['k37'])
    expect(await registryValue(A.registry, 'chopper_kv_held_reads_total', { outcome: 'store' })).toBe(1)
  })

  test('heldReads ask: reads of a held key share an ask issued after they arrived: a burst costs fewer asks than reads', async () => {
    const { nodes: { A, B }, servers } = await replicaSet({ options: ASK })
    expect((await putText(kvUrl(A.url, 'k32'), 'v1')).status).toBe(204)
    await holdFor(B, 'k32', 'A', servers.A.url)
    const reads = await Promise.all(Array.from({ length: 12 }, () => get(B, 'k32')))
    expect(reads.map((r) => [r.status, r.body])).toEqual(Array(12).fill([200, 'v1']))
    const asks = await registryValue(A.registry, 'chopper_kv_fences_received_total', { phase: 'read' })
    expect(asks).toBeGreaterThanOrEqual(1)
    expect(asks).toBeLessThan(12)
    expect(await registryValue(B.registry, 'chopper_kv_held_reads_total', { outcome: 'writer' })).toBe(12)
  })

  test('heldReads ask: a writer that is gone (refuses the connection, or does not admit the slice: 421) lets the replica read DynamoDB', async () => {
    const notMine = (req, res) => {
      if (!isFence(req) || req.headers['x-kv-fence'] !== 'read') return false
      res.status(421).json({ error: { code: 'CHOPPER_ERR_NOT_OWNER', message: 'not mine' } })
      return true
    }
    const { nodes: { A, B }, servers } = await replicaSet({ options: ASK, intercept: { C: notMine } })
    expect((await putText(kvUrl(A.url, 'k33'), 'v1')).status).toBe(204)
    const storeGets = countStoreGets(B)
    const id = await holdFor(B, 'k33', 'A', `http://127.0.0.1:${await freePort()}`) // A's process is gone
    expect(await get(B, 'k33')).toEqual({ status: 200, body: 'v1', outcome: 'miss' })
    await B.kv.service.release('k33', sliceKey('k33'), id) // (its hold lapses, in life)
    await holdFor(B, 'k33', 'C', servers.C.url) // C's write, and C no longer admits the slice
    expect(await get(B, 'k33')).toEqual({ status: 200, body: 'v1', outcome: 'miss' })
    expect(storeGets).toEqual(['k33', 'k33'])
    expect(await registryValue(B.registry, 'chopper_kv_writer_asks_total', { outcome: 'gone' })).toBe(2)
    expect(await registryValue(B.registry, 'chopper_kv_held_reads_total', { outcome: 'store' })).toBe(2)
    // both gone writers' holds standing: each is asked once, then one store read
    await holdFor(B, 'k33', 'A', `http://127.0.0.1:${await freePort()}`)
    expect(await get(B, 'k33')).toEqual({ status: 200, body: 'v1', outcome: 'miss' })
    expect(storeGets).toEqual(['k33', 'k33', 'k33'])
    expect(await registryValue(B.registry, 'chopper_kv_writer_asks_total', { outcome: 'gone' })).toBe(4)
  })

  test('heldReads ask: a store read that an ask write\'s hold overtakes, or that starts after one (it waited in a batch), is not served: the read asks the writer', async () => {
    const { nodes: { A, B }, servers } = await replicaSet({ options: ASK })
    expect((await putText(kvUrl(A.url, 'k39'), 'v1')).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of v1' })
    // a write of C's that waits (its hold says nothing): B's reads go to DynamoDB at once (heldReadWaitMs 0)
    B.kv.service.hold('k39', sliceKey('k39'), 'C:t:1', { from: 'C', url: servers.C.url, generation: GEN })
    const read = gate()
    const resume = gate()
    const storeGets = []
    const get0 = B.kv.service.store.get.bind(B.kv.service.store)
    B.kv.service.store.get = async (key) => {
      storeGets.push(key)
      const item = await get0(key)
      if (storeGets.length === 1) { read.open(); await resume.p }
      return item
    }
    const first = get(B, 'k39') // its store read runs, stalled
    await read.p
    const second = get(B, 'k39') // waits for the next store read
    await pollUntil(() => Boolean(B.kv.service.reader.heldStoreReads.keys.get('k39')?.next), { what: 'the second read to wait its turn' })
    await holdFor(B, 'k39', 'A', servers.A.url) // an ask write's hold overtakes both
    resume.open()
    // B kept its (unserved) entry through C's hold: A vouches for it
    for (const r of await Promise.all([first, second])) expect(r).toEqual({ status: 200, body: 'v1', outcome: 'hit' })
    expect(storeGets).toEqual(['k39']) // the second never read DynamoDB
    expect(await registryValue(A.registry, 'chopper_kv_fences_received_total', { phase: 'read' })).toBeGreaterThanOrEqual(1)
  })

  test('heldReads ask: a writer that does not answer is asked again after waiting for the release; a release ends the wait, and without one the read fails with 503 after heldReadTimeoutMs (fenceTimeoutMs)', async () => {
    let refusing = true
    const busy = (req, res) => {
      if (!refusing || !isFence(req) || req.headers['x-kv-fence'] !== 'read') return false
      res.status(503).json({ error: { code: 'CHOPPER_ERR_STORE_UNAVAILABLE', message: 'busy' } })
      return true
    }
    const { nodes: { A, B }, servers } = await replicaSet({ options: { ...ASK, fenceTimeoutMs: 400 }, intercept: { A: busy } })
    expect((await putText(kvUrl(A.url, 'k34'), 'v1')).status).toBe(204)
    const storeGets = countStoreGets(B)
    const id = await holdFor(B, 'k34', 'A', servers.A.url)
    let read = null
    get(B, 'k34').then((r) => { read = r })
    await pollUntil(async () => (await registryValue(B.registry, 'chopper_kv_writer_asks_total', { outcome: 'unsure' })) >= 1, { what: 'the first ask to fail' })
    await B.kv.service.release('k34', sliceKey('k34'), id) // an abort: lifted, B's cached v1 stands
    await pollUntil(() => read !== null, { what: 'the read, once the hold is lifted' })
    expect(read).toEqual({ status: 200, body: 'v1', outcome: 'hit' })
    // no release this time: it keeps asking (every heldReadWaitMs) until the deadline
    await holdFor(B, 'k34', 'A', servers.A.url)
    const t0 = Date.now()
    const r = await call(kvUrl(B.url, 'k34'))
    expect(Date.now() - t0).toBeGreaterThanOrEqual(350)
    expect([r.status, r.body.error.code]).toEqual([503, 'CHOPPER_ERR_STORE_UNAVAILABLE'])
    expect(r.body.error.message).toMatch(/held by a write of server A, which did not answer/)
    expect(await registryValue(B.registry, 'chopper_kv_writer_asks_total', { outcome: 'unsure' })).toBeGreaterThanOrEqual(3)
    expect(await registryValue(B.registry, 'chopper_kv_held_reads_total', { outcome: 'store' })).toBe(0)
    expect(storeGets).toEqual([]) // never DynamoDB: the writer may still serve the old value
    refusing = false
    expect(await get(B, 'k34')).toEqual({ status: 200, body: 'v1', outcome: 'hit' }) // A vouches for B's v1
  })

  test('heldReads ask: a write whose outcome is unknown holds its writer, which then reads DynamoDB for itself and for the replicas that ask it; an asked server that another write holds refuses (409)', async () => {
    const { nodes: { A, B }, servers } = await replicaSet({ options: ASK, ids: ['A', 'B'] })
    expect((await putText(kvUrl(A.url, 'k35'), 'v1')).status).toBe(204)
    const store = A.kv.service.store
    const realPut = store.put.bind(store)
    store.put = async (...args) => {
      await realPut(...args) // applied, but the answer is lost
      throw new StoreUnavailableError('DynamoDB unavailable (test)')
    }
    const w = await putText(kvUrl(A.url, 'k35'), 'v2')
    store.put = realPut
    expect([w.status, w.body.error.code]).toEqual([503, 'CHOPPER_ERR_STORE_UNAVAILABLE'])
    expect(A.kv.service.holds.held('k35')).toBe(true) // A holds itself until the lapse
    expect(B.kv.service.holds.held('k35')).toBe(true)
    const aGets = countStoreGets(A)
    expect(await get(A, 'k35')).toEqual({ status: 200, body: 'v2', outcome: 'miss' })
    expect(await get(B, 'k35')).toEqual({ status: 200, body: 'v2', outcome: 'shared' }) // A read DynamoDB for it
    expect(aGets).toEqual(['k35', 'k35'])
    // B, held by A's write, is asked by a third server: it refuses rather than ask A in turn
    const r = await call(`${B.url}/kv/_fence?key=k35`, { method: 'POST', headers: { 'x-kv-fence': 'read', 'x-chopper-generation': String(GEN), 'x-kv-fence-id': 'A:x:9', 'x-kv-fence-from': 'A' } })
    expect([r.status, r.body.error.code]).toEqual([409, 'CHOPPER_ERR_KEY_HELD'])
    expect(servers.A).toBeDefined()
  })

  test('a write admitted on a replica that is not the primary gets 421 CHOPPER_ERR_NOT_PRIMARY and writes nothing', async () => {
    const { nodes: { A, B, C } } = await replicaSet()
    await putText(kvUrl(A.url, 'k4'), 'v1')
    const r = await putText(kvUrl(B.url, 'k4'), 'by B')
    expect(r.status).toBe(421)
    expect(r.body.error.code).toBe('CHOPPER_ERR_NOT_PRIMARY')
    expect(r.body.error.message).toMatch(/writes go to A/)
    expect(r.headers['x-chopper-generation']).toBe(String(GEN))
    expect(r.headers['x-chopper-owner']).toBe('A') // the writer, for a router that cannot get the map
    expect(r.headers['x-kv-outcome']).toBeUndefined()
    expect((await call(kvUrl(C.url, 'k4'), { method: 'DELETE' })).body.error.code).toBe('CHOPPER_ERR_NOT_PRIMARY')
    expect(await env.h.dynamoClient(env.dynamo.endpoint).get(TABLE, 'k4')).toBe('v1')
    expect(await registryValue(B.registry, 'chopper_kv_not_primary_total')).toBe(1)
  })

  test('a replica that cannot be held fails the write with 503 before DynamoDB is touched; the other holds are aborted', async () => {
    const { nodes: { A, B }, servers } = await replicaSet({ options: { fenceTimeoutMs: 300 } })
    await putText(kvUrl(A.url, 'k5'), 'v1')
    servers.C.url = `http://127.0.0.1:${await freePort()}` // C is gone
    const r = await putText(kvUrl(A.url, 'k5'), 'v2')
    expect(r.status).toBe(503)
    expect(r.body.error.code).toBe('CHOPPER_ERR_REPLICA_UNAVAILABLE')
    expect(r.body.error.message).toMatch(/not applied.*C/)
    expect(await env.h.dynamoClient(env.dynamo.endpoint).get(TABLE, 'k5')).toBe('v1')
    expect(A.kv.service.holds.held('k5')).toBe(false)
    expect(B.kv.service.holds.held('k5')).toBe(false)
    expect(await registryValue(B.registry, 'chopper_kv_fences_received_total', { phase: 'abort' })).toBe(1)
    expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { phase: 'hold', outcome: 'failed' })).toBe(1)
    expect(await registryValue(A.registry, 'chopper_kv_replicated_write_failures_total', { op: 'put', phase: 'hold' })).toBe(1)
  })

  test('a replica that answers 421 (does not admit the slice now) counts as done', async () => {
    const refuse = (req, res) => {
      if (!isFence(req)) return false
      res.status(421).json({ error: { code: 'CHOPPER_ERR_NOT_OWNER', message: 'not mine' } })
      return true
    }
    const { nodes: { A, B }, servers } = await replicaSet({ intercept: { C: refuse } })
    expect(servers.C).toBeDefined()
    expect((await putText(kvUrl(A.url, 'k6'), 'v1')).status).toBe(204)
    expect((await get(B, 'k6')).body).toBe('v1')
    expect((await putText(kvUrl(A.url, 'k6'), 'v2')).status).toBe(204)
    expect((await get(B, 'k6')).body).toBe('v2')
    expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { phase: 'hold', outcome: 'not_admitted' })).toBe(2)
    expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { outcome: 'failed' })).toBe(0)
  })

  for (const [pipelineReleases, heldReads] of [[true, 'ask'], [false, 'ask'], [true, 'wait'], [false, 'wait']]) {
    // ask: the writer answers a held replica's read (its value: 'shared'); wait: DynamoDB does ('miss')
    const heldOutcome = heldReads === 'ask' ? 'shared' : 'miss'
    test(`a write is answered once DynamoDB and the primary hold it, before its releases; the primary serves it at once, a replica still held asks the writer or reads DynamoDB (pipelineReleases: ${pipelineReleases}, heldReads: ${heldReads})`, async () => {
      const hung = []
      let holdBack = true
      const hangReleases = (req, res) => {
        if (!holdBack || !isFence(req) || req.headers['x-kv-fence'] !== 'release') return false
        hung.push(res) // the release to C is still out
        return true
      }
      const { nodes: { A, C } } = await replicaSet({ options: { fenceTimeoutMs: 10000, pipelineReleases, heldReads }, intercept: { C: hangReleases } })
      try {
        const put = await putText(kvUrl(A.url, 'k20'), 'v1')
        expect(put.status).toBe(204)
        await pollUntil(() => hung.length === 1, { what: 'C to receive the release' })
        expect(A.kv.service.writer.releases.size).toBe(1) // answered while C's release is unanswered
        expect(A.kv.service.holds.held('k20')).toBe(false) // the primary lifted its own hold
        expect(await get(A, 'k20')).toEqual({ status: 200, body: 'v1', outcome: 'hit' })
        expect(C.kv.service.holds.held('k20')).toBe(true)
        expect(await get(C, 'k20')).toEqual({ status: 200, body: 'v1', outcome: heldOutcome })
        let second = null
        putText(kvUrl(A.url, 'k20'), 'v2').then((r) => { second = r })
        if (pipelineReleases) {
          // the key's next write does not wait: its hold overtakes the release still out
          await pollUntil(() => second !== null, { what: 'the second write, with the first release still out' })
          expect(second.status).toBe(204)
          await pollUntil(() => hung.length === 2, { what: 'C to receive the second release' })
          expect(await get(C, 'k20')).toEqual({ status: 200, body: 'v2', outcome: heldOutcome }) // held by both
        } else {
          // the key's next write waits for the release still out
          await pollUntil(() => A.kv.service.queue.size > 0, { what: 'the second write to queue' })
          expect(second).toBe(null)
        }
        holdBack = false
        for (const res of hung.splice(0)) res.socket.destroy() // the releases are retried, and arrive
        await pollUntil(() => second !== null, { what: 'the second write, after the first release' })
        expect(second.status).toBe(204)
        await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of v2' })
        expect(C.kv.service.holds.held('k20')).toBe(false)
        // Whichever release came last, C never serves v1 again: v2 cached, or a fence at v2 (a miss that fills v2).
        const after = await get(C, 'k20')
        expect(after.body).toBe('v2')
        expect(await get(C, 'k20')).toEqual({ status: 200, body: 'v2', outcome: 'hit' })
      } finally {
        for (const res of hung) res.socket.destroy()
      }
    })
  }

  test('a release that arrives while another write still holds the key caches its value, unserved while held; that write\'s release replaces it, its abort keeps it, its lapse drops it before the key is served again', async () => {
    const { nodes: { C } } = await replicaSet({ options: { heldReadWaitMs: 100 } }) // a held read gives up before a hold lapses
    const svc = C.kv.service
    svc.holds.lapseMs = 300 // holds placed from now on lapse soon (the option must exceed the write timeouts)
    const slice = sliceKey('k21')
    const text = (v) => ({ value: Buffer.from(v), contentType: 'text/plain' })
    // the next write's hold overtook w1's release
    await svc.hold('k21', slice, 'w1')
    await svc.hold('k21', slice, 'w2')
    await svc.release('k21', slice, 'w1', 5n, text('v5'))
    expect(svc.holds.held('k21')).toBe(true)
    const entry = await svc.cache.get('k21', slice)
    expect([entry.ver, entry.value.toString()]).toEqual([5n, 'v5'])
    expect((await get(C, 'k21')).outcome).toBe('miss') // held: not served from the cache
    // w2's release: the newer value
    await svc.release('k21', slice, 'w2', 6n, text('v6'))
    expect(await get(C, 'k21')).toEqual({ status: 200, body: 'v6', outcome: 'hit' })
    // releases in the opposite order: the newest value stays cached, a hit
    await svc.hold('k21', slice, 'w3')
    await svc.hold('k21', slice, 'w4')
    await svc.release('k21', slice, 'w4', 8n, text('v8'))
    await svc.release('k21', slice, 'w3', 7n, text('v7'))
    expect(await get(C, 'k21')).toEqual({ status: 200, body: 'v8', outcome: 'hit' })
    // an abort (not applied) keeps the value the earlier release cached
    await svc.hold('k21', slice, 'w5')
    await svc.hold('k21', slice, 'w6')
    await svc.release('k21', slice, 'w5', 9n, text('v9'))
    await svc.release('k21', slice, 'w6')
    expect(await get(C, 'k21')).toEqual({ status: 200, body: 'v9', outcome: 'hit' })
    // a lapse (outcome unknown): what was cached under the hold is dropped before the key is lifted
    await svc.hold('k21', slice, 'w7')
    await svc.hold('k21', slice, 'w8')
    await svc.release('k21', slice, 'w7', 10n, text('v10'))
    await pollUntil(() => !svc.holds.held('k21'), { what: 'w8\'s hold to lapse' })
    expect(await svc.cache.get('k21', slice)).toBeNull()
    expect(await registryValue(C.registry, 'chopper_kv_holds_lapsed_total')).toBe(1)
  })

  test('heldReads wait: a read of a held key waits for the release and is served what it cached; one still held after heldReadWaitMs reads DynamoDB; both counted', async () => {
    const { nodes: { C } } = await replicaSet({ options: { heldReads: 'wait', heldReadWaitMs: 100 } })
    const svc = C.kv.service
    const slice = sliceKey('k22')
    svc.holds.add('k22', 'w1')
    let read = null
    get(C, 'k22').then((r) => { read = r })
    await pollUntil(() => svc.holds.waiters.has('k22'), { what: 'the read to wait for the hold' })
    await svc.release('k22', slice, 'w1', 7n, { value: Buffer.from('v7'), contentType: 'text/plain' })
    await pollUntil(() => read !== null, { what: 'the read, once the hold was lifted' })
    expect(read).toEqual({ status: 200, body: 'v7', outcome: 'hit' })
    expect(await registryValue(C.registry, 'chopper_kv_held_reads_total', { outcome: 'lifted' })).toBe(1)
    // a hold nobody lifts: after heldReadWaitMs (100 ms) the read goes to DynamoDB, which has no k22
    svc.holds.add('k22', 'w2')
    expect((await get(C, 'k22')).status).toBe(404)
    expect(await registryValue(C.registry, 'chopper_kv_held_reads_total', { outcome: 'store' })).toBe(1)
    svc.holds.remove('k22', 'w2')
  })

  test('heldReads wait: a read waits only for the writes whose holds stood when it came: one released, it is served the released value although a later write holds the key; a read under that later hold waits for it', async () => {
    const { nodes: { C } } = await replicaSet({ options: { heldReads: 'wait', heldReadWaitMs: 2000 } })
    const svc = C.kv.service
    const slice = sliceKey('k25')
    svc.holds.add('k25', 'w1')
    const early = svc.get('k25', slice) // under w1 only
    svc.holds.add('k25', 'w2') // the next write's hold, before w1's release
    const late = svc.get('k25', slice) // under w1 and w2
    await svc.release('k25', slice, 'w1', 7n, { value: Buffer.from('v7'), contentType: 'text/plain' })
    expect(await early).toMatchObject({ value: Buffer.from('v7'), ver: 7n, cached: true })
    expect(svc.holds.held('k25')).toBe(true) // w2 still holds it
    expect(svc.holds.waiters.get('k25').size).toBe(1) // the late read still waits, for w2
    await svc.release('k25', slice, 'w2', 8n, { value: Buffer.from('v8'), contentType: 'text/plain' })
    expect(await late).toMatchObject({ value: Buffer.from('v8'), ver: 8n, cached: true })
    expect(await registryValue(C.registry, 'chopper_kv_held_reads_total', { outcome: 'lifted' })).toBe(2)
    expect(await registryValue(C.registry, 'chopper_kv_held_reads_total', { outcome: 'store' })).toBe(0)
  })

  test('heldReads wait: heldReadWaitMs counts from the hold\'s arrival, so a read under a hold that old reads DynamoDB without waiting, and a newer hold is waited for again', async () => {
    const { nodes: { C } } = await replicaSet({ options: { heldReads: 'wait', heldReadWaitMs: 300 } })
    const svc = C.kv.service
    const slice = sliceKey('k24')
    svc.holds.add('k24', 'w1') // a hold nobody lifts in time (a stalled write)
    const first = svc.get('k24', slice)
    expect(svc.holds.waiters.has('k24')).toBe(true) // it waits for the release
    expect(await first).toBeNull() // then DynamoDB, which has no k24
    expect(svc.holds.age('k24')).toBeGreaterThanOrEqual(299)
    const later = svc.get('k24', slice)
    expect(svc.holds.waiters.has('k24')).toBe(false) // the hold is heldReadWaitMs old: no wait at all
    expect(await later).toBeNull()
    expect(svc.holds.held('k24')).toBe(true)
    expect(await registryValue(C.registry, 'chopper_kv_held_reads_total', { outcome: 'store' })).toBe(2)
    // a newer write's hold: the next read waits for it again, and is served once it is lifted
    svc.holds.add('k24', 'w2')
    expect(svc.holds.age('k24')).toBeLessThan(300)
    const next = svc.get('k24', slice)
    expect(svc.holds.waiters.has('k24')).toBe(true)
    svc.holds.remove('k24', 'w1')
    svc.holds.remove('k24', 'w2')
    expect(await next).toBeNull()
    expect(await registryValue(C.registry, 'chopper_kv_held_reads_total', { outcome: 'lifted' })).toBe(1)
    expect(svc.holds.age('k24')).toBe(-1)
  })

  test('heldReads wait: a hold older than heldReadWaitMs (a lost release) is waited for by no read: a read under it and a fresh hold waits for the fresh one\'s release alone, then reads DynamoDB, not its cache', async () => {
    const { nodes: { A, C } } = await replicaSet({ options: { heldReads: 'wait', heldReadWaitMs: 5000, fenceTimeoutMs: 10000 } })
    expect((await putText(kvUrl(A.url, 'k47'), 'v1')).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'v1\'s releases' })
    const svc = C.kv.service
    const slice = sliceKey('k47')
    svc.holds.add('k47', 'lost')
    svc.holds.keys.get('k47').get('lost').at -= 6000 // taken 6 s ago, never lifted
    svc.holds.add('k47', 'fresh')
    let settled = false
    const read = svc.get('k47', slice).finally(() => { settled = true })
    expect(svc.holds.waiters.has('k47')).toBe(true) // it waits for the fresh hold...
    svc.holds.remove('k47', 'fresh')
    // ...and no longer once it is lifted (not for the rest of heldReadWaitMs)
    await pollUntil(() => settled, { timeoutMs: 2000, what: 'the read to end with the fresh hold\'s release' })
    expect(await read).toMatchObject({ value: Buffer.from('v1'), cached: false }) // DynamoDB: the lost hold still stands
    expect(svc.holds.held('k47')).toBe(true)
    expect(await registryValue(C.registry, 'chopper_kv_held_reads_total', { outcome: 'store' })).toBe(1)
  })

  test('heldReads wait: reads of a key held past heldReadWaitMs share DynamoDB reads issued after they arrived: a burst costs fewer store reads than reads, and the others are answered "shared"', async () => {
    const { nodes: { A, C } } = await replicaSet({ options: { heldReads: 'wait', heldReadWaitMs: 100 } })
    expect((await putText(kvUrl(A.url, 'k23'), 'v1')).status).toBe(204)
    const svc = C.kv.service
    const storeGets = []
    const get0 = svc.store.get.bind(svc.store)
    svc.store.get = (key) => { storeGets.push(key); return get0(key) }
    svc.holds.add('k23', 'w1') // a hold nobody lifts (as when the release is slow to come)
    const reads = await Promise.all(Array.from({ length: 12 }, () => get(C, 'k23')))
    svc.holds.remove('k23', 'w1')
    expect(reads.map((r) => [r.status, r.body])).toEqual(Array(12).fill([200, 'v1']))
    // each read waited heldReadWaitMs (100 ms) on its own timer, so they reach the store at about
    // the same time: the first starts a read, the ones arriving while it runs share the next
    expect(storeGets.length).toBeGreaterThanOrEqual(1)
    expect(storeGets.length).toBeLessThan(12)
    const shared = reads.filter((r) => r.outcome === 'shared').length
    expect(shared).toBe(12 - storeGets.length)
    expect(reads.filter((r) => r.outcome === 'miss').length).toBe(storeGets.length)
    expect(await registryValue(C.registry, 'chopper_kv_shared_reads_total', { with: 'held' })).toBe(shared)
    expect(await registryValue(C.registry, 'chopper_kv_held_reads_total', { outcome: 'store' })).toBe(12)
  })

  test('a replica that took the hold but answered the release 421 (it stopped admitting the slice in between) gets it again as a lapse once it admits the slice again: its entry is dropped and its hold lifted long before the hold would lapse', async () => {
    let refuse = 0 // from v2 on, C answers the release and the first late lift 421, as a server no longer admitting the slice does
    const notNow = (req, res) => {
      const phase = req.headers['x-kv-fence']
      if (!isFence(req) || (phase !== 'release' && phase !== 'lapse') || refuse === 0) return false
      refuse--
      res.writeHead(421, { 'content-type': 'application/json' })
      res.end('{"error":{"code":"CHOPPER_ERR_NOT_OWNER","message":"not now"}}')
      return true
    }
    const { nodes: { A, B, C } } = await replicaSet({ options: { heldReadWaitMs: 100 }, intercept: { C: notNow } })
    expect((await putText(kvUrl(A.url, 'k26'), 'v1')).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'v1\'s releases' })
    expect(await get(C, 'k26')).toEqual({ status: 200, body: 'v1', outcome: 'hit' }) // v1's release cached it...
    refuse = 2
    expect((await putText(kvUrl(A.url, 'k26'), 'v2')).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'v2\'s releases' })
    expect(B.kv.service.holds.held('k26')).toBe(false)
    expect(C.kv.service.holds.held('k26')).toBe(true) // ...but v2's release was refused: held, v1 cached
    // sent again after 250 ms (refused), then after 500 ms more (taken)
    await pollUntil(() => !C.kv.service.holds.held('k26'), { timeoutMs: 5000, what: 'C\'s hold to be lifted by a late lift' })
    expect(refuse).toBe(0)
    // C lifts its hold while handling the lapse, before A has its answer: A counts it once the answer is in
    await pollUntil(async () => (await registryValue(A.registry, 'chopper_kv_late_lifts_total', { phase: 'release', outcome: 'ok' })) === 1, { what: 'A to count the late lift' })
    expect(await registryValue(C.registry, 'chopper_kv_fences_received_total', { phase: 'lapse' })).toBe(1)
    // the lapse dropped C's entry (v1): it reads DynamoDB, then caches v2
    expect(await get(C, 'k26')).toEqual({ status: 200, body: 'v2', outcome: 'miss' })
    expect(await get(C, 'k26')).toEqual({ status: 200, body: 'v2', outcome: 'hit' })
    expect(A.kv.service.writer.lateLifts.size).toBe(0)
    // a lapse for a hold no longer standing leaves the entry alone
    await C.kv.service.lapse('k26', sliceKey('k26'), 'not-a-hold')
    expect(await get(C, 'k26')).toEqual({ status: 200, body: 'v2', outcome: 'hit' })
  })

  test('a lapse (a late release) leaves no fill that began under its hold in the cache: that fill may have read DynamoDB before the write landed', async () => {
    const { nodes: { A, C } } = await replicaSet({ options: { heldReadWaitMs: 2000 } })
    expect((await putText(kvUrl(A.url, 'k29'), 'v1')).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'v1\'s releases' })
    const svc = C.kv.service
    const slice = sliceKey('k29')
    await svc.cache.del('k29', slice)
    svc.holds.add('k29', 'w0')
    const read = svc.get('k29', slice) // waits for w0
    svc.holds.add('k29', 'w1') // a later write's hold: the read does not wait for it
    const entered = gate()
    const resume = gate()
    const realGet = svc.store.get.bind(svc.store)
    svc.store.get = async (k) => { entered.open(); await resume.p; return realGet(k) }
    svc.holds.remove('k29', 'w0') // the read goes on: a miss, filled from DynamoDB
    await entered.p
    await svc.lapse('k29', slice, 'w1') // w1's release, sent late
    expect(svc.holds.held('k29')).toBe(false)
    resume.open()
    expect((await read).value.toString()).toBe('v1')
    svc.store.get = realGet
    expect(await svc.cache.get('k29', slice)).toBeNull() // the fill was not cached
  })

  test('a release for a hold taken before this replica lost the slice (it regained it since) lifts the hold as a lapse, without caching the value: writes while it was out did not hold it', async () => {
    const { nodes: { C } } = await replicaSet({ options: { heldReadWaitMs: 100 } })
    const svc = C.kv.service
    const slice = sliceKey('k30')
    const all = [{ start: 0, end: KEYSPACE_SIZE }]
    svc.hold('k30', slice, 'w1', { from: 'A' })
    svc.onRelease(all)
    svc.onAcquire(all)
    await pollUntil(() => svc.drops.size === 0, { what: 'the range drop' })
    await svc.release('k30', slice, 'w1', 7n, { value: Buffer.from('v7'), contentType: 'text/plain' })
    expect(svc.holds.held('k30')).toBe(false)
    expect(await svc.cache.get('k30', slice)).toBeNull()
    // a hold taken while it admits the slice is released as usual: the value is cached
    svc.hold('k30', slice, 'w2', { from: 'A' })
    await svc.release('k30', slice, 'w2', 8n, { value: Buffer.from('v8'), contentType: 'text/plain' })
    expect(svc.holds.held('k30')).toBe(false)
    expect((await svc.cache.get('k30', slice)).ver).toBe(8n)
  })

  test('a late lift the replica refuses for good (a 4xx other than 421: it no longer lists this writer) is not sent again', async () => {
    const refuse = (req, res) => {
      const phase = req.headers['x-kv-fence']
      if (!isFence(req) || (phase !== 'release' && phase !== 'lapse')) return false
      const status = phase === 'release' ? 421 : 400
      res.writeHead(status, { 'content-type': 'application/json' })
      res.end('{"error":{"code":"CHOPPER_ERR_INVALID_ARG","message":"not a replica"}}')
      return true
    }
    const { nodes: { A, C } } = await replicaSet({ ids: ['A', 'C'], intercept: { C: refuse } })
    expect((await putText(kvUrl(A.url, 'k31'), 'v1')).status).toBe(204)
    await pollUntil(async () => (await registryValue(A.registry, 'chopper_kv_late_lifts_total', { phase: 'release', outcome: 'refused' })) === 1, { timeoutMs: 5000, what: 'the late lift to be refused' })
    expect(A.kv.service.writer.lateLifts.size).toBe(0)
    expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { phase: 'lapse', outcome: 'failed' })).toBe(1)
    expect(C.kv.service.holds.held('k31')).toBe(true) // left to its own lapse
  })

  test('a writer the replica\'s map no longer lists may still lift the holds it took there while listed: its release is taken as a lapse (entry dropped, not cached), its abort as an abort; counted. Anything else from it is refused', async () => {
    // Maps reach members in any order: C installs one without A between A's hold and its release.
    let cLists = ['A', 'B', 'C']
    const { nodes: { A, B, C } } = await replicaSet({ options: { heldReadWaitMs: 2000 }, listed: (id) => (id === 'C' ? cLists : ['A', 'B', 'C']) })
    expect((await putText(kvUrl(A.url, 'k45'), 'v1')).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'v1\'s releases' })
    expect(await get(C, 'k45')).toEqual({ status: 200, body: 'v1', outcome: 'hit' })
    const stall = stallPutsAfterLanding(A)
    const write = putText(kvUrl(A.url, 'k45'), 'v2')
    await stall.landed // C took the hold while it listed A
    expect(C.kv.service.holds.held('k45')).toBe(true)
    cLists = ['B', 'C']
    stall.resume()
    expect((await write).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'v2\'s releases' })
    stall.restore()
    expect(C.kv.service.holds.held('k45')).toBe(false) // lifted at once, not after holdLapseMs
    expect(await registryValue(C.registry, 'chopper_kv_unlisted_lifts_total', { phase: 'release' })).toBe(1)
    expect(await registryValue(A.registry, 'chopper_kv_late_lifts_total')).toBe(0) // nothing left to send again
    // taken as a lapse: C's entry was dropped, so it reads DynamoDB rather than caching A's value
    expect(await get(C, 'k45')).toEqual({ status: 200, body: 'v2', outcome: 'miss' })
    expect(B.kv.service.holds.held('k45')).toBe(false)
    expect(await get(B, 'k45')).toEqual({ status: 200, body: 'v2', outcome: 'hit' }) // B still lists A: cached from the release

    const fence = (headers) => call(`${C.url}/kv/_fence?key=k46`, { method: 'POST', headers: { 'x-chopper-generation': String(GEN), ...headers } })
    const refused = async (headers) => {
      const r = await fence(headers)
      return [r.status, r.body.error && r.body.error.code]
    }
    // an unlisted writer cannot take a new hold...
    expect(await refused({ 'x-kv-fence': 'hold', 'x-kv-fence-id': 'A:y:1', 'x-kv-fence-from': 'A' })).toEqual([400, 'CHOPPER_ERR_INVALID_ARG'])
    // ...nor lift a hold that is not its own, or that does not stand
    cLists = ['A', 'B', 'C']
    expect((await fence({ 'x-kv-fence': 'hold', 'x-kv-fence-id': 'B:y:1', 'x-kv-fence-from': 'B' })).status).toBe(204)
    expect((await fence({ 'x-kv-fence': 'hold', 'x-kv-fence-id': 'A:y:2', 'x-kv-fence-from': 'A' })).status).toBe(204)
    cLists = ['C']
    expect(await refused({ 'x-kv-fence': 'abort', 'x-kv-fence-id': 'B:y:1', 'x-kv-fence-from': 'A' })).toEqual([400, 'CHOPPER_ERR_INVALID_ARG'])
    expect(await refused({ 'x-kv-fence': 'abort', 'x-kv-fence-id': 'A:y:9', 'x-kv-fence-from': 'A' })).toEqual([400, 'CHOPPER_ERR_INVALID_ARG'])
    expect(C.kv.service.holds.has('k46', 'B:y:1')).toBe(true)
    // its own standing holds it lifts: an abort, and a lapse
    expect((await fence({ 'x-kv-fence': 'abort', 'x-kv-fence-id': 'A:y:2', 'x-kv-fence-from': 'A' })).status).toBe(204)
    expect((await fence({ 'x-kv-fence': 'lapse', 'x-kv-fence-id': 'B:y:1', 'x-kv-fence-from': 'B' })).status).toBe(204)
    expect(C.kv.service.holds.held('k46')).toBe(false)
    expect(await registryValue(C.registry, 'chopper_kv_unlisted_lifts_total', { phase: 'abort' })).toBe(1)
    expect(await registryValue(C.registry, 'chopper_kv_unlisted_lifts_total', { phase: 'lapse' })).toBe(1)
  })

  test('late lifts stop once the hold would have lapsed anyway, counted as expired; and on close', async () => {
    const slowRelease = gate() // k29's release is answered (421) only once this opens
    const refuseAll = (req, res) => {
      if (!isFence(req) || (req.headers['x-kv-fence'] !== 'release' && req.headers['x-kv-fence'] !== 'lapse')) return false
      const answer = () => {
        res.writeHead(421, { 'content-type': 'application/json' })
        res.end('{"error":{"code":"CHOPPER_ERR_NOT_OWNER","message":"not now"}}')
      }
      if (req.query.key === 'k29') slowRelease.p.then(answer)
      else answer()
      return true
    }
    const { nodes: { A, C } } = await replicaSet({ ids: ['A', 'C'], intercept: { C: refuseAll } })
    A.kv.service.holds.lapseMs = 1200 // the writer's view of how long holds last (the option must exceed the write timeouts)
    expect((await putText(kvUrl(A.url, 'k27'), 'v1')).status).toBe(204)
    // attempts after 250, 750 ms (the next would be past 1200 ms): then expired
    await pollUntil(async () => (await registryValue(A.registry, 'chopper_kv_late_lifts_total', { phase: 'release', outcome: 'expired' })) === 1, { timeoutMs: 5000, what: 'the late lifts to expire' })
    expect(A.kv.service.writer.lateLifts.size).toBe(0)
    expect(C.kv.service.holds.held('k27')).toBe(true) // left to its own lapse
    // a late lift pending at close is cancelled
    A.kv.service.holds.lapseMs = 60000
    expect((await putText(kvUrl(A.url, 'k28'), 'v1')).status).toBe(204)
    await pollUntil(() => A.kv.service.writer.lateLifts.size === 1, { what: 'a late lift to be scheduled' })
    // and a release still on its way at close schedules none when it is refused
    expect((await putText(kvUrl(A.url, 'k29'), 'v1')).status).toBe(204)
    expect(A.kv.service.writer.releases.size).toBe(1)
    const settled = A.kv.service.settle()
    slowRelease.open()
    await settled
    expect(A.kv.service.writer.lateLifts.size).toBe(0)
  })

  for (const heldReads of ['ask', 'wait']) {
    test(`a release that never arrives: the write is acknowledged, counted, and that replica asks the writer or reads DynamoDB until its hold lapses (heldReads: ${heldReads})`, async () => {
      const dropRelease = (req) => {
        if (!isFence(req) || req.headers['x-kv-fence'] !== 'release') return false
        req.socket.destroy()
        return true
      }
      const { nodes: { A, C } } = await replicaSet({ options: { fenceTimeoutMs: 300, heldReads, heldReadWaitMs: 100 }, intercept: { C: dropRelease } })
      await putText(kvUrl(A.url, 'k7'), 'v1')
      expect(C.kv.service.holds.held('k7')).toBe(true)
      expect((await putText(kvUrl(A.url, 'k7'), 'v2')).status).toBe(204)
      // answered before its release, which fails after fenceTimeoutMs
      await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release of v2 to give up' })
      expect(await registryValue(A.registry, 'chopper_kv_replicated_write_failures_total', { op: 'put', phase: 'release' })).toBe(2)
      for (let i = 0; i < 2; i++) expect(await get(C, 'k7')).toEqual({ status: 200, body: 'v2', outcome: heldReads === 'ask' ? 'shared' : 'miss' })
    })
  }

  test('a write DynamoDB refuses as fenced lifts its holds at once', async () => {
    const { nodes: { A, B }, servers } = await replicaSet({ ids: ['A', 'B'] })
    const key = 'k8'
    await A.kv.service.put(key, sliceKey(key), Buffer.from('gen 9'), 'text/plain', { generation: GEN + 4, replicas: [{ id: 'B', url: servers.B.url }] })
    const r = await putText(kvUrl(A.url, key), 'gen 5')
    expect(r.body.error.code).toBe('CHOPPER_ERR_FENCED_WRITE')
    expect(B.kv.service.holds.held(key)).toBe(false)
    expect(await registryValue(B.registry, 'chopper_kv_fences_received_total', { phase: 'abort' })).toBe(1)
    expect((await get(B, key)).body).toBe('gen 9')
  })

  test('the fence route refuses incomplete or inconsistent requests, and counts them', async () => {
    const { nodes: { B } } = await replicaSet()
    const fence = (headers) => call(`${B.url}/kv/_fence?key=k9`, { method: 'POST', headers })
    const ok = { 'x-kv-fence': 'hold', 'x-chopper-generation': String(GEN), 'x-kv-fence-id': 'A:x:1', 'x-kv-fence-from': 'A' }
    const bad = [
      {},
      { ...ok, 'x-chopper-generation': undefined },
      { ...ok, 'x-kv-fence-from': 'stranger' },
      { ...ok, 'x-kv-fence-from': 'B' },
      { ...ok, 'x-kv-fence': 'wipe' },
      { ...ok, 'x-kv-fence': 'release' }, // no version
      { ...ok, 'x-kv-fence': 'release', 'x-kv-version': '99' + '0'.repeat(16) }, // generation 99, not 5
      { ...ok, 'x-kv-held-reads': 'maybe' },
      { ...ok, 'x-kv-fence': 'abort', 'x-kv-held-reads': 'ask' }
    ]
    for (const headers of bad) {
      for (const k of Object.keys(headers)) if (headers[k] === undefined) delete headers[k]
      const r = await fence(headers)
      expect([r.status, r.body.error.code]).toEqual([400, 'CHOPPER_ERR_INVALID_ARG'])
    }
    expect(await registryValue(B.registry, 'chopper_kv_fences_refused_total')).toBe(bad.length)
    expect(B.kv.service.holds.size).toBe(0)
    const held = await fence(ok)
    expect([held.status, held.headers['x-kv-outcome']]).toEqual([204, 'fence'])
    expect(B.kv.service.holds.held('k9')).toBe(true)
    const version = (BigInt(GEN) * 10n ** 16n + 1n).toString()
    expect((await fence({ ...ok, 'x-kv-fence': 'release', 'x-kv-version': version })).status).toBe(204)
    expect(B.kv.service.holds.held('k9')).toBe(false)
  })

  test('a release of a generation this replica has not installed yet waits for that map (pushes arrive in any order); refused if it never comes', async () => {
    // B's guard admits under GEN while the writer already wrote under GEN + 1
    const { nodes: { B }, servers } = await replicaSet({ admitGeneration: () => GEN })
    const fence = (headers) => call(`${B.url}/kv/_fence?key=k13`, { method: 'POST', headers })
    const from = { 'x-kv-fence-id': 'A:x:2', 'x-kv-fence-from': 'A' }
    const next = { ...from, 'x-chopper-generation': String(GEN + 1) }
    expect((await fence({ ...next, 'x-kv-fence': 'hold' })).status).toBe(204)
    const release = fence({ ...next, 'x-kv-fence': 'release', 'x-kv-version': (BigInt(GEN + 1) * 10n ** 16n + 1n).toString() })
    B.kv.onAssignment({ assignment: { generation: GEN + 1, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['A', 'B', 'C'] }], servers } })
    expect((await release).status).toBe(204)
    expect(B.kv.service.holds.held('k13')).toBe(false)
    expect(await registryValue(B.registry, 'chopper_kv_fences_refused_total')).toBe(0)
    // a generation B never installs: refused once the wait (2 s) is over, and the hold stays
    const later = { ...from, 'x-kv-fence-id': 'A:x:3', 'x-chopper-generation': String(GEN + 9) }
    expect((await fence({ ...later, 'x-kv-fence': 'hold' })).status).toBe(204)
    const r = await fence({ ...later, 'x-kv-fence': 'release', 'x-kv-version': (BigInt(GEN + 9) * 10n ** 16n + 1n).toString() })
    expect([r.status, r.body.error.code]).toEqual([400, 'CHOPPER_ERR_INVALID_ARG'])
    expect(r.body.error.message).toMatch(/has not installed/)
    expect(B.kv.service.holds.held('k13')).toBe(true)
    expect(await registryValue(B.registry, 'chopper_kv_fences_refused_total')).toBe(1)
  })

  test('without req.chopperServers the URLs come from the assignment the hooks saw; before that, the write fails safely', async () => {
    const { nodes: { A, B }, servers } = await replicaSet({ ids: ['A', 'B'], withServers: false, options: { fenceTimeoutMs: 200 } })
    const before = await putText(kvUrl(A.url, 'k10'), 'v0')
    expect([before.status, before.body.error.code]).toEqual([503, 'CHOPPER_ERR_REPLICA_UNAVAILABLE'])
    expect(before.body.error.message).toMatch(/no URL known for server B/)
    const all = [{ start: 0, end: KEYSPACE_SIZE }]
    const assignment = { generation: GEN, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['A', 'B'] }], servers }
    A.kv.onAcquire(all, { generation: GEN, assignment })
    B.kv.onAcquire(all, { generation: GEN, assignment })
    expect((await putText(kvUrl(A.url, 'k10'), 'v1')).status).toBe(204)
    expect(await get(B, 'k10')).toEqual({ status: 200, body: 'v1', outcome: 'hit' })
    expect((await putText(kvUrl(A.url, 'k10'), 'v2')).status).toBe(204)
    expect((await get(B, 'k10')).body).toBe('v2')
  })
  test('a replica that never answers is no longer waited for once a newer map settles the slice without it: the write lands well before fenceTimeoutMs', async () => {
    const hung = []
    const hangHolds = (req, res) => {
      if (!isFence(req) || req.headers['x-kv-fence'] !== 'hold') return false
      hung.push(res) // a host gone without a reset: no answer, no error
      return true
    }
    const { nodes: { A, B }, servers } = await replicaSet({ options: { fenceTimeoutMs: 10000 }, intercept: { C: hangHolds } })
    try {
      const all = { start: 0, end: KEYSPACE_SIZE }
      const t0 = Date.now()
      const write = putText(kvUrl(A.url, 'k11'), 'v1')
      await pollUntil(() => hung.length > 0, { what: 'C to receive the hold' })
      // A handoff that drops C is not enough while it is in progress: C may not have installed it yet
      A.kv.onAssignment({ assignment: { generation: GEN + 1, slices: [{ ...all, servers: ['A', 'B'], moving: true }], servers } })
      // the grant: C acknowledged the revoke or its lease lapsed, so it serves nothing of the slice
      A.kv.onAssignment({ assignment: { generation: GEN + 2, slices: [{ ...all, servers: ['A', 'B'] }], servers } })
      const r = await write
      expect(r.status).toBe(204)
      expect(Date.now() - t0).toBeLessThan(10000)
      expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { phase: 'hold', outcome: 'dropped' })).toBe(1)
      expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { outcome: 'failed' })).toBe(0)
      expect(await registryValue(A.registry, 'chopper_kv_replicated_write_failures_total', { op: 'put', phase: 'hold' })).toBe(0)
      // B was held and released as usual; C, never held, is not released either
      expect(await get(B, 'k11')).toEqual({ status: 200, body: 'v1', outcome: 'hit' })
      // A counts the release once B's answer is in (B lifted its hold before answering)
      await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release' })
      expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { phase: 'release', outcome: 'ok' })).toBe(1)
      expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { phase: 'release', outcome: 'dropped' })).toBe(0)
    } finally {
      for (const res of hung) res.socket.destroy()
    }
  })

  test('a write admitted under the map that drops a replica, or a newer one, never skips a replica still listed', async () => {
    const { nodes: { A }, servers } = await replicaSet({ options: { fenceTimeoutMs: 300 } })
    const all = { start: 0, end: KEYSPACE_SIZE }
    // a map no newer than the write's generation, without C: not evidence that C stopped serving
    A.kv.onAssignment({ assignment: { generation: GEN, slices: [{ ...all, servers: ['A', 'B'] }], servers: { A: servers.A, B: servers.B } } })
    servers.C.url = `http://127.0.0.1:${await freePort()}` // C is gone
    const r = await putText(kvUrl(A.url, 'k12'), 'v1')
    expect([r.status, r.body.error.code]).toEqual([503, 'CHOPPER_ERR_REPLICA_UNAVAILABLE'])
    expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { phase: 'hold', outcome: 'dropped' })).toBe(0)
    expect(await env.h.dynamoClient(env.dynamo.endpoint).get(TABLE, 'k12')).toBe(null)
  })

  /**
   * Real app servers A (primary) and B (shard guard included) of one slice
   * behind a real front end, with `key` written once; the test plays the
   * controller: `dropB()` pushes the map without B to A and the front end.
   */
  async function frontedPair (key, fenceTimeoutMs) {
    const opts = { dynamoEndpoint: env.dynamo.endpoint, table: TABLE, redisUrl: env.redis.url, fenceTimeoutMs }
    const a = await env.h.appServer('A', opts)
    const b = await env.h.appServer('B', opts)
    const { url: feUrl, controlUrl: feControl } = await env.h.frontend()
    const both = { generation: 100, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['A', 'B'] }], servers: { A: { url: a.url }, B: { url: b.url } } }
    await push([a.controlUrl, b.controlUrl, feControl], both)
    expect((await putText(`${feUrl}/kv?key=${key}`, 'v1')).status).toBe(204)
    const dropB = () => push([a.controlUrl, feControl], { generation: 101, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['A'] }], servers: { A: { url: a.url } } })
    const read = async () => { const r = await call(`${feUrl}/kv?key=${key}`); return [r.status, r.body] }
    return { a, b, feUrl, dropB, read }
  }

  test('heldReads ask, through the shard guard: a server only joining the slice answers a read fence 421 at once (not held for the grant); one that admits it answers it', async () => {
    const opts = { dynamoEndpoint: env.dynamo.endpoint, table: TABLE, redisUrl: env.redis.url, heldReads: 'ask' }
    const a = await env.h.appServer('A', opts)
    const b = await env.h.appServer('B', opts)
    const servers = { A: { url: a.url }, B: { url: b.url } }
    const all = { start: 0, end: KEYSPACE_SIZE }
    await push([a.controlUrl, b.controlUrl], { generation: 100, slices: [{ ...all, servers: ['B'] }], servers })
    // A joins the slice: B keeps serving it until the grant
    await push([a.controlUrl, b.controlUrl], { generation: 101, slices: [{ ...all, servers: ['B', 'A'], moving: true, holders: ['B'] }], servers })
    const ask = (node, from) => call(`${node.url}/kv/_fence?key=k40`, { method: 'POST', headers: { 'x-kv-fence': 'read', 'x-chopper-generation': '101', 'x-kv-fence-id': `${from}:x:1`, 'x-kv-fence-from': from } })
    const t0 = Date.now()
    const joining = await ask(a, 'B')
    expect([joining.status, joining.body.error.code]).toEqual([421, 'CHOPPER_ERR_NOT_OWNER'])
    expect(Date.now() - t0).toBeLessThan(1000) // the guard would hold it up to holdMs (2 s)
    const holder = await ask(b, 'A')
    expect([holder.status, holder.body.error.code]).toEqual([404, 'CHOPPER_ERR_NOT_FOUND'])
  })

  test('through the shard guard: a write waiting on a dead replica lands as soon as the map that drops it is installed', async () => {
    // fenceTimeoutMs is long, so only the new map can end the wait in time.
    const { a, b, feUrl, dropB, read } = await frontedPair('k2', 10000)
    await b.server.close() // B dies; the controller has not noticed yet
    const t0 = Date.now()
    const write = putText(`${feUrl}/kv?key=k2`, 'v2')
    await pollUntil(() => a.kv.service.queue.size > 0, { what: 'the primary to start the write (holding B)' })
    await dropB()
    const r = await write
    expect(r.status).toBe(204)
    expect(Date.now() - t0).toBeLessThan(10000)
    expect(await registryValue(a.registry, 'chopper_kv_fences_sent_total', { phase: 'hold', outcome: 'dropped' })).toBe(1)
    expect(await registryValue(a.registry, 'chopper_kv_replicated_write_failures_total', { phase: 'hold' })).toBe(0)
    expect(await read()).toEqual([200, 'v2'])
  })

  test('a write whose replica died is held by the front end until the map drops that replica, then applied (no 503)', async () => {
    const { a, b, feUrl, dropB, read } = await frontedPair('k1', 300)
    await b.server.close() // B dies; the controller has not noticed yet
    const write = putText(`${feUrl}/kv?key=k1`, 'v2')
    await pollUntil(async () => (await registryValue(a.registry, 'chopper_kv_replicated_write_failures_total', { phase: 'hold' })) > 0, { what: 'the primary to find B unreachable' })
    // The controller drops B (its lease lapsed): the held write goes through on the new map.
    await dropB()
    expect((await write).status).toBe(204)
    expect(await read()).toEqual([200, 'v2'])
  })
})
