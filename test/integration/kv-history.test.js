'use strict'

const { Registry } = require('prom-client')
const { Pool } = require('undici')
const { createController } = require('../../controller')
const { createFrontend } = require('../../frontend')
const { loadApp, startApp } = require('../../apps')
const { startDynalite, spawnRedis } = require('../../apps/kv-cache/embedded')
const { sliceKey } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { createRng } = require('../../loadgen/prng')
const { HistoryRecorder, checkLinearizability } = require('../../history')

/**
 * kv-cache under slice moves, concurrent gets and puts, and a Redis restart,
 * with every operation recorded and checked for per-key linearizability
 * (the short version; `npm run chaos` runs >= 1,000 moves). A planted stale
 * read (a cache that trusts entries across ownership changes) is caught.
 */

const IDS = ['app-1', 'app-2', 'app-3']
const KEYS = Array.from({ length: 16 }, (_, i) => `hk-${i}`)

async function runHistory ({ moves, plantStaleRead = false, restartRedisAt = -1, seed = 1 }) {
  const closers = []
  try {
    const dynamo = await startDynalite()
    closers.push(() => dynamo.close())
    const controller = createController({ periodMs: 600000, startupFenceMs: 0 })
    await controller.start()
    closers.push(() => controller.close())
    const kv = loadApp('kv-cache')
    const redises = []
    const servers = []
    for (const id of IDS) {
      const redis = await spawnRedis()
      if (!redis) throw new Error('redis-server is not installed (apt-get install redis-server; .ci/run does it)')
      redises.push(redis)
      closers.push(() => redises[IDS.indexOf(id)].close())
      const s = await startApp(kv, {
        id,
        appOptions: { dynamoEndpoint: dynamo.endpoint, table: 'kv-history', redisUrl: redis.url },
        registry: new Registry(),
        controllerUrl: controller.url
      })
      closers.push(() => s.close())
      if (plantStaleRead) {
        // The planted bug: trust cache entries across ownership changes, and keep them around.
        s.instance.service.epochs.trusts = () => true
        s.instance.service.cache.dropRanges = async () => 0
      }
      servers.push(s)
    }
    expect(servers.every((s) => s.server.guard.consistency === 'strict')).toBe(true)
    const fes = []
    for (let i = 0; i < 2; i++) {
      const fe = createFrontend({ controllerUrl: controller.url, pullIntervalMs: 0 })
      await fe.start()
      closers.push(() => fe.close())
      fes.push(fe)
    }
    await pollUntil(async () => (await controller.settled(100)) && fes.every((fe) => fe.table.generation === controller.assignment.generation), { what: 'cluster settled' })
    const pools = fes.map((fe) => new Pool(fe.urls.url, { connections: 8 }))
    closers.push(() => Promise.all(pools.map((p) => p.close())))

    const recorder = new HistoryRecorder()
    const run = { stop: false }
    const clients = Array.from({ length: 8 }, async (_, c) => {
      const rng = createRng(seed * 100 + c)
      while (!run.stop) {
        const key = KEYS[rng.int(KEYS.length)]
        const pool = pools[c % 2]
        if (rng.next() < 0.35) {
          const value = recorder.nextValue(`c${c}`)
          const h = recorder.invoke({ client: `c${c}`, key, op: 'put', value })
          try {
            const { statusCode, body } = await pool.request({ method: 'PUT', path: `/kv?key=${key}`, headers: { 'content-type': 'text/plain' }, body: value })
            const text = await body.text()
            // A fenced write certainly did not apply; any other failure may have.
            const fenced = statusCode !== 204 && /CHOPPER_ERR_FENCED_WRITE/.test(text)
            recorder.complete(h, { ok: statusCode === 204 ? true : fenced ? 'failed' : false })
          } catch {
            recorder.complete(h, { ok: false })
          }
        } else {
          const h = recorder.invoke({ client: `c${c}`, key, op: 'get' })
          try {
            const { statusCode, body } = await pool.request({ method: 'GET', path: `/kv?key=${key}` })
            const text = await body.text()
            if (statusCode === 200) recorder.complete(h, { ok: true, value: text })
            else if (statusCode === 404) recorder.complete(h, { ok: true, value: null })
            else recorder.complete(h, { ok: false })
          } catch {
            recorder.complete(h, { ok: false })
          }
        }
      }
    })

    const rng = createRng(seed)
    try {
      for (let i = 0; i < moves; i++) {
        if (i === restartRedisAt) {
          // Restart app-2's Redis on the same port: its client reconnects; what it cached is distrusted.
          const port = redises[1].port
          await redises[1].close()
          redises[1] = await spawnRedis({ port })
        }
        const key = KEYS[rng.int(KEYS.length)]
        const owner = controller.assignment.slices.find((s) => s.end > sliceKey(key)).servers[0]
        const others = IDS.filter((id) => id !== owner)
        controller.moveSlice(sliceKey(key), others[rng.int(others.length)])
        if (!await controller.settled(5000)) throw new Error(`move ${i} was not granted`)
        // Let traffic reach the new owner before the next move.
        const mark = recorder.size
        await pollUntil(() => recorder.size >= mark + 6, { timeoutMs: 5000, intervalMs: 2, what: 'traffic between moves' })
      }
    } finally {
      run.stop = true
      await Promise.all(clients)
    }
    const ops = recorder.operations()
    return { ops, check: checkLinearizability(ops) }
  } finally {
    for (const c of closers.reverse()) await c()
  }
}

describe('kv-cache history under moves and Redis restarts', () => {
  test('per-key linearizable over 150 moves with concurrent gets and puts and a Redis restart', async () => {
    const { ops, check } = await runHistory({ moves: 150, restartRedisAt: 75 })
    expect(ops.filter((o) => o.op === 'put' && o.ok === true).length).toBeGreaterThan(50)
    expect(ops.filter((o) => o.op === 'get' && o.ok === true && o.value !== null).length).toBeGreaterThan(100)
    expect(check.violations).toEqual([])
    expect(check.verdict).toBe('linearizable')
  }, 120000)

  test('a planted stale read (a cache trusted across ownership changes) is caught', async () => {
    const { check } = await runHistory({ moves: 150, plantStaleRead: true, seed: 2 })
    expect(check.verdict).toBe('violation')
    expect(check.violations[0].message).toMatch(/returned/)
  }, 120000)
})
