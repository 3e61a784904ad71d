'use strict'

// Load measured as cost (issue 10, item 3): the ledger, the shard guard's
// per-slice busy time across map changes, and the controller's load metric.
const { ShardGuard } = require('../../appserver-lib/index.js')
const { LoadLedger } = require('../../appserver-lib/load-ledger')
const { LOAD_METRICS, validateLoadMetric, spreadMetric, totals } = require('../../core/load-metric')
const { createController } = require('../../controller')
const { sliceKey, KEYSPACE_SIZE } = require('../../core/keyspace')

const servers = { me: { url: 'http://127.0.0.1:1' }, other: { url: 'http://127.0.0.1:2' } }
const H = KEYSPACE_SIZE / 2
const Q = KEYSPACE_SIZE / 4
const halves = (generation) => ({
  generation,
  slices: [{ start: 0, end: H, servers: ['me'] }, { start: H, end: KEYSPACE_SIZE, servers: ['me'] }],
  servers
})
const quarters = (generation) => ({
  generation,
  slices: [0, 1, 2, 3].map((q) => ({ start: q * Q, end: (q + 1) * Q, servers: ['me'] })),
  servers
})
const keyIn = (lo, hi) => { for (let i = 0; ; i++) { const k = `k${i}`; const h = sliceKey(k); if (h >= lo && h < hi) return k } }

/** Admit `appKey` as the middleware does: slice index, then an in-flight token. */
function start (g, appKey) {
  const slice = g.admitSliceKey(sliceKey(appKey))
  expect(slice).toBeGreaterThanOrEqual(0)
  return { slice, token: g.begin() }
}

describe('LoadLedger with cost', () => {
  test('reports cost next to count, keeps it until acknowledged, and sums frames', () => {
    const l = new LoadLedger()
    l.add(0, 10, 2, 4.5)
    l.add(10, 20, 0, 3) // a cost that arrived after its count was flushed
    l.add(20, 30, 0, 0) // nothing: not recorded
    const r = l.read()
    expect(r.entries).toEqual([{ start: 0, end: 10, count: 2, cost: 4.5 }, { start: 10, end: 20, count: 0, cost: 3 }])
    // The answer was lost: read again with nothing acknowledged; nothing lost, nothing doubled.
    l.add(0, 10, 1, 0.25)
    const again = l.read({ instance: r.instance, seq: r.seq - 1 })
    expect(again.entries).toEqual([{ start: 0, end: 10, count: 3, cost: 4.75 }, { start: 10, end: 20, count: 0, cost: 3 }])
    expect(again.frames).toBe(2)
    // Acknowledged: only what came after; another incarnation's ack is ignored.
    l.add(0, 10, 0, 1)
    expect(l.read({ instance: 'someone-else', seq: 1e9 }).entries).toEqual([{ start: 0, end: 10, count: 3, cost: 5.75 }, { start: 10, end: 20, count: 0, cost: 3 }])
    const latest = l.read({ instance: again.instance, seq: again.seq })
    expect(latest.entries).toEqual([{ start: 0, end: 10, count: 0, cost: 1 }])
  })

  test('folding unacknowledged frames keeps the cost', () => {
    const l = new LoadLedger({ maxFrames: 2 })
    for (let i = 0; i < 5; i++) {
      l.add(0, 10, 1, 2)
      l.read()
    }
    const r = l.read()
    expect(r.entries).toEqual([{ start: 0, end: 10, count: 5, cost: 10 }])
    expect(r.frames).toBe(6)
  })
})

describe('ShardGuard cost per slice', () => {
  test('a request finishing after a map change costs its range in the map that admitted it', () => {
    const g = new ShardGuard({ serverId: 'me' })
    g.setAssignment(halves(1))
    const low = keyIn(0, Q) // slice 0 of both maps
    const high = keyIn(H, KEYSPACE_SIZE)
    const a = start(g, low)
    const b = start(g, high)
    g.end(b.token, b.slice, 2) // finished under its own map
    g.setAssignment(quarters(2))
    const c = start(g, low)
    g.end(a.token, a.slice, 7) // admitted under generation 1, ends under 2
    g.end(c.token, c.slice, 1)
    expect(g.report().entries).toEqual([
      { start: 0, end: Q, count: 1, cost: 1, done: 1, hot: { key: sliceKey(low), votes: 1 } },
      { start: 0, end: H, count: 1, cost: 7, done: 1, hot: { key: sliceKey(low), votes: 1 } },
      { start: H, end: KEYSPACE_SIZE, count: 1, cost: 2, done: 1, hot: { key: sliceKey(high), votes: 1 } }
    ])
    expect(g.drainedGeneration).toBe(2)
  })

  test('a cost still running at a report comes with a later report; none is lost across several map changes', () => {
    const g = new ShardGuard({ serverId: 'me' })
    g.setAssignment(halves(1))
    const low = keyIn(0, Q)
    const a = start(g, low)
    const first = g.report()
    expect(first.entries).toEqual([{ start: 0, end: H, count: 1, cost: 0, hot: { key: sliceKey(low), votes: 1 } }])
    g.setAssignment(quarters(2))
    g.setAssignment(halves(3))
    g.setAssignment(quarters(4))
    const b = start(g, low)
    g.end(b.token, b.slice, 0.5)
    // Read while `a` still runs: its map's token is still in flight.
    expect(g.report({ instance: first.instance, seq: first.seq }).entries).toEqual([{ start: 0, end: Q, count: 1, cost: 0.5, done: 1, hot: { key: sliceKey(low), votes: 1 } }])
    const second = g.report()
    g.end(a.token, a.slice, 9)
    expect(g.report({ instance: second.instance, seq: second.seq }).entries).toEqual([{ start: 0, end: H, count: 0, cost: 9, done: 1 }])
  })

  test('end(token) without a cost (ShardGuard without the middleware) still works and costs nothing', () => {
    const g = new ShardGuard({ serverId: 'me' })
    g.setAssignment(halves(1))
    const k = keyIn(0, H)
    g.admit(k)
    const t = g.begin()
    g.end(t)
    expect(g.report().entries).toEqual([{ start: 0, end: H, count: 1, cost: 0, hot: { key: sliceKey(k), votes: 1 } }])
  })

  test('the token carries the map that admitted the request (replicas for the app)', () => {
    const g = new ShardGuard({ serverId: 'me' })
    g.setAssignment({ generation: 1, slices: [{ start: 0, end: H, servers: ['other', 'me'] }, { start: H, end: KEYSPACE_SIZE, servers: ['me'] }], servers })
    const a = start(g, keyIn(0, H))
    g.setAssignment(halves(2))
    expect(a.token.generation).toBe(1)
    expect(a.token.map.replicas[a.slice]).toEqual(['other', 'me'])
    g.end(a.token, a.slice, 1)
  })
})

describe('load metric', () => {
  const a = { generation: 1, slices: [{ start: 0, end: H, servers: ['me'] }, { start: H, end: KEYSPACE_SIZE, servers: ['other'] }], servers }
  const entries = [{ start: 0, end: H, count: 10, cost: 100 }, { start: H, end: KEYSPACE_SIZE, count: 10, cost: 10 }, { start: 0, end: KEYSPACE_SIZE, count: 4, cost: 8 }]

  test('spreadMetric spreads either field by overlap', () => {
    expect(Array.from(spreadMetric(a, entries, 'requests'))).toEqual([12, 12])
    expect(Array.from(spreadMetric(a, entries, 'cost'))).toEqual([104, 14])
    expect(totals(entries)).toEqual({ requests: 24, cost: 118 })
  })

  test('loadMetric is validated with a typed error naming it', () => {
    expect(LOAD_METRICS).toEqual(['cost', 'requests'])
    expect(validateLoadMetric('requests')).toBe('requests')
    expect(() => validateLoadMetric('bytes')).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ARG', message: expect.stringMatching(/invalid loadMetric: expected one of "cost", "requests", got "bytes"/) }))
    expect(() => createController({ loadMetric: 'count' })).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ARG', message: expect.stringMatching(/loadMetric/) }))
    expect(() => createController({ loadMetric: null })).toThrow(/invalid loadMetric/)
    expect(createController({}).status().loadMetric).toBe('cost')
    expect(createController({ loadMetric: 'requests' }).status().loadMetric).toBe('requests')
  })
})

describe('cost load under overload', () => {
  const { spreadMetric } = require('../../core/load-metric')
  const { KEYSPACE_SIZE } = require('../../core/keyspace')
  test('requests admitted x mean cost per finished request: a server that finishes only its capacity still shows what it was given', () => {
    const half = KEYSPACE_SIZE / 2
    const a = { generation: 1, slices: [{ start: 0, end: half, servers: ['x'] }, { start: half, end: KEYSPACE_SIZE, servers: ['y'] }], servers: { x: { url: 'http://127.0.0.1:1' }, y: { url: 'http://127.0.0.1:2' } } }
    // x admitted 300 requests but finished only 125 (its capacity) at 4 ms each: 500 busy ms;
    // y admitted and finished 100 at 4 ms: 400 busy ms. Busy time alone says 500 vs 400.
    const entries = [{ start: 0, end: half, count: 300, cost: 500, done: 125 }, { start: half, end: KEYSPACE_SIZE, count: 100, cost: 400, done: 100 }]
    expect(Array.from(spreadMetric(a, entries, 'cost'))).toEqual([1200, 400])
    // a slice with no finished request yet takes the mean cost of the others
    const fresh = [{ start: 0, end: half, count: 10, cost: 0, done: 0 }, { start: half, end: KEYSPACE_SIZE, count: 10, cost: 40, done: 10 }]
    expect(Array.from(spreadMetric(a, fresh, 'cost'))).toEqual([40, 40])
  })
})
