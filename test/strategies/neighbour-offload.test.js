'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { validateAssignment, ownedRanges, serverLoads, imbalance, keyChurn } = require('../../core/assignment')
const { totalLength } = require('../../core/ranges')
const no = require('../../controller/strategies/neighbour-offload')
const { U, build, prng, deepFreeze } = require('./helpers')

const url = (id) => `http://127.0.0.1:1/${id}`
const serversOf = (ids) => Object.fromEntries(ids.map((id) => [id, { url: url(id) }]))

/** Exact per-slice loads for a load density over the keyspace (integrated numerically). */
function measure (a, density) {
  return a.slices.map((s) => {
    const steps = 16
    let sum = 0
    for (let k = 0; k < steps; k++) sum += density((s.start + (s.end - s.start) * (k + 0.5) / steps) / KEYSPACE_SIZE)
    return (sum / steps) * (s.end - s.start) / KEYSPACE_SIZE * 1e6
  })
}

const rangesOf = (a) => Object.fromEntries(Object.keys(a.servers).map((id) => [id, ownedRanges(a, id)]))

describe('neighbour-offload strategy', () => {
  test('initial: contiguous 1/n ranges, each cut into `buckets` slices', () => {
    const a = no.initial(serversOf(['a', 'b', 'c', 'd']), { buckets: 4 })
    validateAssignment(a)
    expect(a.slices).toHaveLength(16)
    for (const [id, ranges] of Object.entries(rangesOf(a))) {
      expect(ranges).toHaveLength(1)
      expect(a.slices.filter((s) => s.servers[0] === id)).toHaveLength(4)
    }
  })

  test('a hot server gives its edge buckets, at most T% of its load, to its least-loaded neighbour', () => {
    const { assignment, loads } = build([[4, 'a', 60], [6, 'b', 20], [6, 'c', 10]])
    const r = no.offloadRound(deepFreeze(assignment), deepFreeze(loads), { buckets: 4, offloadPercent: 25 })
    // a (60) > mean 30 x 1.1; its only neighbour is b: one bucket of 15 = 25% of 60
    expect(r.ops[0]).toEqual({ op: 'offload', from: 'a', to: 'b', start: 3 * U, end: 4 * U, load: 15 })
    expect(r.ops).toHaveLength(1) // b took part, so c (not overloaded anyway) and b are done
    expect(totalLength(ownedRanges(r.assignment, 'a'))).toBe(3 * U)
    expect(ownedRanges(r.assignment, 'b')).toEqual([{ start: 3 * U, end: 10 * U }])
    expect(r.churn).toBe(U)
  })

  test('the least-loaded neighbour is chosen, and the receiver never ends hotter than the donor', () => {
    const { assignment, loads } = build([[4, 'a', 40], [4, 'b', 80], [8, 'c', 30]])
    const r = no.offloadRound(assignment, loads, { buckets: 8, offloadPercent: 45 })
    // b (80) > mean 50 x 1.1; c (30) is cooler than a (40). b's buckets carry 10 each:
    // 45% of 80 allows 3, but c would end at 60 > b's 50; 2 leave c at 50 <= b's 60
    expect(r.ops).toEqual([{ op: 'offload', from: 'b', to: 'c', start: 7 * U, end: 8 * U, load: 20 }])
  })

  test('an unknown neighbour never receives, and its slices stay as they are', () => {
    const { assignment, loads } = build([[2, 'x', 1], [2, 'x', 1], [6, 'a', 90], [6, 'u', 0]])
    const frozen = deepFreeze({ a: assignment, l: loads })
    const r = no.offloadRound(frozen.a, frozen.l, { offloadPercent: 50 }, { unknownServers: ['u'] })
    expect(r.ops.every((o) => o.to !== 'u')).toBe(true)
    expect(r.ops[0]).toMatchObject({ from: 'a', to: 'x' })
    expect(r.assignment.slices.filter((s) => s.servers[0] === 'u')).toEqual(assignment.slices.filter((s) => s.servers[0] === 'u'))
    // with the only neighbour unknown, nothing moves
    const alone = build([[8, 'a', 90], [8, 'u', 0]])
    expect(no.offloadRound(alone.assignment, alone.loads, {}, { unknownServers: ['u'] }).ops).toEqual([])
  })

  test('over rounds on a skewed workload: only adjacent transfers, contiguity kept, churn within budget, imbalance falls', () => {
    const density = (x) => Math.exp(-6 * x) + 0.05
    let a = no.initial(serversOf(['s1', 's2', 's3', 's4', 's5', 's6']))
    const first = imbalance(serverLoads(a, measure(a, density)))
    let previous = first
    for (let round = 0; round < 40; round++) {
      const loads = measure(a, density)
      const r = no.offloadRound(a, loads, { churnLimit: 0.05 })
      validateAssignment(r.assignment)
      const before = rangesOf(a)
      for (const op of r.ops) {
        const [from] = before[op.from]
        const [to] = before[op.to]
        expect(op.start === from.start || op.end === from.end).toBe(true) // an edge of the donor
        expect(op.end === to.start || op.start === to.end).toBe(true) // next to the receiver
        expect(op.load).toBeLessThanOrEqual(serverLoads(a, loads)[op.from].load * 0.1 * (1 + 1e-9))
      }
      for (const ranges of Object.values(rangesOf(r.assignment))) expect(ranges).toHaveLength(1)
      expect(keyChurn(a, r.assignment)).toBe(r.churn)
      expect(r.churn).toBeLessThanOrEqual(0.05 * KEYSPACE_SIZE)
      a = r.assignment
      const now = imbalance(serverLoads(a, measure(a, density)))
      expect(now).toBeLessThanOrEqual(previous * 1.01)
      previous = now
    }
    expect(first).toBeGreaterThan(3)
    expect(previous).toBeLessThan(first * 0.6)
  })

  test('deterministic and pure on random contiguous layouts', () => {
    const rand = prng('neighbour-offload')
    for (let c = 0; c < 50; c++) {
      const ids = Array.from({ length: 2 + Math.floor(rand() * 6) }, (_, i) => `s${i}`)
      const a = deepFreeze(no.initial(serversOf(ids), { buckets: 1 + Math.floor(rand() * 12) }))
      const loads = deepFreeze(a.slices.map(() => Math.floor(rand() ** 3 * 1000)))
      const x = no.rebalance(a, loads)
      expect(no.rebalance(a, loads)).toEqual(x)
      for (const ranges of Object.values(rangesOf(x))) expect(ranges).toHaveLength(1)
    }
  })

  test('addServer cuts the hottest run where its load halves; removeServer gives a run to its cooler neighbour', () => {
    const { assignment, loads } = build([[4, 'a', 10], [8, 'b', 80], [4, 'c', 30]])
    const added = no.addServer(assignment, 'n', url('n'), loads, { buckets: 2 })
    expect(rangesOf(added).b).toEqual([{ start: 4 * U, end: 8 * U }])
    expect(rangesOf(added).n).toEqual([{ start: 8 * U, end: 12 * U }])
    expect(keyChurn(assignment, added)).toBe(4 * U)
    const removed = no.removeServer(assignment, 'b', loads, { buckets: 2 })
    expect(rangesOf(removed).a).toEqual([{ start: 0, end: 12 * U }])
    expect(removed.slices).toHaveLength(4) // a's merged run re-cut into 2 buckets, c's 2
  })
})
