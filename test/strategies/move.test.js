'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { movePhase, raisesImbalance } = require('../../controller/strategies/move')
const { U, working, view } = require('./helpers')

const ALL = KEYSPACE_SIZE
const run = (spec, ids, opts = {}) => movePhase(working(spec), ids, { ratio: 1.25, churnLimit: ALL, ...opts })
const moves = (r) => r.ops.map((o) => [o.from, o.to, o.load])

// Slices are written [units of 1/16 keyspace, owner, load].
describe('move phase (paper 5.2.3)', () => {
  test('moves the hottest acceptable slice to the coolest server, then stops when hottest/coolest < ratio', () => {
    // a = 100, b = 10: the 50 moves (b ends at 60 <= 100); then 60 / 50 = 1.2 < 1.25
    const r = run([[4, 'a', 50], [4, 'a', 30], [4, 'a', 20], [4, 'b', 10]], ['a', 'b'])
    expect(view(r.slices)).toEqual([[4, 'b', 50], [4, 'a', 30], [4, 'a', 20], [4, 'b', 10]])
    expect(moves(r)).toEqual([['a', 'b', 50]])
    expect(r.churn).toBe(4 * U)
    expect(r.stop).toBe('ratio')
  })

  test('meanRatio: keeps moving while the hottest is above meanRatio x the mean, but only onto receivers that stay at or below it', () => {
    // Many servers near the mean: a = 120, b..e = 95 each (mean 100). a/coolest = 1.26 >= 1.25 would move anyway;
    // with a = 118, a/coolest = 1.24 < 1.25: the paper's rule stops, a stays 18 % above the mean.
    const spec = [[2, 'a', 60], [2, 'a', 40], [2, 'a', 10], [2, 'a', 8], [2, 'b', 95], [2, 'c', 96], [2, 'd', 95], [2, 'e', 96]]
    const ids = ['a', 'b', 'c', 'd', 'e']
    const paper = run(spec, ids)
    expect(paper.ops).toEqual([])
    expect(paper.stop).toBe('ratio')
    // meanRatio 1.05: the ceiling is 105.6 (mean 100.6). The 10 (b: 105) and the 8 (d: 103) move;
    // the 40 or 60 would leave their receiver above the ceiling, so they stay.
    const r = run(spec, ids, { meanRatio: 1.05 })
    expect(moves(r)).toEqual([['a', 'b', 10], ['a', 'd', 8]])
    expect(r.stop).toBe('ratio')
    // A ceiling no move can reach: nothing swaps which server is too hot.
    expect(run([[4, 'a', 60], [4, 'a', 60], [4, 'b', 100], [4, 'c', 100]], ['a', 'b', 'c'], { meanRatio: 1.01 }).ops).toEqual([])
  })

  test('the ratio threshold: below it nothing moves, at it the move happens', () => {
    const spec = [[4, 'a', 50], [4, 'a', 30], [4, 'a', 20], [4, 'b', 10]] // hottest / coolest = 10
    const below = run(spec, ['a', 'b'], { ratio: 10.5 })
    expect(below.ops).toEqual([])
    expect(below.stop).toBe('ratio')
    expect(run(spec, ['a', 'b'], { ratio: 10 }).ops).toHaveLength(1)
  })

  test('skips a slice that would make the coolest server hotter than the donor was', () => {
    // moving the 96 would give b 106 > 100: skipped, the 4 moves instead
    const r = run([[4, 'a', 96], [4, 'a', 4], [8, 'b', 10]], ['a', 'b'])
    expect(r.ops).toEqual([{ op: 'move', start: 4 * U, end: 8 * U, from: 'a', to: 'b', load: 4, churn: 4 * U }])
  })

  test('the donor\'s own load bounds the receiver, also when the donor is not the hottest server', () => {
    // a (100, one slice) cannot donate; c (80) is the donor. Its 70 would make b 90: above c's 80
    // (step 4b) though not above a's 100 (so 4c alone would allow it). The 10 moves instead.
    const r = run([[8, 'a', 100], [2, 'c', 70], [2, 'c', 10], [4, 'b', 20]], ['a', 'b', 'c'])
    expect(moves(r)).toEqual([['c', 'b', 10]])
  })

  test('raisesImbalance: true only when max/mean would grow', () => {
    expect(raisesImbalance([100, 10, 50], 0, 1, 95)).toBe(true) // 105 > 100
    expect(raisesImbalance([100, 10, 50], 0, 1, 40)).toBe(false) // 60 / 50 / 50
    expect(raisesImbalance([100, 100, 10], 0, 2, 20)).toBe(false) // the max stays 100: not greater
  })

  test('never moves slices off a server that received slices this round (no back-and-forth)', () => {
    // a = 100, b = 15: the 60 moves to b (75). b is now hottest (75 vs 40) but was a receiver,
    // so it may not give anything back, and a is the coolest: the phase ends
    const r = run([[4, 'a', 60], [4, 'a', 40], [4, 'b', 10], [4, 'b', 5]], ['a', 'b'])
    expect(moves(r)).toEqual([['a', 'b', 60]])
    expect(r.stop).toBe('no-candidate')
  })

  test('falls back to the second hottest server when the hottest has a single slice', () => {
    // a owns one slice (left for split); c gives its 50 to b
    const r = run([[8, 'a', 100], [2, 'c', 50], [2, 'c', 30], [4, 'b', 10]], ['a', 'b', 'c'])
    expect(moves(r)).toEqual([['c', 'b', 50]])
    expect(view(r.slices)[0]).toEqual([8, 'a', 100])
  })

  describe('move churn limit', () => {
    // a = 100, b = c = 10. First move: a's 45 (3 units) to b. Second: a's other 45 to c.
    const spec = [[3, 'a', 45], [3, 'a', 45], [2, 'a', 10], [4, 'b', 10], [4, 'c', 10]]

    test('stops the whole phase when the next move would exceed it', () => {
      const r = run(spec, ['a', 'b', 'c'], { churnLimit: 5 * U })
      expect(moves(r)).toEqual([['a', 'b', 45]])
      expect(r.stop).toBe('churn-limit')
      // the 2-unit slice would still have fitted, but the paper stops rather than look further
      expect(r.churn).toBe(3 * U)
    })

    test('allows moves up to the limit exactly', () => {
      const r = run(spec, ['a', 'b', 'c'], { churnLimit: 6 * U })
      expect(moves(r)).toEqual([['a', 'b', 45], ['a', 'c', 45]])
    })

    test('a slice wider than the whole budget is skipped, not a reason to stop (skipOverBudget)', () => {
      const wide = [[4, 'a', 50], [1, 'a', 30], [3, 'a', 20], [8, 'b', 10]]
      const r = run(wide, ['a', 'b'], { churnLimit: 3 * U })
      // the 50 (4 units) can never fit a 3-unit budget: the 30 moves; then the 20 would exceed what is left
      expect(moves(r)).toEqual([['a', 'b', 30]])
      expect(r.stop).toBe('churn-limit')
      const literal = run(wide, ['a', 'b'], { churnLimit: 3 * U, skipOverBudget: false })
      expect(literal.ops).toEqual([])
      expect(literal.stop).toBe('churn-limit')
    })
  })

  test('never moves a slice that carries no load', () => {
    const r = run([[4, 'a', 0], [4, 'a', 0], [4, 'a', 100], [4, 'b', 10]], ['a', 'b'])
    expect(r.ops).toEqual([])
    expect(r.stop).toBe('no-candidate')
  })

  test('a coolest server with zero load counts as an infinite ratio', () => {
    // b was just added and owns nothing
    const r = run([[8, 'a', 10], [8, 'a', 10]], ['a', 'b'], { ratio: 1000 })
    expect(moves(r)).toEqual([['a', 'b', 10]])
    expect(r.stop).toBe('ratio')
  })

  test('does not mutate its input', () => {
    const input = working([[4, 'a', 50], [4, 'a', 30], [4, 'a', 20], [4, 'b', 10]])
    const snapshot = JSON.stringify(input)
    movePhase(input, ['a', 'b'], { ratio: 1.25, churnLimit: ALL })
    expect(JSON.stringify(input)).toBe(snapshot)
  })
})
