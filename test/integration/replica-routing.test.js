'use strict'

const express = require('express')
const { request } = require('undici')
const { createFrontend } = require('../../frontend')
const { createAppServer } = require('../../appserver-lib/index.js')
const { KEYSPACE_SIZE, sliceKey } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { call, putJson, runLimited } = require('../helpers/http')
const { AxiosForwarder } = require('../../bench/lib/axios-forwarder')

/** 'axios': the bench's axios forwarder, injected (the front end ships only undici's). */
const forwarderFor = (name) => (name === 'axios' ? new AxiosForwarder({ connections: 64, timeoutMs: 30000 }) : name)

const HALF = KEYSPACE_SIZE / 2
/** Keys whose slice key falls in [lo, hi). */
function keysIn (lo, hi, n) {
  const out = []
  for (let k = 0; out.length < n; k++) {
    const s = sliceKey(`k${k}`)
    if (s >= lo && s < hi) out.push(`k${k}`)
  }
  return out
}
const HOT = keysIn(0, HALF, 64) // the replicated slice
const COLD = keysIn(HALF, KEYSPACE_SIZE, 64)

/** mulberry32, so the random policy's draws are the same every run. */
function seeded (seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/**
 * An app that answers after `?ms=` milliseconds (the app's own latency, so
 * requests overlap) and records, per server, the methods it served and the
 * most long (`?n=` >= 100) requests it ever ran at once.
 */
function recordingApp (stats) {
  const app = express.Router()
  app.all('/r', (req, res) => {
    stats.started++
    const long = Number(req.query.n || 0) >= 100
    if (long) stats.maxLong = Math.max(stats.maxLong, ++stats.long)
    const timer = setTimeout(() => {
      stats.served[req.method] = (stats.served[req.method] || 0) + 1
      res.json({ ok: true })
    }, Number(req.query.ms || 0))
    res.on('close', () => { clearTimeout(timer); if (long) stats.long-- })
  })
  return app
}

describe('front end: replicated slices', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  /**
   * App servers a, b, c; slice [0, HALF) on `hot` (primary first) and
   * [HALF, end) on b alone; the front end gets `assignment` (built from
   * those) unless `frontendAssignment` overrides it.
   */
  async function setup ({ frontendOptions = {}, hot = ['a', 'b', 'c'], hotExtra = {}, serverAssignment = {}, extraServers = {} } = {}) {
    const stats = {}
    const servers = {}
    for (const id of ['a', 'b', 'c']) {
      stats[id] = { served: {}, started: 0, long: 0, maxLong: 0 }
      const server = createAppServer({ id, app: recordingApp(stats[id]) })
      await server.start()
      closers.push(() => server.close())
      servers[id] = server
    }
    const urls = { ...Object.fromEntries(Object.entries(servers).map(([id, s]) => [id, { url: s.urls.url }])), ...extraServers }
    const assignment = {
      generation: 4,
      slices: [{ start: 0, end: HALF, servers: hot, ...hotExtra }, { start: HALF, end: KEYSPACE_SIZE, servers: ['b'] }],
      servers: urls
    }
    const fe = createFrontend({ holdMs: 500, ...frontendOptions })
    await fe.start()
    closers.push(() => fe.close())
    expect((await putJson(`${fe.urls.controlUrl}/v1/assignment`, assignment)).status).toBe(200)
    for (const [id, s] of Object.entries(servers)) {
      expect((await putJson(`${s.urls.controlUrl}/v1/assignment`, serverAssignment[id] || assignment)).status).toBe(200)
    }
    return { fe, stats, servers }
  }

  /** Every request in flight has ended: the counters replica choice reads are back to zero. */
  async function countersDrain (fe) {
    await pollUntil(() => Object.keys(fe.replicas.inflight()).length === 0, { timeoutMs: 5000, what: 'in-flight counters back to 0' })
    const load = fe.replicas.load
    expect(Array.from(load.inflight).every((v) => v === 0)).toBe(true)
    expect(Array.from(load.work).every((v) => v === 0)).toBe(true)
    expect(Array.from(load.long).every((v) => v === 0)).toBe(true)
  }

  const servedBy = (responses) => {
    const n = {}
    for (const r of responses) n[r.headers['x-served-by']] = (n[r.headers['x-served-by']] || 0) + 1
    return n
  }

  test('p2c (default): reads spread over the replicas, writes go to the primary, counters return to 0', async () => {
    const { fe, stats } = await setup()
    // b also serves the other slice, so it carries more in flight.
    const reads = []
    for (let k = 0; k < 150; k++) reads.push(() => call(`${fe.urls.url}/r?key=${HOT[k % HOT.length]}&ms=8`))
    for (let k = 0; k < 60; k++) reads.push(() => call(`${fe.urls.url}/r?key=${COLD[k % COLD.length]}&ms=8`))
    const answers = await runLimited(reads, 16)
    expect(answers.every((r) => r.status === 200)).toBe(true)
    const hot = servedBy(answers.slice(0, 150))
    for (const id of ['a', 'b', 'c']) expect(hot[id]).toBeGreaterThan(0)
    for (const id of ['a', 'b', 'c']) expect(hot[id] / 150).toBeLessThan(0.8)
    expect(servedBy(answers.slice(150))).toEqual({ b: 60 })

    const writes = []
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      for (let k = 0; k < 8; k++) writes.push(() => call(`${fe.urls.url}/r?key=${HOT[k]}&ms=2`, { method }))
    }
    const written = await runLimited(writes, 8)
    expect(written.every((r) => r.status === 200)).toBe(true)
    expect(servedBy(written)).toEqual({ a: 32 })
    expect(stats.b.served.POST).toBeUndefined()
    expect(stats.c.served.PUT).toBeUndefined()

    const m = (await call(`${fe.urls.url}/metrics`)).body
    const primary = Number(/chopper_frontend_replica_choices_total\{position="primary"\} (\d+)/.exec(m)[1])
    const other = Number(/chopper_frontend_replica_choices_total\{position="other"\} (\d+)/.exec(m)[1])
    expect(primary + other).toBe(150) // reads of the replicated slice only
    expect(other).toBeGreaterThan(0)
    await countersDrain(fe)
  })

  test('two front ends: answers say how many requests a server holds (X-Chopper-Inflight), so p2c avoids the replica the other front end loaded', async () => {
    // The other front end's reads here are 20 s long on a server that runs them side by side, not a queue
    // worked off within an answer time: counted whole (serverReportDecay false) for the TTL.
    const { fe, stats, servers } = await setup({ hot: ['a', 'b'], frontendOptions: { serverReportTtlMs: 60000, serverReportDecay: false } })
    // The other front end sends every read to the primary, a, and holds 8 there.
    const other = createFrontend({ holdMs: 500, replicaChoice: 'first' })
    await other.start()
    closers.push(() => other.close())
    expect((await putJson(`${other.urls.controlUrl}/v1/assignment`, fe.table.map.assignment)).status).toBe(200)
    const http = require('node:http')
    const slow = []
    for (let k = 0; k < 8; k++) {
      const req = http.get(`${other.urls.url}/r?key=${HOT[k]}&ms=20000`)
      req.on('error', () => {})
      slow.push(req)
    }
    closers.push(() => { for (const req of slow) req.destroy() })
    await pollUntil(() => stats.a.started === 8, { what: 'the other front end\'s 8 reads to reach a' })

    // An app server's answer carries the count (this request included); a front end keeps it to itself.
    const direct = await call(`${servers.a.urls.url}/r?key=${HOT[0]}`)
    expect(direct.headers['x-chopper-inflight']).toBe('9')
    // This front end's first read ties (nothing of its own in flight): the primary, a, which reports 8 others.
    const t0 = performance.now()
    const first = await call(`${fe.urls.url}/r?key=${HOT[0]}`)
    const firstMs = performance.now() - t0
    expect(first.headers['x-served-by']).toBe('a')
    expect(first.headers['x-chopper-inflight']).toBeUndefined()
    expect(fe.replicas.load.others[fe.replicas.slots.get('a')]).toBe(8)
    // with the time that answer took, from sending to its head (what serverReportDecay works the others off over)
    const answered = fe.replicas.load.answerMs[fe.replicas.slots.get('a')]
    expect(answered).toBeGreaterThan(0)
    expect(answered).toBeLessThan(firstMs)
    const next = []
    for (let k = 1; k <= 10; k++) next.push(await call(`${fe.urls.url}/r?key=${HOT[k]}`))
    expect(servedBy(next)).toEqual({ b: 10 })

    // Without reports (serverReportTtlMs 0) a front end sees only its own requests: every tie goes to a.
    const blind = createFrontend({ holdMs: 500, serverReportTtlMs: 0 })
    await blind.start()
    closers.push(() => blind.close())
    expect((await putJson(`${blind.urls.controlUrl}/v1/assignment`, fe.table.map.assignment)).status).toBe(200)
    const unaware = []
    for (let k = 1; k <= 10; k++) unaware.push(await call(`${blind.urls.url}/r?key=${HOT[k]}`))
    expect(servedBy(unaware)).toEqual({ a: 10 })
    await countersDrain(fe)
  })

  test('first: every read goes to the primary; HEAD is a read', async () => {
    const { fe } = await setup({ frontendOptions: { replicaChoice: 'first' } })
    const tasks = []
    for (let k = 0; k < 40; k++) tasks.push(() => call(`${fe.urls.url}/r?key=${HOT[k % HOT.length]}&ms=5`, { method: k % 4 === 0 ? 'HEAD' : 'GET' }))
    expect(servedBy(await runLimited(tasks, 8))).toEqual({ a: 40 })
    await countersDrain(fe)
  })

  test('a slice gaining its primary: reads and writes go to the holder; a slice nobody admits goes to its primary', async () => {
    // [0, HALF) moves from {b} to {a, b}: b holds it during the handoff.
    const { fe } = await setup({ hot: ['a', 'b'], hotExtra: { moving: true, holders: ['b'] } })
    const tasks = []
    for (let k = 0; k < 12; k++) tasks.push(() => call(`${fe.urls.url}/r?key=${HOT[k]}`, { method: k % 2 ? 'GET' : 'POST' }))
    const answers = await runLimited(tasks, 4)
    expect(answers.every((r) => r.status === 200)).toBe(true)
    expect(servedBy(answers)).toEqual({ b: 12 })

    // No holders: routed to the primary (which holds it until the grant; here
    // the front end's own map is all we check, through its routing tables).
    const moving = {
      generation: 5,
      slices: [{ start: 0, end: HALF, servers: ['c', 'a'], moving: true }, { start: HALF, end: KEYSPACE_SIZE, servers: ['b'] }],
      servers: fe.table.map.assignment.servers
    }
    expect((await putJson(`${fe.urls.controlUrl}/v1/assignment`, moving)).status).toBe(200)
    const map = fe.table.map
    for (const read of [true, false]) expect(fe.replicas.ids[fe.replicas.pick(map, map.indexOf(sliceKey(HOT[0])), read, 1)]).toBe('c')
    await countersDrain(fe)
  })

  for (const forwarder of ['undici', 'axios']) {
    test(`${forwarder}: counters return to 0 after refused replicas, 421s, aborts and failed writes`, async () => {
      // Slice [0, HALF) on a, c and d; d is not listening, and c's own map
      // (same generation) does not list c, so c answers 421.
      const dead = { d: { url: 'http://127.0.0.1:1' } }
      const cMap = {
        generation: 4,
        slices: [{ start: 0, end: HALF, servers: ['a'] }, { start: HALF, end: KEYSPACE_SIZE, servers: ['b'] }],
        servers: { a: { url: 'http://127.0.0.1:2' }, b: { url: 'http://127.0.0.1:3' }, c: { url: 'http://127.0.0.1:4' } }
      }
      const { fe, stats } = await setup({
        hot: ['a', 'c', 'd'],
        extraServers: dead,
        serverAssignment: { c: cMap },
        frontendOptions: { forwarder: forwarderFor(forwarder), replicaChoice: 'random', replicaRng: seeded(5) }
      })
      // Reads: whichever replica is drawn, each is answered (another replica at once).
      const tasks = []
      for (let k = 0; k < 60; k++) tasks.push(() => call(`${fe.urls.url}/r?key=${HOT[k % HOT.length]}`))
      const answers = await runLimited(tasks, 6)
      expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200))
      expect(servedBy(answers).a).toBe(60)
      expect(stats.c.started).toBe(0) // c's guard refused them before the app
      const m = (await call(`${fe.urls.url}/metrics`)).body
      expect(m).toMatch(/chopper_frontend_retries_total\{reason="unreachable"\} [1-9]/)
      expect(m).toMatch(/chopper_frontend_retries_total\{reason="misdirected"\} [1-9]/)

      // A client that leaves mid-request: the upstream request is aborted and uncounted.
      const http = require('node:http')
      const before = stats.a.started
      const req = http.get(`${fe.urls.url}/r?key=${COLD[0]}&ms=20000`)
      req.on('error', () => {})
      await pollUntil(() => stats.b.started === 1, { what: 'the slow request to reach b' })
      expect(fe.replicas.inflight()).toEqual({ b: 1 })
      req.destroy()
      await countersDrain(fe)
      expect(stats.a.started).toBe(before)

      // A write whose primary is unreachable fails after the hold.
      const down = {
        generation: 6,
        slices: [{ start: 0, end: HALF, servers: ['d', 'a'] }, { start: HALF, end: KEYSPACE_SIZE, servers: ['b'] }],
        servers: fe.table.map.assignment.servers
      }
      expect((await putJson(`${fe.urls.controlUrl}/v1/assignment`, down)).status).toBe(200)
      const w = await call(`${fe.urls.url}/r?key=${HOT[0]}`, { method: 'POST', body: 'x', headers: { 'content-type': 'text/plain' } })
      expect(w.status).toBe(502)
      await countersDrain(fe)
    })
  }

  test('a replica that refused a connection is avoided for reads for a while, instead of being drawn again', async () => {
    // Slice [0, HALF) on a and d; d is not listening.
    const { fe } = await setup({
      hot: ['a', 'd'],
      extraServers: { d: { url: 'http://127.0.0.1:1' } },
      frontendOptions: { replicaChoice: 'random', replicaRng: seeded(11) }
    })
    fe.replicas.suspectMs = 60000 // the whole test: no clock in the assertion
    const answers = []
    for (let k = 0; k < 30; k++) answers.push(await call(`${fe.urls.url}/r?key=${HOT[k % HOT.length]}`))
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200))
    expect(servedBy(answers).a).toBe(30)
    // Drawn at random, d would be tried first about 15 times; it refused once, then was avoided.
    expect(fe.replicas.stats.suspected).toBe(1)
    expect(fe.replicas.stats.avoided).toBeGreaterThan(5)
    const m = (await call(`${fe.urls.url}/metrics`)).body
    expect(m).toMatch(/chopper_frontend_retries_total\{reason="unreachable"\} 1\n/)
    await countersDrain(fe)
  })

  test('lcstar: at most one long request per replica; a third waits for a long one to end; short ones are not held', async () => {
    const { fe, stats } = await setup({
      hot: ['a', 'b'],
      frontendOptions: { replicaChoice: 'lcstar', replicaSizeParam: 'n', replicaSizePower: 2, lcstarThreshold: 100 * 100, lcstarMaxWaitMs: 10000 }
    })
    const long = (k) => request(`${fe.urls.url}/r?key=${HOT[k]}&n=1000&ms=150`).then(async (r) => { await r.body.text(); return r.headers['x-served-by'] })
    const three = Promise.all([long(0), long(1), long(2)])
    await pollUntil(() => fe.replicas.stats.deferred === 1, { what: 'the third long request to be deferred' })
    expect(fe.replicas.load.long.slice(0, 2)).toEqual(new Int32Array([1, 1]))
    // A short read meanwhile goes straight through.
    expect((await call(`${fe.urls.url}/r?key=${HOT[3]}&n=10`)).status).toBe(200)
    expect(fe.replicas.stats.deferred).toBe(1)
    const by = await three
    expect(new Set(by)).toEqual(new Set(['a', 'b']))
    expect(stats.a.maxLong).toBe(1)
    expect(stats.b.maxLong).toBe(1)
    expect(fe.replicas.stats).toMatchObject({ deferred: 1, dispatched: 1, timedOut: 0, overflowed: 0 })
    const m = (await call(`${fe.urls.url}/metrics`)).body
    expect(m).toMatch(/chopper_frontend_replica_deferred_total\{outcome="dispatched"\} 1/)
    await countersDrain(fe)
  })

  test('lcstar: past the wait or with the queue full, a long request goes to the least connected', async () => {
    const { fe } = await setup({
      hot: ['a', 'b'],
      frontendOptions: { replicaChoice: 'lcstar', replicaSizeParam: 'n', lcstarThreshold: 100, lcstarMaxWaitMs: 20, lcstarMaxDeferred: 1 }
    })
    const long = (k) => call(`${fe.urls.url}/r?key=${HOT[k]}&n=500&ms=300`)
    const all = await Promise.all([long(0), long(1), long(2), long(3)])
    expect(all.every((r) => r.status === 200)).toBe(true)
    expect(fe.replicas.stats).toMatchObject({ deferred: 2, timedOut: 1, overflowed: 1 })
    await countersDrain(fe)
  })

  test('options are validated by name', () => {
    expect(() => createFrontend({ replicaChoice: 'p3c' })).toThrow(/invalid replicaChoice: expected one of p2c, jsq, lc, lcstar, random, first/)
    expect(() => createFrontend({ lcstarThreshold: -1 })).toThrow(/invalid lcstarThreshold/)
    expect(() => createFrontend({ replicaSizeParam: 'a b' })).toThrow(/invalid replicaSizeParam/)
    expect(() => createFrontend({ replicaSizeParam: 'n', replicaSizePower: 0 })).toThrow(/invalid replicaSizePower/)
    expect(() => createFrontend({ sizeOf: 3 })).toThrow(/invalid sizeOf/)
    expect(() => createFrontend({ sizeOf: () => 1, replicaSizeParam: 'n' })).toThrow(/invalid sizeOf/)
    expect(() => createFrontend({ lcstarMaxWaitMs: 1.5 })).toThrow(/invalid lcstarMaxWaitMs/)
    expect(() => createFrontend({ lcstarMaxDeferred: -1 })).toThrow(/invalid lcstarMaxDeferred/)
    expect(() => createFrontend({ serverReportDecay: 'yes' })).toThrow(/invalid serverReportDecay/)
  })
})
