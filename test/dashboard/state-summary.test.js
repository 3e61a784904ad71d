'use strict'

const { summarizeState, summarizeRound, summarizeColumn, summarizeSnapshot, histogram, defaults } = require('../../controller/dashboard/state-summary')
const { frame } = require('../../controller/dashboard/sse-hub')
const { createController } = require('../../controller')
const { createAppServer } = require('../../appserver-lib/index.js')
const compute = require('../../apps/compute')
const { pollUntil } = require('../../core/poll')
const { bigState, bigRound, bigColumn, bigSnapshot, serverId, loadOf } = require('./big-state')

function deepFreeze (o) {
  if (o && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o)
    for (const v of Object.values(o)) deepFreeze(v)
  }
  return o
}

/** Bytes on the wire of one SSE event, as the hub writes it. */
const eventBytes = (event, data) => Buffer.byteLength(frame(event, data))

/** What the controller's two live events would carry at n members, summarized. */
function events (n, options = {}) {
  const state = summarizeState(bigState(n, options))
  return {
    state: eventBytes('state', { state }),
    round: eventBytes('round', { round: summarizeRound(bigRound(n, options)), column: summarizeColumn(bigColumn(n, options)), state })
  }
}

describe('summarizeState', () => {
  test('at or under rowsAbove members: the same object, every row', () => {
    const s = deepFreeze(bigState(defaults.rowsAbove, { frontends: defaults.rowsAbove, lagging: defaults.rowsAbove }))
    expect(summarizeState(s)).toBe(s)
    const small = deepFreeze(bigState(3))
    expect(summarizeState(small, { rowsAbove: 3 })).toBe(small)
  })

  test('above rowsAbove: the servers become counts, hottest, coolest, flagged and two histograms', () => {
    // 51 servers: 2 draining (49, 50), 2 with their load unknown (3, 4), 3 lagging (25..27)
    const s = deepFreeze(bigState(51, { draining: 2, unknown: 2, lagging: 3 }))
    const out = summarizeState(s)
    expect(out).not.toHaveProperty('servers')
    // everything else passes through
    const { servers, ...rest } = s
    expect(out).toMatchObject(rest)
    expect(out.frontends).toBe(s.frontends)
    const sum = out.serverSummary
    expect(sum).toMatchObject({ count: 51, draining: 2, loadUnknown: 2, lagging: 3 })
    expect(sum.slices).toBe(Object.values(servers).reduce((a, m) => a + m.slices, 0))

    const known = Object.entries(servers).filter(([, m]) => !m.loadUnknown).map(([id, m]) => ({ id, load: m.lastLoad, draining: m.draining }))
    const byLoad = (a, b) => b.load - a.load || (a.id < b.id ? -1 : 1)
    expect(sum.hottest.map((r) => r.id)).toEqual(known.sort(byLoad).slice(0, 10).map((r) => r.id))
    expect(sum.hottest.slice(0, 3).map((r) => r.id)).toEqual([serverId(0), serverId(1), serverId(2)])
    expect(sum.hottest[0]).toEqual({
      id: serverId(0),
      load: loadOf(0),
      slices: servers[serverId(0)].slices,
      replicas: 0,
      keyspaceShare: expect.closeTo(1 / 49, 6),
      generation: 1234,
      push: { acked: 1234, lagging: false, failures: 0 },
      draining: false,
      loadUnknown: false,
      collectionFailures: 0,
      leaseRemainingMs: servers[serverId(0)].leaseRemainingMs
    })
    // coolest: lowest first, never a draining server (load 0 because it is leaving)
    const active = known.filter((r) => !r.draining).sort((a, b) => a.load - b.load || (a.id < b.id ? -1 : 1))
    expect(sum.coolest.map((r) => r.id)).toEqual(active.slice(0, 10).map((r) => r.id))
    expect(sum.coolest.some((r) => r.draining)).toBe(false)
    // flagged: load unknown, then lagging, then draining
    expect(sum.flagged.map((r) => r.id)).toEqual([3, 4, 25, 26, 27, 49, 50].map((i) => serverId(i)))
    expect(sum.flagged[0]).toMatchObject({ load: null, loadUnknown: true, collectionFailures: 2 })

    // histograms: every server with a known load, every server's slices
    expect(sum.loadHistogram.counts.reduce((a, b) => a + b, 0)).toBe(49)
    expect(sum.loadHistogram.counts).toHaveLength(10)
    expect(sum.loadHistogram.edges[0]).toBe(0) // the draining servers
    expect(sum.loadHistogram.edges[10]).toBe(loadOf(0))
    expect(sum.loadHistogram.counts[9]).toBe(3) // the three hot servers
    expect(sum.sliceHistogram.counts.reduce((a, b) => a + b, 0)).toBe(51)
    expect(sum.meanLoad).toBeCloseTo(known.reduce((a, r) => a + r.load, 0) / 49, 2)
  })

  test('front ends, lagging pushes and the handoff wait list: each capped past rowsAbove, with its count', () => {
    const s = bigState(3, { frontends: 51 })
    s.frontends['fe-0007'].push = { acked: 1230, lagging: true, failures: 0 }
    s.frontends['fe-0009'].push = { acked: 1233, lagging: true, failures: 4 }
    s.pushes.lagging = Array.from({ length: 60 }, (_, i) => ({ target: `server:${serverId(i)}`, acked: 1233 - (i % 5), failures: i === 42 ? 3 : 0 }))
    s.handoff.inProgress = true
    s.handoff.waitingFor = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [serverId(50 - i), { generation: 1234, leaseLapsesInMs: 100 + i }]))
    deepFreeze(s)
    const out = summarizeState(s)
    expect(out.servers).toBe(s.servers) // 3 rows: unchanged
    expect(out).not.toHaveProperty('frontends')
    expect(out.frontendSummary).toEqual({
      count: 51,
      lagging: 2,
      behind: [{ id: 'fe-0009', push: s.frontends['fe-0009'].push }, { id: 'fe-0007', push: s.frontends['fe-0007'].push }]
    })
    expect(out.pushes.laggingCount).toBe(60)
    expect(out.pushes.lagging).toHaveLength(10)
    expect(out.pushes.lagging[0].target).toBe(`server:${serverId(42)}`) // retrying first, then the furthest behind
    expect(out.pushes.lagging.slice(1).every((l) => l.acked === 1229)).toBe(true)
    expect(out.pushes).toMatchObject({ pushes: 5000, failures: 3, rejected: 0 })
    expect(out.handoff.waitingForCount).toBe(51)
    expect(Object.keys(out.handoff.waitingFor)).toEqual(Array.from({ length: 10 }, (_, i) => serverId(i)))
    expect(out.handoff.waitingFor[serverId(0)]).toEqual({ generation: 1234, leaseLapsesInMs: 150 })
    // Summarizing twice changes nothing (a safe double wiring).
    expect(summarizeState(out)).toEqual(out)
  })

  test('no round yet: no known load, so no hottest or coolest and an empty load histogram', () => {
    const s = bigState(60)
    for (const m of Object.values(s.servers)) m.lastLoad = null
    const sum = summarizeState(s).serverSummary
    expect(sum).toMatchObject({ count: 60, loadUnknown: 0, meanLoad: null, hottest: [], coolest: [], loadHistogram: { edges: [], counts: [] } })
  })

  test('a wrong option is named', () => {
    expect(() => summarizeState(bigState(3), { top: -1 })).toThrow(/invalid top: expected an integer from 0 to 1000, got -1/)
    expect(() => summarizeRound(bigRound(3), { rowsAbove: 'x' })).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ARG' }))
    expect(() => summarizeColumn(bigColumn(3), { bins: 0 })).toThrow(/invalid bins/)
  })
})

describe('summarizeRound and summarizeColumn', () => {
  test('a round: the same object at rowsAbove servers; above, a summary over the servers whose load is known', () => {
    const at = deepFreeze(bigRound(50))
    expect(summarizeRound(at)).toBe(at)
    const r = deepFreeze(bigRound(51, { unknown: 2 }))
    const out = summarizeRound(r)
    for (const k of ['perServer', 'perServerRequests', 'perServerCost']) expect(out).not.toHaveProperty(k)
    const { perServer, perServerRequests, perServerCost, ...rest } = r
    expect(out).toMatchObject(rest)
    expect(out.summary).toMatchObject({ count: 51, loadUnknown: 2 })
    expect(out.summary.hottest[0]).toEqual({ id: serverId(0), load: loadOf(0), requests: loadOf(0), cost: loadOf(0) * 1.5 })
    expect(out.summary.hottest).toHaveLength(10)
    const ids = [...out.summary.hottest, ...out.summary.coolest].map((x) => x.id)
    expect(ids).not.toContain(serverId(3)) // load unknown this round
    expect(out.summary.coolest.map((x) => x.load)).toEqual([...out.summary.coolest.map((x) => x.load)].sort((a, b) => a - b))
    expect(out.summary.loadHistogram.counts.reduce((a, b) => a + b, 0)).toBe(49)
  })

  test('a round with more unknown servers than top lists top of them and counts them all', () => {
    const out = summarizeRound(bigRound(100, { unknown: 30 }))
    expect(out.unknown).toHaveLength(10)
    expect(out.summary.loadUnknown).toBe(30)
  })

  test('a column past rowsAbove primaries keeps only the bucket owners; every bucket keeps its owner', () => {
    const small = deepFreeze(bigColumn(50))
    expect(summarizeColumn(small)).toBe(small)
    const c = deepFreeze(bigColumn(5000))
    const out = summarizeColumn(c)
    expect(out.serverCount).toBe(5000)
    expect(out.servers.length).toBeLessThanOrEqual(256)
    expect(out.servers).toEqual([...out.servers].sort())
    for (let b = 0; b < 256; b++) expect(out.servers[out.owner[b]]).toBe(c.servers[c.owner[b]])
    expect(out.load).toBe(c.load)
    expect(out.moved).toBe(c.moved)
  })

  test('a snapshot: the state and every column summarized; only the newest round keeps its lists', () => {
    const snap = deepFreeze(bigSnapshot(60, { rounds: 5 }))
    const out = summarizeSnapshot(snap)
    expect(out).toMatchObject({ keyspaceSize: snap.keyspaceSize, buckets: 256, historySize: 120 })
    expect(out.state.serverSummary.count).toBe(60)
    expect(out.rounds.map((r) => r.round)).toEqual([1, 2, 3, 4, 5])
    expect(out.rounds.slice(0, 4).every((r) => r.summary.hottest.length === 0 && r.summary.count === 60)).toBe(true)
    expect(out.rounds[4].summary.hottest).toHaveLength(10)
    expect(out.columns.every((c) => c.serverCount === 60)).toBe(true)
  })
})

describe('histogram', () => {
  test('equal bins from the least to the greatest value, the greatest in the last bin', () => {
    expect(histogram([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 5)).toEqual({ edges: [0, 2, 4, 6, 8, 10], counts: [2, 2, 2, 2, 3] })
    expect(histogram([5, 5, 5], 10)).toEqual({ edges: [5, 5], counts: [3] })
    expect(histogram([], 10)).toEqual({ edges: [], counts: [] })
  })

  test('integer bins: whole numbers, never more bins than asked, the last edge past the greatest', () => {
    expect(histogram([1, 2, 2, 3, 7], 10, { integer: true })).toEqual({ edges: [1, 2, 3, 4, 5, 6, 7, 8], counts: [1, 2, 1, 0, 0, 0, 1] })
    const h = histogram([0, 1, 99, 100], 10, { integer: true })
    expect(h.counts).toHaveLength(10)
    expect(h.edges).toEqual([0, 11, 22, 33, 44, 55, 66, 77, 88, 99, 110])
    expect(h.counts).toEqual([2, 0, 0, 0, 0, 0, 0, 0, 0, 2])
  })

  test('every value lands in the bin its published edges say', () => {
    const values = Array.from({ length: 1000 }, (_, i) => ((i * 7919) % 1009) / 7)
    const { edges, counts } = histogram(values, 10)
    const n = counts.length
    const expected = new Array(n).fill(0)
    for (const v of values) {
      let i = 0
      while (i < n - 1 && v >= edges[i + 1]) i++
      expected[i]++
    }
    expect(counts).toEqual(expected)
  })
})

describe('event sizes (the bound: above rowsAbove, a state event <= 16 KB and a round event <= 24 KB at any member count)', () => {
  const KB = 1024
  const worst = { draining: 20, unknown: 20, lagging: 1e9 }
  const withFrontends = (n) => ({ ...worst, lagging: n, frontends: n })

  test.each([
    ['8-character ids', {}],
    ['16-character ids, everything lagging', { prefix: 'app-server-x' }]
  ])('5,000 members, %s: under the bound, and no bigger than at 500', (name, o) => {
    const big = events(5000, { ...withFrontends(5000), ...o })
    const mid = events(500, { ...withFrontends(500), ...o })
    expect(big.state).toBeLessThanOrEqual(16 * KB)
    expect(big.round).toBeLessThanOrEqual(24 * KB)
    // flat in the member count: only the ids' digits differ
    expect(Math.abs(big.state - mid.state)).toBeLessThan(256)
    expect(Math.abs(big.round - mid.round)).toBeLessThan(256)
  })

  test('the largest events are the full rows at rowsAbove members; the snapshot stays under 1 MB', () => {
    const full = events(50, { ...withFrontends(50), prefix: 'app-server-x' })
    expect(full.state).toBeLessThanOrEqual(32 * KB)
    expect(full.round).toBeLessThanOrEqual(40 * KB)
    const raw = bigSnapshot(5000, { prefix: 'app-server-x' })
    const snap = eventBytes('snapshot', summarizeSnapshot(raw))
    expect(snap).toBeLessThanOrEqual(1024 * KB)
    expect(snap * 30).toBeLessThan(eventBytes('snapshot', raw))
  })
})

describe('big-state.js is shaped like the controller it stands in for', () => {
  const closers = []
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c()
  })

  // What state-summary.js reads. Only these are compared: other fields pass
  // through, and the controller may add some without breaking this test.
  const READS = {
    state: ['generation', 'servers', 'frontends', 'handoff', 'pushes'],
    server: ['lastLoad', 'loadUnknown', 'slices', 'replicas', 'keyspaceShare', 'generation', 'push', 'draining', 'collectionFailures', 'leaseRemainingMs'],
    handoff: ['waitingFor'],
    pushes: ['lagging'],
    round: ['perServer', 'perServerRequests', 'perServerCost', 'unknown']
  }

  test('the fields the summary reads are in state(), a server row and a round entry, and in the fixtures', async () => {
    const controller = createController({ periodMs: 600000, startupFenceMs: 0, loadMetric: 'requests' })
    const { url } = await controller.start()
    closers.push(() => controller.close())
    const { app } = await compute.create()
    const s = createAppServer({ id: 'app-1', app, controllerUrl: url })
    await s.start()
    closers.push(() => s.close())
    await pollUntil(() => controller.assignment && !controller.status().handoff.inProgress, { what: 'first assignment' })
    await controller.runRound()
    const { rounds, ...state } = controller.status()
    const fake = bigState(1, { frontends: 0 })
    for (const [real, synthetic, fields] of [
      [state, fake, READS.state],
      [state.servers['app-1'], fake.servers[serverId(0)], READS.server],
      [state.handoff, fake.handoff, READS.handoff],
      [state.pushes, fake.pushes, READS.pushes],
      [rounds[rounds.length - 1], bigRound(1), READS.round]
    ]) {
      expect(Object.keys(real)).toEqual(expect.arrayContaining(fields))
      expect(Object.keys(synthetic)).toEqual(expect.arrayContaining(fields))
    }
    expect(state.servers['app-1'].push).toEqual({ acked: expect.any(Number), lagging: false, failures: 0 })
  })
})
