'use strict'

const { Registry } = require('prom-client')
const { Pool } = require('undici')
const { createFrontend } = require('../../frontend')
const { loadApp, startApp } = require('../../apps')
const { startDynalite, spawnRedis } = require('../../apps/kv-cache/embedded')
const { planHandoff } = require('../../controller/handoff-plan')
const { KEYSPACE_SIZE, sliceKey } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { createRng } = require('../../loadgen/prng')
const { HistoryRecorder, checkLinearizability } = require('../../history')
const { call } = require('../helpers/http')
const { metricValue } = require('../kv-cache/harness')

/**
 * kv-cache on replicated slices (docs/replication.md), end to end: three app
 * servers, each with its own redis-server, one dynalite, two front ends that
 * send reads to any replica (p2c) and writes to the primary. Concurrent
 * clients get, put and delete a few keys while the replica sets change under
 * them (replicas added and dropped, primaries swapped, slices moved), each
 * change pushed as the controller would: a revoke map (moving slices, and
 * holders when a slice only gains replicas), whose pushes answer once the
 * losers drained, then the grant. Every operation is recorded and the history
 * must be linearizable per key. With the write fencing switched off, the same
 * run serves stale values from replicas and the checker says so.
 */

const IDS = ['app-1', 'app-2', 'app-3']
const KEYS = Array.from({ length: 9 }, (_, i) => `rk-${i}`)
const THIRD = Math.floor(KEYSPACE_SIZE / 3)
const BOUNDS = [[0, THIRD], [THIRD, 2 * THIRD], [2 * THIRD, KEYSPACE_SIZE]]
const INITIAL = [['app-1', 'app-2', 'app-3'], ['app-2', 'app-3'], ['app-3']]

/** Another replica layout: one slice gains or loses a replica, changes primary, or moves. */
function nextLayout (layout, rng) {
  const out = layout.map((s) => s.slice())
  const i = rng.int(out.length)
  const s = out[i]
  const missing = IDS.filter((id) => !s.includes(id))
  const op = rng.int(4)
  if (op === 0 && missing.length > 0) s.push(missing[rng.int(missing.length)]) // add a replica
  else if (op === 1 && s.length > 1) s.splice(rng.int(s.length), 1) // drop one (maybe the primary)
  else if (op === 2 && s.length > 1) s.push(s.shift()) // a new primary among the same servers
  else if (missing.length > 0) s[rng.int(s.length)] = missing[rng.int(missing.length)] // move one replica
  else s.reverse()
  return out
}

async function runHistory ({ changes, seed = 1, fencing = true, hotShare = 0, batchWrites = true, trafficInRevoke = 0, heldReads, heldReadWaitMs }) {
  const closers = []
  try {
    const dynamo = await startDynalite()
    closers.push(() => dynamo.close())
    const kv = loadApp('kv-cache')
    const apps = []
    for (const id of IDS) {
      const redis = await spawnRedis()
      if (!redis) throw new Error('redis-server is not installed (apt-get install redis-server; .ci/run does it)')
      closers.push(() => redis.close())
      const s = await startApp(kv, {
        id,
        appOptions: { dynamoEndpoint: dynamo.endpoint, table: 'kv-replicas-history', redisUrl: redis.url, batchWrites, heldReads },
        registry: new Registry(),
        consistency: 'available' // no controller here: the pushes below are the only maps
      })
      closers.push(() => s.close())
      if (!fencing) s.instance.service.fencer = null // the planted bug: writes neither hold nor fence the other replicas
      if (heldReadWaitMs !== undefined) s.instance.service.heldReadWaitMs = heldReadWaitMs
      apps.push(s)
    }
    const fes = []
    for (let i = 0; i < 2; i++) {
      const fe = createFrontend({ pullIntervalMs: 0 })
      await fe.start()
      closers.push(() => fe.close())
      fes.push(fe)
    }
    const servers = Object.fromEntries(apps.map((a) => [a.id, { url: a.url }]))
    const controls = [...apps.map((a) => a.controlUrl), ...fes.map((fe) => fe.urls.controlUrl)]
    let generation = 0
    let current = null
    let openHandoffs = 0 // handoffs kept open under traffic (trafficInRevoke)
    const layoutOf = (l) => ({ servers, slices: BOUNDS.map(([start, end], i) => ({ start, end, servers: l[i] })) })
    const pushAll = (a) => Promise.all(controls.map(async (u) => {
      const r = await call(`${u}/v1/assignment`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(a) })
      if (r.status !== 200) throw new Error(`push to ${u} failed: ${r.status} ${JSON.stringify(r.body)}`)
    }))
    /** As the controller does (docs/ownership.md): revoke, wait for the losers' drain (the push answers), grant. */
    async function install (layout) {
      const next = layoutOf(layout)
      if (current) {
        const plan = planHandoff(current, next)
        if (plan.moving > 0) {
          await pushAll({ ...plan.revoke, generation: ++generation })
          // A handoff that only adds replicas, kept open a while: writes admitted under
          // the revoke map hold the servers joining, before they are granted the slice.
          // (Other handoffs leave a range with nobody admitting it: its requests wait.)
          if (trafficInRevoke > 0 && plan.revoke.slices.every((x) => !x.moving || x.holders)) {
            const mark = recorder.size
            await pollUntil(() => recorder.size >= mark + trafficInRevoke, { timeoutMs: 10000, intervalMs: 2, what: 'traffic during the handoff' })
            openHandoffs++
          }
        }
      }
      current = { ...next, generation: ++generation }
      await pushAll(current)
    }
    await install(INITIAL)
    const slicesOf = KEYS.map((k) => BOUNDS.findIndex(([s, e]) => sliceKey(k) >= s && sliceKey(k) < e))
    expect(new Set(slicesOf).size).toBe(3) // keys in every slice

    const pools = fes.map((fe) => new Pool(fe.urls.url, { connections: 8 }))
    closers.push(() => Promise.all(pools.map((p) => p.close())))
    const recorder = new HistoryRecorder()
    const servedBy = { primary: 0, replica: 0 }
    const run = { stop: false }
    const clients = Array.from({ length: 8 }, async (_, c) => {
      const rng = createRng(seed * 100 + c)
      const client = `c${c}`
      while (!run.stop) {
        // hotShare: that share of operations on one key, whose writes then overlap and batch
        const key = rng.next() < hotShare ? KEYS[0] : KEYS[rng.int(KEYS.length)]
        const pool = pools[c % 2]
        const r = rng.next()
        if (r < 0.3 || r >= 0.95) {
          const put = r < 0.3
          const value = put ? recorder.nextValue(client) : undefined
          const h = recorder.invoke({ client, key, op: put ? 'put' : 'delete', value })
          try {
            const { statusCode, body } = await pool.request(put
              ? { method: 'PUT', path: `/kv?key=${key}`, headers: { 'content-type': 'text/plain' }, body: value }
              : { method: 'DELETE', path: `/kv?key=${key}` })
            const text = await body.text()
            // Fenced off by a newer owner, or a replica not held: certainly not applied.
            const notApplied = statusCode !== 204 && /CHOPPER_ERR_FENCED_WRITE|CHOPPER_ERR_REPLICA_UNAVAILABLE/.test(text)
            recorder.complete(h, { ok: statusCode === 204 ? true : notApplied ? 'failed' : false })
          } catch {
            recorder.complete(h, { ok: false })
          }
        } else {
          const h = recorder.invoke({ client, key, op: 'get' })
          try {
            const { statusCode, headers, body } = await pool.request({ method: 'GET', path: `/kv?key=${key}` })
            const text = await body.text()
            if (statusCode === 200 || statusCode === 404) {
              recorder.complete(h, { ok: true, value: statusCode === 200 ? text : null })
              const primary = current.slices[slicesOf[KEYS.indexOf(key)]].servers[0]
              servedBy[headers['x-served-by'] === primary ? 'primary' : 'replica']++
            } else {
              recorder.complete(h, { ok: false })
            }
          } catch {
            recorder.complete(h, { ok: false })
          }
        }
      }
    })

    const rng = createRng(seed)
    let layout = INITIAL
    try {
      for (let i = 0; i < changes; i++) {
        // Traffic under each layout before the next change.
        const mark = recorder.size
        await pollUntil(() => recorder.size >= mark + 40, { timeoutMs: 10000, intervalMs: 2, what: 'traffic between replica changes' })
        layout = nextLayout(layout, rng)
        await install(layout)
      }
    } finally {
      run.stop = true
      await Promise.all(clients)
    }
    let fences = 0
    let batched = 0
    let sharedHeld = 0
    let askedWriter = 0
    for (const a of apps) {
      const text = await a.server.registry.metrics()
      fences += metricValue(text, 'chopper_kv_fences_received_total')
      batched += metricValue(text, 'chopper_kv_batched_writes_total')
      sharedHeld += metricValue(text, 'chopper_kv_shared_reads_total', { with: 'held' })
      askedWriter += metricValue(text, 'chopper_kv_held_reads_total', { outcome: 'writer' })
    }
    const ops = recorder.operations()
    return { ops, servedBy, fences, batched, sharedHeld, askedWriter, openHandoffs, check: checkLinearizability(ops) }
  } finally {
    for (const c of closers.reverse()) await c()
  }
}

describe('kv-cache history with replicated slices', () => {
  test('per-key linearizable with reads on every replica, writes on the primary, and replica sets changing under load', async () => {
    const { ops, servedBy, fences, check } = await runHistory({ changes: 40 })
    expect(ops.filter((o) => o.op === 'put' && o.ok === true).length).toBeGreaterThan(100)
    expect(ops.filter((o) => o.op === 'get' && o.ok === true && o.value !== null).length).toBeGreaterThan(200)
    expect(servedBy.replica).toBeGreaterThan(100) // reads really went to replicas
    expect(fences).toBeGreaterThan(100)
    expect(check.violations).toEqual([])
    expect(check.verdict).toBe('linearizable')
  }, 180000)

  test('heldReads ask (at once: heldReadWaitMs 0): per-key linearizable with replica sets changing under load, held reads answered by their writer', async () => {
    const { ops, servedBy, askedWriter, check } = await runHistory({ changes: 40, seed: 4, hotShare: 0.5, heldReads: 'ask', heldReadWaitMs: 0 })
    expect(ops.filter((o) => o.op === 'get' && o.ok === true && o.value !== null).length).toBeGreaterThan(200)
    expect(servedBy.replica).toBeGreaterThan(100)
    expect(askedWriter).toBeGreaterThan(10)
    expect(check.violations).toEqual([])
    expect(check.verdict).toBe('linearizable')
  }, 180000)

  test('a hot key: writes that overlap go as one batch (one hold, one DynamoDB write), reads of it held by a write ask the writer, and the history stays linearizable', async () => {
    const { ops, batched, askedWriter, check } = await runHistory({ changes: 20, seed: 3, hotShare: 0.8, heldReads: 'ask', heldReadWaitMs: 0 })
    expect(ops.filter((o) => o.key === KEYS[0] && o.op !== 'get' && o.ok === true).length).toBeGreaterThan(50)
    expect(batched).toBeGreaterThan(5)
    expect(askedWriter).toBeGreaterThan(10) // heldReads ask at once: the writer answered them
    expect(check.violations).toEqual([])
    expect(check.verdict).toBe('linearizable')
    // batchWrites: false, the same run: every write on its own
    const alone = await runHistory({ changes: 20, seed: 3, hotShare: 0.8, batchWrites: false })
    expect(alone.batched).toBe(0)
    expect(alone.check.verdict).toBe('linearizable')
  }, 180000)

  test('handoffs that stay open under load: writes hold the servers joining a slice before its grant (admitJoining), and the history stays linearizable', async () => {
    const { ops, fences, openHandoffs, check } = await runHistory({ changes: 40, seed: 5, hotShare: 0.5, trafficInRevoke: 30 })
    expect(openHandoffs).toBeGreaterThanOrEqual(4)
    expect(ops.filter((o) => o.op !== 'get' && o.ok === true).length).toBeGreaterThan(100)
    expect(fences).toBeGreaterThan(100)
    expect(check.violations).toEqual([])
    expect(check.verdict).toBe('linearizable')
  }, 180000)

  test('heldReads wait: held reads go to DynamoDB at once (heldReadWaitMs 0) and share store reads issued after they arrived: the history stays linearizable', async () => {
    const { ops, sharedHeld, askedWriter, check } = await runHistory({ changes: 20, seed: 7, hotShare: 0.8, heldReads: 'wait', heldReadWaitMs: 0 })
    expect(askedWriter).toBe(0)
    expect(ops.filter((o) => o.key === KEYS[0] && o.op === 'get' && o.ok === true).length).toBeGreaterThan(100)
    expect(sharedHeld).toBeGreaterThan(10)
    expect(check.violations).toEqual([])
    expect(check.verdict).toBe('linearizable')
  }, 180000)

  test('with write fencing switched off, replicas serve stale values and the checker catches it', async () => {
    const { check } = await runHistory({ changes: 40, seed: 2, fencing: false })
    expect(check.verdict).toBe('violation')
    expect(check.violations[0].message).toMatch(/returned/)
  }, 180000)
})
