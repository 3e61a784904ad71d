'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { mergePhase } = require('../../controller/strategies/merge')
const { U, working, view } = require('./helpers')

// Slices are written [units of 1/16 keyspace, owner, load].
describe('merge phase (paper 5.2.2)', () => {
  test('joins adjacent slices while the merged load stays below the mean slice load', () => {
    // mean = 16 / 4 = 4: 1 + 1 = 2 joins, adding the 6 would reach 8
    const r = mergePhase(working([[4, 'a', 1], [4, 'a', 1], [4, 'a', 6], [4, 'b', 8]]), ['a', 'b'], 0)
    expect(view(r.slices)).toEqual([[8, 'a', 2], [4, 'a', 6], [4, 'b', 8]])
    expect(r.churn).toBe(0) // same-owner merges cost nothing, even with a zero budget
    expect(r.ops).toEqual([{ op: 'merge', start: 0, end: 8 * U, server: 'a', slices: 2, load: 2, churn: 0 }])
  })

  test('a merged load equal to the mean is not below it: nothing merges', () => {
    const spec = [[4, 'a', 2], [4, 'a', 2], [4, 'a', 4], [4, 'b', 8]] // mean 4, 2 + 2 = 4
    const r = mergePhase(working(spec), ['a', 'b'], KEYSPACE_SIZE)
    expect(view(r.slices)).toEqual(spec)
    expect(r.ops).toEqual([])
  })

  test('runs of more than two slices merge into one with the summed load', () => {
    // mean = 43 / 5 = 8.6: 1 + 1 + 1 = 3 joins, the 20 does not
    const r = mergePhase(working([[2, 'a', 1], [2, 'a', 1], [2, 'a', 1], [2, 'a', 20], [8, 'b', 20]]), ['a', 'b'], 0)
    expect(view(r.slices)).toEqual([[6, 'a', 3], [2, 'a', 20], [8, 'b', 20]])
    expect(r.ops[0].slices).toBe(3)
  })

  describe('merges across servers', () => {
    const spec = [[6, 'a', 1], [2, 'b', 1], [2, 'a', 20], [6, 'b', 20]] // mean 10.5

    test('the owner of most of the run keeps it, and the rest of the run counts as churn', () => {
      const r = mergePhase(working(spec), ['a', 'b'], 2 * U) // budget exactly the churn
      expect(view(r.slices)).toEqual([[8, 'a', 2], [2, 'a', 20], [6, 'b', 20]])
      expect(r.churn).toBe(2 * U)
      expect(r.ops[0]).toMatchObject({ server: 'a', churn: 2 * U })
    })

    test('the keeper is whichever owner holds more keys, not the first slice', () => {
      const r = mergePhase(working([[2, 'a', 1], [6, 'b', 1], [6, 'a', 20], [2, 'b', 20]]), ['a', 'b'], 2 * U)
      expect(view(r.slices)).toEqual([[8, 'b', 2], [6, 'a', 20], [2, 'b', 20]])
    })

    test('equal key shares: the lower id keeps the run', () => {
      const r = mergePhase(working([[4, 'b', 1], [4, 'a', 1], [4, 'a', 20], [4, 'b', 20]]), ['a', 'b'], KEYSPACE_SIZE)
      expect(view(r.slices)[0]).toEqual([8, 'a', 2])
      expect(r.churn).toBe(4 * U)
    })

    test('the merge churn limit blocks a cross-server merge that would exceed it', () => {
      const r = mergePhase(working(spec), ['a', 'b'], 2 * U - 1)
      expect(view(r.slices)).toEqual(spec)
      expect(r.churn).toBe(0)
    })
  })

  describe('lower bounds (5.2.2 condition 3)', () => {
    test('the slice count never drops below the number of servers, counting servers without slices', () => {
      const spec = [[4, 'a', 1], [4, 'a', 1], [4, 'a', 1], [4, 'b', 100]]
      // c owns nothing yet (just added), but still counts: at most one join
      expect(view(mergePhase(working(spec), ['a', 'b', 'c'], 0).slices)).toEqual([[8, 'a', 2], [4, 'a', 1], [4, 'b', 100]])
      // without c, the whole cold run merges
      expect(view(mergePhase(working(spec), ['a', 'b'], 0).slices)).toEqual([[12, 'a', 3], [4, 'b', 100]])
    })

    test('a merge never takes the last slice of a server that is not the keeper', () => {
      // b's only slice would go to a (tie on keys, a keeps): blocked although budget and count allow it
      const spec = [[2, 'a', 1], [2, 'b', 1], [4, 'a', 50], [8, 'c', 100]]
      const r = mergePhase(working(spec), ['a', 'b', 'c'], KEYSPACE_SIZE)
      expect(view(r.slices)).toEqual(spec)
    })

    test('a server whose last slice is in the run may keep the merged slice', () => {
      // a's only slice is in the run but a keeps it; b keeps its other slice
      const r = mergePhase(working([[2, 'a', 1], [2, 'b', 1], [4, 'b', 50], [8, 'c', 100]]), ['a', 'b', 'c'], KEYSPACE_SIZE)
      expect(view(r.slices)).toEqual([[4, 'a', 2], [4, 'b', 50], [8, 'c', 100]])
    })
  })

  test('does not mutate its input', () => {
    const input = working([[4, 'a', 1], [4, 'a', 1], [4, 'a', 6], [4, 'b', 8]])
    const snapshot = JSON.stringify(input)
    mergePhase(input, ['a', 'b'], 0)
    expect(JSON.stringify(input)).toBe(snapshot)
  })
})

describe('mergeColumns in place (the round merges into its own columns)', () => {
  const { mergeColumns } = require('../../controller/strategies/merge')
  const { Columns, indexSets } = require('../../controller/strategies/columns')
  const { prng } = require('./helpers')

  /** Seeded columns: runs of single-owner slices and of slices on the same two servers. */
  function columns (seed) {
    const rand = prng(seed)
    const ids = ['a', 'b', 'c', 'd']
    const n = 40
    const slices = Array.from({ length: n }, (_, i) => {
      const o = Math.floor(rand() * 4)
      const servers = rand() < 0.5 ? [ids[o]] : [ids[o], ids[(o + 1) % 4]]
      return { start: (i * KEYSPACE_SIZE) / n, end: ((i + 1) * KEYSPACE_SIZE) / n, servers }
    })
    const c = new Columns(n)
    slices.forEach((s, i) => {
      c.start[i] = s.start
      c.end[i] = s.end
      c.owner[i] = ids.indexOf(s.servers[0])
      c.load[i] = rand() < 0.5 ? 0 : Math.floor(rand() * 10)
      c.src[i] = i
      c.hot[i] = rand() < 0.3 ? s.start : -1
    })
    const { rep, sets } = indexSets(slices, new Map(ids.map((id, s) => [id, s])), c.owner)
    c.rep.set(rep)
    return { c, ids, sets }
  }
  const fields = ['start', 'end', 'owner', 'load', 'src', 'rep', 'hot', 'hotLoad']
  const copy = (c) => {
    const d = new Columns(c.n)
    for (const f of fields) d[f].set(c[f])
    return d
  }

  test.each([1, 2, 3, 4, 5, 6, 7, 8])('seed %i: the same slices as into fresh columns', (seed) => {
    const { c, ids, sets } = columns(seed)
    const fresh = mergeColumns(copy(c), ids, 4, KEYSPACE_SIZE, new Uint8Array(4), new Uint8Array(sets.count), sets)
    const own = copy(c)
    const inPlace = mergeColumns(own, ids, 4, KEYSPACE_SIZE, new Uint8Array(4), new Uint8Array(sets.count), sets, own)
    expect(fresh.ops.length).toBeGreaterThan(0)
    expect(inPlace.ops).toEqual(fresh.ops)
    for (const f of fields) expect(Array.from(inPlace.cols[f])).toEqual(Array.from(fresh.cols[f]))
  })
})
