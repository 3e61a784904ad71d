'use strict'

const axios = require('axios')
const { createController } = require('../../controller')
const { startAppProcesses } = require('../../bench/lib/app-process')
const { createClient } = require('../../client/index.js')
const { sliceKey } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')

// @chopper/client (issue 39): fetch with the client as its dispatcher, and an
// axios instance with the client's adapter, each route 1,000 keys straight
// to the app servers while slices move and an app server is SIGKILLed, with
// no 5xx and no error.
const KEYS = Array.from({ length: 1000 }, (_, i) => `user-${i}`)
const CONCURRENCY = 8

describe('@chopper/client routes by key across moves and a dead server', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  /**
   * A controller in this process, three compute app servers in their own, a
   * client. No replicas: a read of a dead server's key has no other server
   * to go to, so it must wait for the map that moves its slice.
   */
  async function cluster () {
    const controller = createController({ periodMs: 600000, startupFenceMs: 0, strategyOptions: { replicate: false } })
    await controller.start()
    closers.push(() => controller.close())
    const servers = await startAppProcesses('compute', ['app-1', 'app-2', 'app-3'], { controllerUrl: controller.url })
    closers.push(() => Promise.all(servers.map((s) => s.close().catch(() => {}))))
    await pollUntil(async () => Object.keys((controller.published || { servers: {} }).servers).length === 3 && controller.settled(100), { what: 'three servers placed' })
    const client = createClient({ controllerUrl: controller.url, pollIntervalMs: 100, holdMs: 5000 })
    closers.push(() => client.close())
    await client.ready()
    return { controller, servers, client }
  }

  /**
   * Send every key through `send` (returns { status, servedBy }), CONCURRENCY
   * at a time; `at(i)` runs before key i (moves, the kill).
   */
  async function sweep (send, at) {
    const results = new Array(KEYS.length)
    let next = 0
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < KEYS.length) {
        const i = next++
        await at(i)
        try {
          results[i] = await send(KEYS[i])
        } catch (err) {
          results[i] = { status: 0, error: `${err.code || ''} ${err.message} ${err.cause ? String(err.cause) : ''}` }
        }
      }
    }))
    return results
  }

  /** Moves of a slice every 150 keys, and app-2 SIGKILLed at key 500. */
  function disruptions ({ controller, servers }) {
    const victim = servers.find((s) => s.id === 'app-2')
    let killed = false
    const moved = []
    return {
      moved,
      get killed () { return killed },
      async at (i) {
        if (i === 500 && !killed) {
          killed = true
          process.kill(victim.pid, 'SIGKILL')
        }
        if (i % 150 === 75 && !killed) {
          // Between app-1 and app-3: app-2 keeps its slices until it dies.
          const slice = controller.published.slices.find((s) => s.servers[0] !== 'app-2')
          controller.moveSlice(slice.start, slice.servers[0] === 'app-1' ? 'app-3' : 'app-1')
          moved.push(slice.start)
        }
      }
    }
  }

  function expectNoFailures (results, d) {
    const failed = results.filter((r) => r.status === 0 || r.status >= 500)
    expect(failed).toEqual([])
    expect(results.every((r) => r.status === 200)).toBe(true)
    expect(d.moved.length).toBeGreaterThanOrEqual(3)
    // Every server answered some keys; none from app-2 once its slices moved.
    const by = {}
    for (const r of results) by[r.servedBy] = (by[r.servedBy] || 0) + 1
    expect(Object.keys(by).sort()).toEqual(['app-1', 'app-2', 'app-3'])
    expect(results.slice(900).some((r) => r.servedBy === 'app-2')).toBe(false)
  }

  test('fetch(url, { dispatcher: client })', async () => {
    const c = await cluster()
    const d = disruptions(c)
    const results = await sweep(async (key) => {
      const res = await fetch(`http://profile.internal/compute?key=${encodeURIComponent(key)}&n=5`, { dispatcher: c.client })
      const body = await res.json()
      expect(body.key).toBe(key)
      return { status: res.status, servedBy: res.headers.get('x-served-by') }
    }, (i) => d.at(i))
    expectNoFailures(results, d)
    // The client holds the controller's current map, which no longer names app-2.
    await pollUntil(() => !c.controller.published.servers['app-2'] && c.client.generation === c.controller.published.generation, { what: 'the client caught up' })
    expect(Object.keys(c.client.table.map.assignment.servers).sort()).toEqual(['app-1', 'app-3'])
  }, 90000)

  test('axios.create({ adapter: client.axiosAdapter })', async () => {
    const c = await cluster()
    const d = disruptions(c)
    const http = axios.create({ adapter: c.client.axiosAdapter, baseURL: 'http://profile.internal' })
    const results = await sweep(async (key) => {
      const res = await http.get('/compute', { params: { key, n: 5 } })
      expect(res.data.key).toBe(key)
      return { status: res.status, servedBy: res.headers['x-served-by'] }
    }, (i) => d.at(i))
    expectNoFailures(results, d)
  }, 90000)

  test('lookup(key) names the owner the map gives, and the header key routes like ?key=', async () => {
    const { controller, client } = await cluster()
    const a = controller.published
    for (const key of KEYS.slice(0, 50)) {
      const owner = a.slices.find((s) => s.end > sliceKey(key)).servers[0]
      const found = client.lookup(key)
      expect(found).toMatchObject({ key, sliceKey: sliceKey(key), generation: a.generation })
      expect(found.servers[0]).toEqual({ id: owner, url: a.servers[owner].url })
      const res = await client.request({ path: '/compute?n=1', method: 'GET', headers: { 'x-chopper-key': key } })
      expect(res.statusCode).toBe(200)
      expect(res.headers['x-served-by']).toBe(owner)
      await res.body.json()
    }
  }, 60000)
})
