'use strict'

const { balancePrimaries } = require('../../controller/strategies/primaries')
const chopper = require('../../controller/strategies/chopper')
const { validateAssignment, keyChurn } = require('../../core/assignment')
const { U, build, deepFreeze } = require('./helpers')

// The primary phase (controller/strategies/primaries.js): a replicated
// slice's writes all go to its primary, so hot slices' primaries are spread.

const slice = (start, servers) => ({ start: start * U, end: (start + 1) * U, servers })
const none = new Set()

describe('balancePrimaries', () => {
  test('two hot slices with one primary: one moves to a server with less pinned, then no move improves', () => {
    const slices = [slice(0, ['a', 'b']), slice(1, ['a', 'c']), slice(2, ['b', 'c'])]
    const { ops } = balancePrimaries(slices, [100, 90, 1], { floor: 10, margin: 0.5, frozen: none })
    // pinned: a 190, b 1. The hottest first: b + 1.5 x 100 < 190, so it goes to b (a 90, b 101);
    // then 90 would need c + 135 < 90: it stays. The cold slice (below the floor) stays.
    expect(slices.map((s) => s.servers)).toEqual([['b', 'a'], ['a', 'c'], ['b', 'c']])
    expect(ops).toEqual([{ op: 'primary', start: 0, end: U, from: 'a', to: 'b', load: 100 }])
  })

  test('a primary moves only when that lowers the pair\'s higher figure by more than the margin', () => {
    const slices = [slice(0, ['a', 'b']), slice(1, ['a', 'b'])]
    // a has 160 pinned, b none: 0 + 1.5 x 100 < 160, so the 100 moves (and then the 60 stays) ...
    expect(balancePrimaries(slices.map((s) => ({ ...s })), [100, 60], { floor: 1, margin: 0.5, frozen: none }).ops).toHaveLength(1)
    // ... but not with a margin of 2 (0 + 3 x 100 and 0 + 3 x 60 are not below 160)
    const kept = slices.map((s) => ({ ...s }))
    expect(balancePrimaries(kept, [100, 60], { floor: 1, margin: 2, frozen: none }).ops).toEqual([])
    expect(kept.map((s) => s.servers[0])).toEqual(['a', 'a'])
    // a move that only swaps which server carries it (50 vs 0 -> 0 vs 50) is no improvement
    const tie = [slice(0, ['b', 'a'])]
    expect(balancePrimaries(tie, [50], { floor: 1, margin: 0, frozen: none }).ops).toEqual([])
  })

  test('the least pinned server wins, ties to the one listed first; the rest keep their order', () => {
    const slices = [slice(0, ['x']), slice(1, ['a', 'b', 'c', 'd']), slice(2, ['a', 'd', 'c', 'b']), slice(3, ['a', 'c', 'b', 'd']), slice(4, ['a', 'b'])]
    const { ops } = balancePrimaries(slices, [50, 100, 100, 100, 0], { floor: 1, margin: 0, frozen: none })
    // a starts with 300: the first goes to b (0, before c and d), the second to d (0, listed
    // before c), the third would only swap a and c (100 + 0 vs 0 + 100): it stays
    expect(slices.map((s) => s.servers)).toEqual([['x'], ['b', 'a', 'c', 'd'], ['d', 'a', 'c', 'b'], ['a', 'c', 'b', 'd'], ['a', 'b']])
    expect(ops.map((o) => [o.start / U, o.from, o.to])).toEqual([[1, 'a', 'b'], [2, 'a', 'd']])
  })

  test('slices on a frozen server, or below the floor, keep their primary, and their load still counts', () => {
    const slices = [slice(0, ['a', 'f']), slice(1, ['a', 'b'])]
    balancePrimaries(slices, [100, 90], { floor: 10, margin: 0.5, frozen: new Set(['f']) })
    expect(slices.map((s) => s.servers[0])).toEqual(['a', 'b']) // the frozen slice's 100 pinned on a pushed the next one off
    const cold = [slice(0, ['a', 'b']), slice(1, ['a', 'b'])]
    expect(balancePrimaries(cold, [9, 8], { floor: 10, margin: 0, frozen: none }).ops).toEqual([])
  })
})

describe('the primary phase in a chopper round', () => {
  // Two hot slices whose primary is a, each with a replica; c writes nothing.
  const { assignment, loads } = build([[4, 'a', 300], [4, 'a', 300], [4, 'b', 30], [4, 'c', 30]])
  const on = (a) => ({ ...a, slices: a.slices.map((s, i) => (i === 0 ? { ...s, servers: ['a', 'b'] } : i === 1 ? { ...s, servers: ['a', 'c'] } : s)) })

  test('spreads the hot slices\' primaries at no churn; balancePrimaries: false leaves them', () => {
    const input = deepFreeze(on(assignment))
    const off = chopper.chopperRound(input, deepFreeze(loads), { balancePrimaries: false, moveReplicas: false })
    const r = chopper.chopperRound(input, deepFreeze(loads), { moveReplicas: false })
    validateAssignment(r.assignment)
    const primaries = (a) => a.slices.filter((s) => s.servers.length > 1 && s.start < 8 * U).map((s) => s.servers[0])
    expect(new Set(primaries(off.assignment))).toEqual(new Set(['a']))
    expect(new Set(primaries(r.assignment)).size).toBeGreaterThan(1)
    expect(r.ops.filter((o) => o.op === 'primary').length).toBeGreaterThan(0)
    // the same servers per slice, only reordered: no key changes hands
    expect(r.assignment.slices.map((s) => [...s.servers].sort())).toEqual(off.assignment.slices.map((s) => [...s.servers].sort()))
    expect(keyChurn(off.assignment, r.assignment)).toBe(0)
    expect(r.churn.total).toBe(off.churn.total)
  })

  test('stable: a round on the same slices and loads changes no primary once none improves', () => {
    const opts = { moveReplicas: false, maxSlices: 6 } // no further splits: the same slices next round
    const first = chopper.chopperRound(deepFreeze(on(assignment)), deepFreeze(loads), opts)
    expect(first.assignment.slices).toHaveLength(6)
    expect(first.ops.filter((o) => o.op === 'primary').length).toBeGreaterThan(0)
    const again = chopper.chopperRound(deepFreeze(first.assignment), deepFreeze(first.loads), opts)
    expect(again.ops.filter((o) => o.op === 'primary')).toEqual([])
    expect(again.assignment.slices).toEqual(first.assignment.slices)
  })
})
