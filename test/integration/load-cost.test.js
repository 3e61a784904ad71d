'use strict'

// Load measured as cost (issue 10, item 3), end to end: the middleware
// measures wall or CPU time (or takes the app's word), reports it per range of
// the map that admitted the request, and the controller balances on it.
const http = require('node:http')
const { performance } = require('node:perf_hooks')
const express = require('express')
const { createAppServer, shardGuardMiddleware, setRequestCost, ShardGuard } = require('../../appserver-lib/index.js')
const { createController } = require('../../controller')
const { getStrategy } = require('../../controller/strategies')
const { LoadCollector } = require('../../controller/load-collector')
const { SliceMap } = require('../../core/slice-map')
const { sliceKey, KEYSPACE_SIZE } = require('../../core/keyspace')
const { listen, close } = require('../../core/http')
const { pollUntil } = require('../../core/poll')
const { call } = require('../helpers/http')

const H = KEYSPACE_SIZE / 2
const Q = KEYSPACE_SIZE / 4
const keyIn = (lo, hi) => { for (let i = 0; ; i++) { const k = `k${i}`; const h = sliceKey(k); if (h >= lo && h < hi) return k } }

/** Busy-wait `ms` of wall time: CPU-bound work of a known length. */
function spin (ms) {
  const until = performance.now() + ms
  let x = 0
  while (performance.now() < until) x++
  return x
}

/** The app used below: each route costs something different. */
function testApp (gates) {
  const r = express.Router()
  r.get('/wait', (req, res) => { setTimeout(() => res.json({ ok: true }), Number(req.query.ms)) })
  r.get('/spin', (req, res) => {
    const t0 = performance.now()
    spin(Number(req.query.ms))
    res.json({ wallMs: performance.now() - t0 })
  })
  r.get('/stated', (req, res) => {
    setRequestCost(req, 99) // overridden by the last call
    setRequestCost(req, Number(req.query.cost))
    res.json({ ok: true })
  })
  r.get('/replicas', (req, res) => res.json({ replicas: req.chopperReplicas, generation: req.chopperGeneration }))
  r.get('/gate', (req, res) => { gates.push(() => res.json({ replicas: req.chopperReplicas, generation: req.chopperGeneration })) })
  return r
}

/** The entry for [start, end) in a report, once the cost of what finished has arrived. */
async function entryWithCost (guard, start, end) {
  return pollUntil(() => {
    const e = guard.report().entries.find((x) => x.start === start && x.end === end)
    return e && e.cost > 0 ? e : null
  }, { timeoutMs: 5000, intervalMs: 5, what: `cost on [${start}, ${end})` })
}

describe('appserver-lib measures cost per slice', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  async function server (options = {}) {
    const gates = []
    const s = createAppServer({ id: 'me', app: testApp(gates), ...options })
    await s.start()
    closers.push(() => s.close())
    const assign = (generation, slices) => s.guard.setAssignment({ generation, slices, servers: { me: { url: s.urls.url }, other: { url: 'http://127.0.0.1:1' } } })
    assign(1, [{ start: 0, end: H, servers: ['me'] }, { start: H, end: KEYSPACE_SIZE, servers: ['other', 'me'] }])
    return { s, gates, assign, get: (path) => call(`${s.urls.url}${path}`) }
  }

  test('wall (default): from admission until the response closes, per slice; GET /v1/load carries it with ack semantics', async () => {
    const { s, get } = await server()
    const low = keyIn(0, H)
    expect((await get(`/wait?key=${low}&ms=40`)).status).toBe(200)
    const e = await entryWithCost(s.guard, 0, H)
    expect(e.count).toBe(1)
    expect(e.cost).toBeGreaterThanOrEqual(38) // timers never fire early by more than their 1 ms rounding
    expect(e.cost).toBeLessThan(5000)

    // Over HTTP: every entry has cost; a report stays until acknowledged.
    const first = (await call(`${s.urls.controlUrl}/v1/load`)).body
    // hot: the slice's majority vote over the keys it admitted (core/hot-keys.js)
    expect(first.entries).toEqual([{ start: 0, end: H, count: 1, cost: e.cost, done: 1, hot: { key: sliceKey(low), votes: 1 } }])
    expect((await get(`/stated?key=${low}&cost=2.5`)).status).toBe(200)
    await pollUntil(() => s.guard.stats.admitted === 2 && s.guard.drainedGeneration === 1 && s.guard.current.inflight === 0, { intervalMs: 5, what: 'the request to close' })
    const unacked = (await call(`${s.urls.controlUrl}/v1/load`)).body
    // unacknowledged frames merged: the votes of the same key add
    expect(unacked.entries).toEqual([{ start: 0, end: H, count: 2, cost: Math.round((e.cost + 2.5) * 1000) / 1000, done: 2, hot: { key: sliceKey(low), votes: 2 } }])
    const acked = (await call(`${s.urls.controlUrl}/v1/load?instance=${unacked.instance}&seq=${unacked.seq}`)).body
    expect(acked.entries).toEqual([])
  })

  test('cpu: CPU time of the handler\'s synchronous part, not time spent waiting', async () => {
    const { s, get } = await server({ cost: 'cpu' })
    const low = keyIn(0, H)
    const high = keyIn(H, KEYSPACE_SIZE)
    // process.cpuUsage() is the whole process's: the first runs also pay V8's
    // background compilation of the loop. Warm up, then measure one request alone.
    for (let i = 0; i < 3; i++) expect((await get(`/spin?key=${low}&ms=20`)).status).toBe(200)
    await pollUntil(() => s.guard.stats.admitted === 3 && s.guard.current.inflight === 0, { intervalMs: 5, what: 'the warm-up to close' })
    const warm = s.guard.report()
    const res = await get(`/spin?key=${low}&ms=60`)
    expect(res.status).toBe(200)
    const busy = await pollUntil(() => {
      const e = s.guard.report({ instance: warm.instance, seq: warm.seq }).entries[0]
      return e && e.cost > 0 ? e : null
    }, { intervalMs: 5, what: 'the measured request\'s cost' })
    expect(busy.count).toBe(1)
    // About the wall time it spun: below it plus slack (the rest of the handler,
    // other threads of the process), well above zero unless the machine starved it.
    // (process CPU time counts every thread: GC and other helpers may add to it on a busy machine)
    expect(busy.cost).toBeLessThan(res.body.wallMs * 2 + 20)
    expect(busy.cost).toBeGreaterThan(res.body.wallMs * 0.2)

    // 100 ms of waiting on a timer costs next to nothing in CPU.
    expect((await get(`/wait?key=${high}&ms=100`)).status).toBe(200)
    await pollUntil(() => s.guard.current.inflight === 0, { intervalMs: 5, what: 'the request to close' })
    const idle = s.guard.report().entries.find((x) => x.start === H)
    expect(idle.count).toBe(1)
    expect(idle.cost).toBeLessThan(20)
  })

  test('setRequestCost overrides what is measured, in either mode; invalid costs and modes are refused', async () => {
    for (const cost of ['wall', 'cpu']) {
      const { s, get } = await server({ cost })
      const low = keyIn(0, H)
      for (let i = 0; i < 3; i++) expect((await get(`/stated?key=${low}&cost=12.5`)).status).toBe(200)
      await pollUntil(() => s.guard.current.inflight === 0 && s.guard.stats.admitted === 3, { intervalMs: 5, what: 'the requests to close' })
      expect(s.guard.report().entries).toEqual([{ start: 0, end: H, count: 3, cost: 37.5, done: 3, hot: { key: sliceKey(low), votes: 3 } }])
    }
    const req = {}
    for (const bad of [-1, NaN, Infinity, '5', undefined]) expect(() => setRequestCost(req, bad)).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ARG', message: expect.stringMatching(/invalid cost/) }))
    expect(() => createAppServer({ id: 'x', app: testApp([]), cost: 'gpu' })).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ARG', message: expect.stringMatching(/invalid cost: expected one of wall, cpu/) }))
    expect(() => shardGuardMiddleware(new ShardGuard({ serverId: 'x' }), { cost: 'user' })).toThrow(/invalid cost/)
  })

  test('req.chopperReplicas and the cost follow the map that admitted the request, even when it changes before the request ends', async () => {
    const { s, gates, assign, get } = await server()
    const high = keyIn(H, H + Q)
    expect((await get(`/replicas?key=${high}`)).body).toEqual({ replicas: ['other', 'me'], generation: 1 })
    const pending = get(`/gate?key=${high}`)
    await pollUntil(() => gates.length === 1, { intervalMs: 5, what: 'the request to reach the app' })
    // A new map: the slice is cut in two and this server becomes its only holder.
    assign(2, [{ start: 0, end: H, servers: ['me'] }, { start: H, end: H + Q, servers: ['me'] }, { start: H + Q, end: KEYSPACE_SIZE, servers: ['me'] }])
    expect((await get(`/replicas?key=${high}`)).body).toEqual({ replicas: ['me'], generation: 2 })
    gates[0]()
    expect((await pending).body).toEqual({ replicas: ['other', 'me'], generation: 1 })
    await pollUntil(() => s.guard.drainedGeneration === 2, { intervalMs: 5, what: 'the gated request to close' })
    const entries = s.guard.report().entries
    // The gated request's count and cost land on generation 1's range, not on the new slice.
    const old = entries.find((x) => x.start === H && x.end === KEYSPACE_SIZE)
    expect(old.count).toBe(2)
    expect(old.cost).toBeGreaterThan(0)
    expect(entries.find((x) => x.start === H && x.end === H + Q).count).toBe(1)
  })
})

describe('LoadCollector', () => {
  let fake
  afterEach(async () => { if (fake) await close(fake); fake = null })

  test('parses cost and old-format reports without it', async () => {
    const bodies = {
      '/old/v1/load': { instance: 'a', seq: 3, frames: 1, entries: [{ start: 0, end: 10, count: 4 }] },
      '/new/v1/load': { instance: 'b', seq: 1, frames: 2, entries: [{ start: 0, end: 10, count: 4, cost: 30 }, { start: 10, end: 20, count: 0, cost: 6 }] }
    }
    fake = http.createServer((req, res) => {
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify(bodies[req.url.split('?')[0]]))
    })
    const port = await listen(fake, 0, '127.0.0.1')
    const base = `http://127.0.0.1:${port}`
    const collector = new LoadCollector()
    const out = await collector.collect(new Map([['old', { controlUrl: `${base}/old` }], ['new', { controlUrl: `${base}/new` }]]))
    expect(out.failed).toEqual([])
    expect(out.reports.get('old')).toEqual([{ start: 0, end: 10, count: 4, cost: 0, done: 4 }]) // old format: its requests count as finished
    // Divided by the periods the report spans.
    expect(out.reports.get('new')).toEqual([{ start: 0, end: 10, count: 2, cost: 15, done: 2 }, { start: 10, end: 20, count: 0, cost: 3, done: 0 }])
    expect(out.perServer).toEqual({ old: { requests: 4, cost: 0 }, new: { requests: 2, cost: 18 } })
    expect(out.costless).toEqual(['old'])
  })

  test('keeps a plausible hot key per entry (votes per period, like counts) and drops the rest', async () => {
    const body = {
      instance: 'c',
      seq: 1,
      frames: 2,
      entries: [
        { start: 0, end: 10, count: 8, cost: 8, hot: { key: 3, votes: 6 } },
        { start: 10, end: 20, count: 8, cost: 8, hot: { key: 25, votes: 2 } }, // outside its range
        { start: 20, end: 30, count: 8, cost: 8, hot: { key: 21, votes: 9 } }, // more votes than requests
        { start: 30, end: 40, count: 8, cost: 8, hot: { key: 31.5, votes: 2 } }, // not a slice key
        { start: 40, end: 50, count: 8, cost: 8, hot: 'x' }
      ]
    }
    fake = http.createServer((req, res) => {
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify(body))
    })
    const port = await listen(fake, 0, '127.0.0.1')
    const out = await new LoadCollector().collect(new Map([['s', { controlUrl: `http://127.0.0.1:${port}` }]]))
    const entries = out.reports.get('s')
    expect(entries[0]).toEqual({ start: 0, end: 10, count: 4, cost: 4, done: 4, hot: { key: 3, votes: 3 } })
    for (const e of entries.slice(1)) expect(e.hot).toBeUndefined()
    expect(entries).toHaveLength(5) // the counts stay, whatever their votes
  })
})

describe('the controller balances on cost by default', () => {
  const closers = []
  const hung = [] // responses of POST /hang, held open until the test ends
  afterEach(async () => {
    for (const res of hung.splice(0)) res.end()
    for (const c of closers.splice(0).reverse()) await c()
  })

  /** Two app servers, one slice each (the paper's initial layout); each request states its cost (10 ms on app-1's key, 1 ms on app-2's). POST /hang is a write that stays open. */
  async function stack (loadMetric, controllerOptions = {}) {
    const strategyOptions = { initialSlicesPerServer: 1, ...controllerOptions.strategyOptions }
    const controller = createController({ periodMs: 600000, startupFenceMs: 0, quietBelow: 0, ...(loadMetric ? { loadMetric } : {}), ...controllerOptions, strategyOptions })
    await controller.start()
    closers.push(() => controller.close())
    const members = {}
    for (const id of ['app-1', 'app-2']) {
      const app = express.Router()
      app.get('/work', (req, res) => {
        setRequestCost(req, id === 'app-1' ? 10 : 1)
        res.json({ ok: true })
      })
      app.post('/hang', (req, res) => { hung.push(res) })
      // Collection by HTTP (no lease stream): a test below hangs a control port to make a load unknown.
      const s = createAppServer({ id, app, controllerUrl: controller.url, leaseStream: false })
      await s.start()
      closers.push(() => s.close())
      members[id] = s
    }
    await pollUntil(async () => {
      const a = controller.assignment
      return a && Object.keys(a.servers).length === 2 && (await controller.settled(100)) &&
        Object.values(members).every((m) => m.guard.generation === controller.assignment.generation)
    }, { what: 'both servers to hold the settled assignment' })
    return { controller, members }
  }

  /** 20 requests to each server for a key it holds (same counts, different cost); `map.keys[id]` is the key's slice key. */
  async function drive ({ controller, members }, slices = 2) {
    const map = new SliceMap(controller.assignment)
    if (slices !== null) expect(map.size).toBe(slices)
    map.keys = {}
    for (const id of ['app-1', 'app-2']) {
      const i = map.owners.indexOf(id)
      const key = keyIn(map.starts[i], i + 1 < map.size ? map.starts[i + 1] : KEYSPACE_SIZE)
      map.keys[id] = sliceKey(key)
      for (let n = 0; n < 20; n++) expect((await call(`${members[id].urls.url}/work?key=${key}`)).status).toBe(200)
    }
    await pollUntil(() => Object.values(members).every((m) => m.guard.current.inflight === 0), { intervalMs: 5, what: 'every request to close' })
    return map
  }

  /** The layout the controller commits is what the strategy makes of these per-slice loads. */
  const slicesOf = (a) => a.slices.map((s) => ({ start: s.start, end: s.end, servers: s.servers }))
  // Each slice's one key carried all its requests: the controller passes it as the slice's hot key.
  const hotKeysOf = (before, perOwner) => before.owners.map((id) => ({ key: before.keys[id], load: perOwner[id] }))
  const expected = (before, perOwner) => slicesOf(getStrategy('chopper').rebalance(before.assignment, Float64Array.from(before.owners, (id) => perOwner[id]), {}, { unknownServers: [], hotKeys: hotKeysOf(before, perOwner) }))

  test('same request counts, one slice 10x costlier per request: the strategy sees the costly one as hot', async () => {
    const st = await stack()
    const before = await drive(st)
    const round = await st.controller.runRound()
    expect(round.loadMetric).toBe('cost')
    expect(round.perServerRequests).toEqual({ 'app-1': 20, 'app-2': 20 })
    expect(round.perServerCost).toEqual({ 'app-1': 200, 'app-2': 20 })
    expect(round.perServer).toEqual(round.perServerCost)
    expect(round.totalLoad).toBeCloseTo(220)
    expect(round.imbalance).toBeCloseTo(200 / 110)
    expect(round.changed).toBe(true)
    await pollUntil(() => st.controller.settled(100), { what: 'the handoff to be granted' })
    // The strategy was given 200 ms against 20 ms, not 20 requests against 20.
    const want = expected(before, { 'app-1': 200, 'app-2': 20 })
    expect(want).not.toEqual(expected(before, { 'app-1': 20, 'app-2': 20 }))
    expect(slicesOf(st.controller.assignment)).toEqual(want)
    // app-1's one key carried all of its slice's requests: the round cut it out (hot-key cuts)
    const k = before.keys['app-1']
    expect(st.controller.assignment.slices.some((x) => x.start === k && x.end === k + 1)).toBe(true)
    const status = (await call(`${st.controller.url}/v1/status`)).body
    expect(status.loadMetric).toBe('cost')
    expect(status.servers['app-1']).toMatchObject({ lastLoad: 200, lastRequests: 20, lastCost: 200 })
    expect(status.servers['app-2']).toMatchObject({ lastLoad: 20, lastRequests: 20, lastCost: 20 })
  })

  test('the strategy is told how many requests the costs were measured over (for chopper\'s noise floor)', async () => {
    const st = await stack()
    const before = await drive(st)
    const spy = jest.spyOn(getStrategy('chopper'), 'rebalance')
    try {
      await st.controller.runRound()
      expect(spy).toHaveBeenCalledTimes(1)
      // and each slice's hottest key, from the servers' votes: here the one key each slice was sent
      expect(spy.mock.calls[0][3]).toEqual({ unknownServers: [], requests: 40, hotKeys: hotKeysOf(before, { 'app-1': 200, 'app-2': 20 }) })
    } finally {
      spy.mockRestore()
    }
  })

  test('the request count it is told covers fresh reports only, not the stale counts kept for a server whose load is unknown', async () => {
    const st = await stack(undefined, { requestTimeoutMs: 300 })
    await drive(st)
    await st.controller.runRound() // both report: app-1's counts are kept as its last known
    await pollUntil(() => st.controller.settled(100), { what: 'the handoff to be granted' })
    const map = new SliceMap(st.controller.assignment)
    const i = map.owners.indexOf('app-2')
    const key = keyIn(map.starts[i], i + 1 < map.size ? map.starts[i + 1] : KEYSPACE_SIZE)
    for (let n = 0; n < 10; n++) expect((await call(`${st.members['app-2'].urls.url}/work?key=${key}`)).status).toBe(200)
    await pollUntil(() => st.members['app-2'].guard.current.inflight === 0, { intervalMs: 5, what: 'every request to close' })
    // app-1's control port hangs: its load is unknown this round.
    const ctl = st.members['app-1'].listeners.control
    ctl.removeAllListeners('request')
    ctl.on('request', () => {})
    const spy = jest.spyOn(getStrategy('chopper'), 'rebalance')
    try {
      const round = await st.controller.runRound()
      expect(round.unknown).toEqual(['app-1'])
      expect(round.perServerRequests['app-1']).toBeGreaterThan(0) // its last known counts stand in for its load
      expect(round.perServerRequests['app-2']).toBeGreaterThan(0)
      expect(spy).toHaveBeenCalledTimes(1)
      expect(spy.mock.calls[0][3]).toMatchObject({ unknownServers: ['app-1'], requests: round.perServerRequests['app-2'] })
      // the unknown server's kept counts carry no votes (stale): only app-2's slice names a hot key
      const hot = spy.mock.calls[0][3].hotKeys
      expect(hot.filter((h) => h !== null)).toHaveLength(1)
      expect(spy.mock.calls[0][0].slices[hot.findIndex((h) => h !== null)].servers[0]).toBe('app-2')
    } finally {
      spy.mockRestore()
    }
  })

  test('a quiet round (every server busy for less than quietBelow of the period) runs no strategy; a busier one does', async () => {
    // 200 ms of app-1's busy time in a 600 s period: far below half of it
    const st = await stack(undefined, { quietBelow: 0.5 })
    const generation = st.controller.assignment.generation
    await drive(st)
    const spy = jest.spyOn(getStrategy('chopper'), 'rebalance')
    try {
      const round = await st.controller.runRound()
      expect(round.quiet).toBe(true)
      expect(round.changed).toBe(false)
      expect(round.imbalance).toBeCloseTo(200 / 110) // measured and reported all the same
      expect(spy).not.toHaveBeenCalled()
      expect(st.controller.assignment.generation).toBe(generation)
      expect((await call(`${st.controller.url}/metrics`)).body).toMatch(/chopper_controller_quiet_rounds_total 1\n/)
    } finally {
      spy.mockRestore()
    }
  })

  test('a round is not quiet once a server was busy for quietBelow of the period (here 180 ms of 600 s)', async () => {
    const st = await stack(undefined, { quietBelow: 0.0003 })
    await drive(st)
    const round = await st.controller.runRound()
    expect(round.quiet).toBe(false)
    expect(round.changed).toBe(true)
  })

  test('a round held by a handoff in progress is not reported quiet, however light its load', async () => {
    // One server per slice (no replicas), so a move takes a range from app-1 and needs a handoff.
    const st = await stack(undefined, { quietBelow: 0.0003, strategyOptions: { replicate: false } }) // 180 ms of the 600 s period
    const keyOf = (id) => {
      const map = new SliceMap(st.controller.assignment)
      const i = map.owners.indexOf(id)
      return keyIn(map.starts[i], i + 1 < map.size ? map.starts[i + 1] : KEYSPACE_SIZE)
    }
    // A write on app-1 that does not finish: a handoff away from app-1 waits for it (or its lease).
    const write = http.request(`${st.members['app-1'].urls.url}/hang?key=${keyOf('app-1')}`, { method: 'POST' })
    write.on('error', () => {}) // ended with the test
    write.end()
    closers.push(() => write.destroy())
    await pollUntil(() => hung.length === 1, { intervalMs: 5, what: 'the write to be admitted' })
    // app-2's first key stays app-2's: moves only take load off the hot app-1
    const keys = { 'app-2': keyOf('app-2') }
    /** n requests to `id` on a key it holds, each closed (app-1 keeps the hung write). */
    const load = async (id, n) => {
      const key = keys[id] || keyOf(id)
      for (let k = 0; k < n; k++) expect((await call(`${st.members[id].urls.url}/work?key=${key}`)).status).toBe(200)
      await pollUntil(() => st.members[id].guard.running === (id === 'app-1' ? 1 : 0), { intervalMs: 5, what: 'every request to close' })
    }
    // 200 ms on app-1 a round: busy enough for the strategy; the first round splits, a later one moves load off app-1.
    let moving = false
    for (let r = 0; r < 4 && !moving; r++) {
      await load('app-1', 20)
      const round = await st.controller.runRound()
      expect(round.quiet).toBe(false)
      if (!round.changed) continue
      moving = st.controller.status().handoff.inProgress
      if (!moving) expect(await st.controller.settled(2000)).toBe(true)
    }
    expect(moving).toBe(true) // app-1 still runs a write admitted under a map before the move
    expect(st.controller.status().handoff.waitingFor).toHaveProperty('app-1')
    // The next round's load (20 ms, all on app-2) is under quietBelow, but the handoff is what holds the strategy.
    await load('app-2', 20)
    const held = await st.controller.runRound()
    expect(held.perServerCost).toEqual({ 'app-1': 0, 'app-2': 20 })
    expect(held.changed).toBe(false)
    expect(held.quiet).toBe(false)
    expect(st.controller.status().handoff.inProgress).toBe(true) // still: the round ran while it was
    expect((await call(`${st.controller.url}/metrics`)).body).toMatch(/chopper_controller_quiet_rounds_total 0\n/)
  })

  test('a server that joins a quiet cluster gets its first slices in its membership batch, not after rounds', async () => {
    const st = await stack(undefined, { quietBelow: 0.5 })
    await drive(st)
    expect((await st.controller.runRound()).quiet).toBe(true) // load seen: a join no longer lays the keyspace out afresh
    const before = st.controller.assignment.slices.length
    const app = express.Router()
    app.get('/work', (req, res) => res.json({ ok: true }))
    const third = createAppServer({ id: 'app-3', app, controllerUrl: st.controller.url })
    await third.start()
    closers.push(() => third.close())
    await pollUntil(() => Object.hasOwn(st.controller.assignment.servers, 'app-3'), { what: 'app-3 in the assignment' })
    expect(await st.controller.settled(5000)).toBe(true)
    const holds = (id) => st.controller.assignment.slices.some((sl) => sl.servers.includes(id))
    // placed by the batch (controller/join-placement.js), with no round run
    expect(holds('app-3')).toBe(true)
    expect(st.controller.assignment.slices.length).toBeGreaterThanOrEqual(before)
    await drive(st, null)
    expect((await st.controller.runRound()).quiet).toBe(true) // and quiet, as it holds one
  })

  test('quietBelow is validated', () => {
    for (const quietBelow of [-0.1, 1.5, '0.5', NaN]) expect(() => createController({ quietBelow })).toThrow(/invalid quietBelow/)
  })

  test('with loadMetric requests the same traffic is balanced: the strategy sees equal loads', async () => {
    const st = await stack('requests')
    const before = await drive(st)
    const round = await st.controller.runRound()
    expect(round.loadMetric).toBe('requests')
    expect(round.perServer).toEqual({ 'app-1': 20, 'app-2': 20 })
    expect(round.perServerCost).toEqual({ 'app-1': 200, 'app-2': 20 })
    expect(round.imbalance).toBe(1)
    await pollUntil(() => st.controller.settled(100), { what: 'any handoff to be granted' })
    expect(slicesOf(st.controller.assignment)).toEqual(expected(before, { 'app-1': 20, 'app-2': 20 }))
    const status = (await call(`${st.controller.url}/v1/status`)).body
    expect(status.servers['app-1']).toMatchObject({ lastLoad: 20, lastRequests: 20, lastCost: 200 })
  })
})
