'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { validateAssignment, ownedRanges, serverLoads, spreadLoads, sameLayout } = require('../../core/assignment')
const bch = require('../../controller/strategies/bounded-consistent-hash')
const ch = require('../../controller/strategies/consistent-hash')
const { prng, deepFreeze } = require('./helpers')

const url = (id) => `http://127.0.0.1:1/${id}`
const serversOf = (ids) => Object.fromEntries(ids.map((id) => [id, { url: url(id) }]))

/** Per-server loads of `next`, with the last period's per-slice loads of `prev` spread uniformly. */
function loadsAfter (prev, loads, next) {
  const reports = prev.slices.map((s, i) => ({ start: s.start, end: s.end, count: loads[i] }))
  return serverLoads(next, spreadLoads(next, reports))
}

describe('bounded-consistent-hash strategy', () => {
  test('with no load it is exactly the consistent-hash ring', () => {
    const servers = serversOf(['a', 'b', 'c', 'd', 'e'])
    const ring = ch.initial(servers)
    expect(bch.initial(servers)).toEqual(ring)
    expect(sameLayout(bch.rebalance(ring, ring.slices.map(() => 0)), ring)).toBe(true)
    expect(bch.addServer(ring, 'f', url('f'))).toEqual(ch.addServer(ring, 'f', url('f')))
    expect(bch.removeServer(ring, 'c')).toEqual(ch.removeServer(ring, 'c'))
  })

  test('no server ends above balanceFactor x mean when no piece is heavier than (balanceFactor - 1) x mean', () => {
    const rand = prng('bounded-feasible')
    let checked = 0
    for (let c = 0; c < 40; c++) {
      const n = 2 + Math.floor(rand() * 10)
      const factor = 1.1 + rand() * 0.5
      const ring = ch.initial(serversOf(Array.from({ length: n }, (_, i) => `s${i}`)), { vnodes: 50 })
      // skewed: a few arcs of the ring much hotter, every slice well under (factor - 1) x mean
      const raw = ring.slices.map((s) => (rand() < 0.1 ? 8 : 1) * rand())
      const total = raw.reduce((x, y) => x + y, 0)
      const maxSlice = Math.max(...raw)
      if (maxSlice > (factor - 1) * total / n) continue
      checked++
      const loads = deepFreeze(raw)
      const next = bch.rebalance(deepFreeze(ring), loads, { vnodes: 50, balanceFactor: factor })
      validateAssignment(next)
      const per = loadsAfter(ring, loads, next)
      for (const v of Object.values(per)) expect(v.load).toBeLessThanOrEqual(factor * total / n * (1 + 1e-9))
    }
    expect(checked).toBeGreaterThan(20)
  })

  test('the bound bites where the plain ring is overloaded, and the result is stable under the same loads', () => {
    const servers = serversOf(['a', 'b', 'c', 'd'])
    const ring = bch.initial(servers, { vnodes: 20 })
    // the keys of the ring's first quarter are ten times hotter
    const loads = ring.slices.map((s) => (s.end - s.start) / KEYSPACE_SIZE * 1000 * (s.start < KEYSPACE_SIZE / 4 ? 10 : 1))
    const r1 = bch.boundedRound(ring, loads, { vnodes: 20 })
    const perRing = Object.values(serverLoads(ring, loads)).map((v) => v.load)
    const per = Object.values(serverLoads(r1.assignment, r1.loads)).map((v) => v.load)
    const mean = per.reduce((x, y) => x + y, 0) / per.length
    expect(Math.max(...perRing)).toBeGreaterThan(1.25 * mean)
    expect(Math.max(...per)).toBeLessThanOrEqual(1.25 * mean * (1 + 1e-9))
    // the same period's loads, re-measured on the new layout, give the same layout
    const r2 = bch.boundedRound(r1.assignment, r1.loads, { vnodes: 20 })
    expect(sameLayout(r2.assignment, r1.assignment)).toBe(true)
  })

  test('a displaced piece goes clockwise: to the next ring server with room', () => {
    const servers = serversOf(['a', 'b', 'c'])
    const plain = bch.initial(servers, { vnodes: 1 })
    // the ring's arcs cut into 10 slices each, so an arc's load can be shared out
    const ring = { ...plain, slices: plain.slices.flatMap((s) => Array.from({ length: 10 }, (_, k) => ({ start: s.start + Math.floor((s.end - s.start) * k / 10), end: s.start + Math.floor((s.end - s.start) * (k + 1) / 10), servers: s.servers }))) }
    const points = bch.ringPoints(['a', 'b', 'c'], 1)
    // all load on one server's ring arc: it keeps what fits, the rest goes to the next server clockwise
    const hot = points[1].owner
    const loads = ring.slices.map((s) => (s.servers[0] === hot ? 300 * (s.end - s.start) / totalOf(ring, hot) : 0))
    const next = bch.rebalance(ring, loads, { vnodes: 1, balanceFactor: 1.5 })
    const per = loadsAfter(ring, loads, next)
    expect(per[hot].load).toBeLessThanOrEqual(150 + 1e-6)
    expect(per[points[2].owner].load).toBeGreaterThan(100) // the successor took the overflow
  })

  test('unknown servers keep exactly their keys and take no overflow', () => {
    const servers = serversOf(['a', 'b', 'c', 'd'])
    const ring = bch.initial(servers, { vnodes: 10 })
    const loads = ring.slices.map((s) => (s.servers[0] === 'a' ? 100 : 1))
    const next = bch.rebalance(ring, loads, { vnodes: 10 }, { unknownServers: ['b'] })
    expect(ownedRanges(next, 'b')).toEqual(ownedRanges(ring, 'b'))
  })
})

function totalOf (a, id) {
  return ownedRanges(a, id).reduce((x, r) => x + r.end - r.start, 0)
}
