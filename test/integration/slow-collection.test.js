'use strict'

// Slow is not failed: a load report that takes longer than a round waits for
// it leaves the server's load unknown that round and is taken the next; only
// a collection that fails (an error, or no answer within the request timeout)
// counts towards eviction. Before this, a saturated machine's app servers
// (every event loop lagging by hundreds of ms) were evicted while alive and
// renewing their leases, and the layout lost its warm caches.
const http = require('node:http')
const { createController } = require('../../controller')
const { createAppServer } = require('../../appserver-lib/index.js')
const compute = require('../../apps/compute')
const { LoadCollector } = require('../../controller/load-collector')
const { listen, close } = require('../../core/http')
const { pollUntil } = require('../../core/poll')
const { call } = require('../helpers/http')

describe('LoadCollector: slow is not failed', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  /** A control port that answers each GET /v1/load after `delayMs` (null: never), recording the queries. */
  async function fakeServer () {
    const state = { delayMs: 0, queries: [], seq: 0 }
    const server = http.createServer((req, res) => {
      const url = new URL(req.url, 'http://x')
      state.queries.push(Object.fromEntries(url.searchParams))
      const body = JSON.stringify({ instance: 'i', seq: ++state.seq, frames: 1, entries: [{ start: 0, end: 10, count: state.seq, cost: state.seq }] })
      const answer = () => { res.setHeader('content-type', 'application/json'); res.end(body) }
      if (state.delayMs === null) return // hung: never answers
      setTimeout(answer, state.delayMs)
    })
    const port = await listen(server, 0, '127.0.0.1')
    closers.push(async () => { server.closeAllConnections(); await close(server) })
    return { state, servers: new Map([['s', { controlUrl: `http://127.0.0.1:${port}` }]]) }
  }

  /** Rounds until one takes the server's report (a prompt answer can still miss a short wait on a busy machine); none may fail. */
  async function collectUntilReported (collector, servers) {
    let out = null
    await pollUntil(async () => {
      out = await collector.collect(servers)
      expect(out.failed).toEqual([])
      return out.reports.has('s')
    }, { timeoutMs: 4000, intervalMs: 1, what: 'the answer to be taken' })
    return out
  }

  test('an answer slower than the round\'s wait is taken by a later round, with no second request meanwhile and nothing counted as failed', async () => {
    const { state, servers } = await fakeServer()
    const collector = new LoadCollector({ timeoutMs: 5000, waitMs: 30 })
    closers.push(() => collector.close())
    state.delayMs = 300
    const first = await collector.collect(servers)
    expect(first.slow).toEqual(['s'])
    expect(first.failed).toEqual([])
    expect(first.reports.size).toBe(0)
    const out = await collectUntilReported(collector, servers)
    // One request in flight the whole time: the later rounds waited on it.
    expect(state.queries).toHaveLength(1)
    expect(out.slow).toEqual([])
    expect(out.reports.get('s')).toEqual([{ start: 0, end: 10, count: 1, cost: 1, done: 1 }])
    // The next request acknowledges the report the late answer carried.
    state.delayMs = 0
    const next = await collectUntilReported(collector, servers)
    expect(state.queries).toHaveLength(2)
    expect(state.queries[1]).toEqual({ instance: 'i', seq: '1' })
    expect(next.reports.get('s')[0].count).toBe(2)
  })

  test('a server that never answers is slow until its request times out, then failed, and asked again', async () => {
    const { state, servers } = await fakeServer()
    const collector = new LoadCollector({ timeoutMs: 300, waitMs: 20 })
    closers.push(() => collector.close())
    state.delayMs = null
    const rounds = []
    await pollUntil(async () => {
      const out = await collector.collect(servers)
      rounds.push(out)
      return out.failed.length > 0
    }, { timeoutMs: 5000, intervalMs: 1, what: 'the hung collection to fail' })
    expect(rounds.length).toBeGreaterThan(2)
    for (const r of rounds.slice(0, -1)) expect(r.slow).toEqual(['s'])
    expect(rounds.at(-1).failed).toEqual([{ id: 's', err: expect.objectContaining({ code: 'CHOPPER_ERR_TIMEOUT' }) }])
    expect(state.queries).toHaveLength(1)
    await collector.collect(servers) // a new request (the round does not wait for it to arrive: poll)
    await pollUntil(() => state.queries.length === 2, { timeoutMs: 4000, what: 'the new request to reach the server' })
    expect(state.queries).toHaveLength(2)
  })

  test('forget drops a collection in flight: the next round asks afresh', async () => {
    const { state, servers } = await fakeServer()
    const collector = new LoadCollector({ timeoutMs: 5000, waitMs: 20 })
    closers.push(() => collector.close())
    state.delayMs = 500
    expect((await collector.collect(servers)).slow).toEqual(['s'])
    collector.forget('s')
    state.delayMs = 0
    const out = await collectUntilReported(collector, servers)
    await pollUntil(() => state.queries.length >= 2, { timeoutMs: 4000, what: 'the forgotten request to reach the server too' })
    expect(state.queries).toHaveLength(2)
    expect(state.queries[1]).toEqual({})
    expect(out.reports.get('s')[0].count).toBe(2)
  })
})

describe('the controller does not evict an app server whose load reports are slow', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  test('reports slower than half a period, for many rounds: the server stays, its load is taken late, and the rounds are counted as slow', async () => {
    // Rounds every 100 ms wait 50 ms for load reports; app-2 answers in ~150 ms,
    // well within the 2 s request timeout. Three failed collections would evict it.
    const controller = createController({ periodMs: 100, startupFenceMs: 0, evictAfterFailures: 3, requestTimeoutMs: 2000 })
    await controller.start()
    closers.push(() => controller.close())
    const members = []
    for (const id of ['app-1', 'app-2']) {
      const { app } = await compute.create()
      // Collection by HTTP (no lease stream): app-2's control port answers /v1/load late.
      const s = createAppServer({ id, app, controllerUrl: controller.url, leaseStream: false })
      await s.start()
      closers.push(() => s.close())
      members.push(s)
    }
    await pollUntil(() => controller.assignment && Object.keys(controller.assignment.servers).length === 2, { what: 'both servers in the layout' })
    const ctl = members[1].listeners.control
    const handlers = ctl.listeners('request')
    ctl.removeAllListeners('request')
    ctl.on('request', (req, res) => {
      const go = () => { for (const h of handlers) h.call(ctl, req, res) }
      if (req.url.startsWith('/v1/load')) setTimeout(go, 150)
      else go()
    })
    const startRound = controller.status().rounds.at(-1)?.round || 0
    await pollUntil(() => (controller.status().rounds.at(-1)?.round || 0) >= startRound + 20, { timeoutMs: 20000, what: '20 rounds' })
    const st = controller.status()
    expect(st.servers['app-2']).toBeDefined()
    expect(st.servers['app-2'].collectionFailures).toBe(0)
    expect(Object.keys(controller.assignment.servers)).toContain('app-2')
    const rounds = st.rounds.filter((r) => r.round > startRound)
    // Slow rounds had its load unknown; its late answers were taken in others.
    expect(rounds.filter((r) => r.unknown.includes('app-2')).length).toBeGreaterThan(3)
    expect(rounds.filter((r) => !r.unknown.includes('app-2')).length).toBeGreaterThan(3)
    const metrics = (await call(`${controller.url}/metrics`)).body
    expect(metrics).toMatch(/chopper_controller_load_collection_slow_total\{server="app-2"\} [1-9]/)
    expect(metrics).toMatch(/chopper_controller_evictions_total 0/)
    expect(metrics).not.toMatch(/chopper_controller_load_collection_failures_total\{server="app-2"\}/)
  })
})
