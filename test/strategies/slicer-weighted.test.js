'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { validateAssignment, serverLoads, imbalance, keyChurn } = require('../../core/assignment')
const sw = require('../../controller/strategies/slicer-weighted')
const chopper = require('../../controller/strategies/chopper')
const { weightedMovePhase } = require('../../controller/strategies/weighted-move')
const { movePhase } = require('../../controller/strategies/move')
const { U, working, view, deepFreeze } = require('./helpers')

const url = (id) => `http://127.0.0.1:1/${id}`
const serversOf = (ids) => Object.fromEntries(ids.map((id) => [id, { url: url(id) }]))

describe('weighted move phase', () => {
  // a: a wide slice of 30, a narrow slice of 20, an idle slice; b: 10. Mean 30.
  const spec = [[4, 'a', 30], [1, 'a', 20], [3, 'a', 0], [8, 'b', 10]]

  test('picks the move with the most imbalance reduction per key moved, where chopper takes the hottest', () => {
    const slices = deepFreeze(working(spec))
    const w = weightedMovePhase(slices, ['a', 'b'], { churnLimit: KEYSPACE_SIZE, minWeight: 0 })
    // wide: max(20, 40) = 40, reduction 10/30 over 1/4 of the keys = 1.33;
    // narrow: max(30, 30) = 30, reduction 20/30 over 1/16 = 10.67
    expect(w.ops).toHaveLength(1)
    expect(w.ops[0]).toMatchObject({ from: 'a', to: 'b', start: 4 * U, end: 5 * U, load: 20 })
    expect(w.ops[0].weight).toBeCloseTo((20 / 30) * 16)
    expect(w.stop).toBe('no-candidate') // a = b = 30: any move would overshoot
    expect(w.churn).toBe(U)
    const c = movePhase(slices, ['a', 'b'], { ratio: 1.25, churnLimit: KEYSPACE_SIZE })
    expect(c.ops[0]).toMatchObject({ start: 0, end: 4 * U }) // chopper: hottest acceptable slice first
  })

  test('minWeight and the churn budget stop the phase', () => {
    const slices = working(spec)
    expect(weightedMovePhase(slices, ['a', 'b'], { churnLimit: KEYSPACE_SIZE, minWeight: 11 })).toMatchObject({ ops: [], stop: 'min-weight' })
    // with a budget under one unit only... nothing fits
    expect(weightedMovePhase(slices, ['a', 'b'], { churnLimit: U - 1, minWeight: 0 })).toMatchObject({ ops: [], stop: 'no-candidate' })
  })

  test('a frozen server neither gives nor receives', () => {
    const slices = working([[4, 'a', 30], [1, 'a', 20], [3, 'a', 0], [4, 'u', 0], [4, 'b', 10]])
    const w = weightedMovePhase(slices, ['a', 'b', 'u'], { churnLimit: KEYSPACE_SIZE, minWeight: 0, frozen: new Set(['u']) })
    expect(w.ops.map((o) => o.to)).toEqual(['b'])
    expect(view(w.slices).filter((r) => r[1] === 'u')).toEqual([[4, 'u', 0]])
  })
})

describe('slicer-weighted strategy', () => {
  test('converges on a skewed workload within its per-round churn budget', () => {
    const density = (x) => Math.exp(-8 * x)
    const measure = (a) => a.slices.map((s) => {
      let sum = 0
      for (let k = 0; k < 16; k++) sum += density((s.start + (s.end - s.start) * (k + 0.5) / 16) / KEYSPACE_SIZE)
      return sum / 16 * (s.end - s.start) / KEYSPACE_SIZE * 1e6
    })
    let a = sw.initial(serversOf(['a', 'b', 'c', 'd', 'e']))
    const first = imbalance(serverLoads(a, measure(a)))
    for (let round = 0; round < 10; round++) {
      const r = sw.slicerRound(deepFreeze(a), deepFreeze(measure(a)))
      validateAssignment(r.assignment)
      expect(r.churn.merge).toBeLessThanOrEqual(0.01 * KEYSPACE_SIZE)
      expect(r.churn.move).toBeLessThanOrEqual(0.09 * KEYSPACE_SIZE)
      expect(keyChurn(a, r.assignment)).toBeLessThanOrEqual(0.1 * KEYSPACE_SIZE)
      a = r.assignment
    }
    expect(first).toBeGreaterThan(3)
    expect(imbalance(serverLoads(a, measure(a)))).toBeLessThan(1.25)
  })

  test('membership changes are chopper\'s', () => {
    const a = sw.initial(serversOf(['a', 'b', 'c']))
    const loads = a.slices.map((_, i) => i + 1)
    expect(sw.addServer(a, 'd', url('d'), loads)).toEqual(chopper.addServer(a, 'd', url('d'), loads))
    expect(sw.removeServer(a, 'b', loads, { minWeight: 2 })).toEqual(chopper.removeServer(a, 'b', loads))
    expect(() => sw.addServer(a, 'd', url('d'), loads, { moveRatio: 2 })).toThrow(/unknown slicer-weighted option moveRatio/)
  })
})
