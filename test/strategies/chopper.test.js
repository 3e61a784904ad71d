'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { validateAssignment, evenAssignment, keyChurn, sameLayout, serverLoads } = require('../../core/assignment')
const { InvalidArgumentError } = require('../../core/errors')
const chopper = require('./chopper-one-replica') // minReplicas 1 unless a test sets it
const { U, build, view, prng, deepFreeze } = require('./helpers')

const invalidArg = (fn, pattern) => {
  let err
  try { fn() } catch (e) { err = e }
  expect(err).toBeInstanceOf(InvalidArgumentError)
  expect(err.code).toBe('CHOPPER_ERR_INVALID_ARG')
  expect(err.message).toMatch(pattern)
}

describe('chopperRound', () => {
  test('runs merge, then move, then split, and reports churn, estimated loads and imbalance', () => {
    // The paper's round, without replication (replication.test.js covers the default round).
    // mean slice load 122 / 5 = 24.4
    // merge: a's 1 + 1 -> 2; b's 10 + 10 -> 20.  move: a = 102, b = 20; the 100 would make b 120 > 102,
    // so a's merged 2 (2 units, within the 3.2-unit budget) goes to b.  split: mean 122 / 3; the 100 is cut in two.
    const { assignment, loads } = build([[1, 'a', 1], [1, 'a', 1], [6, 'a', 100], [4, 'b', 10], [4, 'b', 10]])
    const single = { replicate: false }
    const r = chopper.chopperRound(assignment, loads, single)
    expect(r.ops.map((o) => o.op)).toEqual(['merge', 'merge', 'move', 'split'])
    expect(view(r.assignment.slices, r.loads)).toEqual([[2, 'b', 2], [3, 'a', 50], [3, 'a', 50], [8, 'b', 20]])
    expect(r.loads).toBeInstanceOf(Float64Array)
    expect(r.churn).toEqual({ merge: 0, move: 2 * U, total: 2 * U })
    expect(r.imbalance.before).toBeCloseTo(102 / 61, 12)
    expect(r.imbalance.after).toBeCloseTo(100 / 61, 12)
    expect(r.moveStop).toBe('no-candidate')
    expect(r.assignment.generation).toBe(assignment.generation)
    expect(chopper.rebalance(assignment, loads, single)).toEqual(r.assignment)
  })

  describe('the mean ceiling (moveMeanRatio) and its noise floor (moveMeanNoise)', () => {
    // 8 servers, mean 10,000: a at 12,000 (1.2x the mean), the other seven at
    // 9,714 each. hottest / coolest = 1.235 < moveRatio, so the paper's rule
    // alone stops; a's 500 fits under the ceiling of 1.05 x 10,000 on the coolest.
    const others = ['b', 'c', 'd', 'e', 'f', 'g', 'h']
    const { assignment, loads } = build([[1, 'a', 11500], [1, 'a', 500], ...others.flatMap((id) => [[1, id, 4857], [1, id, 4857]])])
    const single = { replicate: false }
    const moves = (r) => r.ops.filter((o) => o.op === 'move')

    test('by default, moves off a server above 1.05 x the mean that the paper\'s rule accepts', () => {
      const r = chopper.chopperRound(assignment, loads, single)
      // loads are counts here: 10,000 per server, noise floor 1 + 3 / 100 = 1.03 < 1.05
      expect(r.meanCeiling).toBeCloseTo(1.05, 12)
      expect(moves(r)).toEqual([expect.objectContaining({ from: 'a', load: 500 })])
      expect(serverLoads(r.assignment, r.loads).a.load).toBe(11500)
      expect(r.imbalance.after).toBeLessThan(r.imbalance.before)
    })

    test('moveMeanRatio 0 is the paper\'s rule alone: nothing moves', () => {
      const r = chopper.chopperRound(assignment, loads, { ...single, moveMeanRatio: 0 })
      expect(r.meanCeiling).toBe(0)
      expect(moves(r)).toEqual([])
      expect(r.moveStop).toBe('ratio')
    })

    test('with few requests behind the loads (costs), the noise floor lifts the ceiling and nothing moves', () => {
      // 100 requests per server: a count varies by about 10 %, floor 1 + 3 / 10 = 1.3
      const r = chopper.chopperRound(assignment, loads, single, { requests: 800 })
      expect(r.meanCeiling).toBeCloseTo(1.3, 12)
      expect(moves(r)).toEqual([])
      // the same loads backed by enough requests: the ceiling is moveMeanRatio again
      expect(moves(chopper.chopperRound(assignment, loads, single, { requests: 800000 }))).toHaveLength(1)
      // moveMeanNoise 0 turns the floor off
      const r0 = chopper.chopperRound(assignment, loads, { ...single, moveMeanNoise: 0 }, { requests: 800 })
      expect(r0.meanCeiling).toBe(1.05)
      expect(moves(r0)).toHaveLength(1)
    })

    test('at 3 servers with the experiments\' ~110 requests per server per period, the ceiling never binds', () => {
      // floor 1 + 3 / sqrt(112) = 1.28: above the 3 x 1.25 / (1.25 + 2) = 1.154 x the mean
      // that hottest / coolest < 1.25 already guarantees with 3 servers
      const three = build([[4, 'a', 130], [2, 'a', 5], [5, 'b', 55], [5, 'c', 60]])
      const r = chopper.chopperRound(three.assignment, three.loads, single, { requests: 337 })
      expect(r.meanCeiling).toBeGreaterThan(3 * 1.25 / 3.25)
      expect(r.ops).toEqual(chopper.chopperRound(three.assignment, three.loads, { ...single, moveMeanRatio: 0 }).ops)
    })

    test('moveMeanNoise must be a finite number >= 0', () => {
      invalidArg(() => chopper.chopperRound(assignment, loads, { moveMeanNoise: -1 }), /invalid chopper option moveMeanNoise: expected a finite number >= 0, got -1/)
    })
  })

  test('mergeChurnLimit applies to the round', () => {
    const { assignment, loads } = build([[6, 'a', 1], [2, 'b', 1], [2, 'a', 20], [6, 'b', 20]])
    const merges = (o) => chopper.chopperRound(assignment, loads, o).ops.filter((x) => x.op === 'merge')
    expect(merges()).toHaveLength(1) // 2 units of churn < 20% (3.2 units)
    expect(merges({ mergeChurnLimit: 0.1 })).toEqual([])
  })

  test('an idle period (all loads 0) returns the assignment unchanged', () => {
    const { assignment } = build([[2, 'a', 0], [2, 'a', 0], [12, 'b', 0]])
    const r = chopper.chopperRound(assignment, [0, 0, 0])
    expect(r.assignment).toEqual(assignment)
    expect(r.assignment).not.toBe(assignment)
    expect(r.ops).toEqual([])
    expect(r.churn.total).toBe(0)
  })

  test('is deterministic, whatever the key order of the servers object', () => {
    const { assignment, loads } = build([[2, 'c', 5], [2, 'a', 1], [4, 'b', 100], [4, 'a', 10], [4, 'c', 10]])
    const reordered = { ...assignment, servers: Object.fromEntries(Object.entries(assignment.servers).reverse()) }
    const first = chopper.chopperRound(assignment, loads)
    expect(chopper.chopperRound(assignment, loads)).toEqual(first)
    expect(JSON.stringify(chopper.chopperRound(reordered, loads))).toBe(JSON.stringify(first))
  })

  test('does not mutate the assignment or the loads', () => {
    const { assignment, loads } = build([[2, 'a', 1], [2, 'a', 1], [4, 'a', 100], [4, 'b', 10], [4, 'b', 10]])
    const snapshot = JSON.stringify({ assignment, loads })
    deepFreeze(assignment)
    deepFreeze(loads)
    const r = chopper.chopperRound(assignment, loads) // frozen: any write would throw
    expect(r.ops.length).toBeGreaterThan(0)
    expect(JSON.stringify({ assignment, loads })).toBe(snapshot)
  })

  test('over many random rounds, every output is a valid assignment and the bookkeeping holds', () => {
    const rand = prng(42)
    const servers = {}
    for (const id of ['s1', 's2', 's3', 's4', 's5']) servers[id] = { url: `http://127.0.0.1:1/${id}` }
    let a = { ...chopper.initial(servers), generation: 3 }
    for (let round = 0; round < 40; round++) {
      // heavy-tailed loads, some slices idle
      const loads = a.slices.map(() => (rand() < 0.2 ? 0 : Math.floor(1000 * rand() ** 4)))
      const r = chopper.chopperRound(a, loads)
      validateAssignment(r.assignment)
      expect(r.assignment.generation).toBe(3)
      expect(r.loads).toHaveLength(r.assignment.slices.length)
      const sum = (xs) => xs.reduce((x, y) => x + y, 0)
      expect(sum(r.loads)).toBeCloseTo(sum(loads), 6) // merge sums, split halves: load is conserved
      expect(r.churn.merge).toBeLessThanOrEqual(0.2 * KEYSPACE_SIZE)
      expect(r.churn.move).toBeLessThanOrEqual(0.2 * KEYSPACE_SIZE)
      expect(r.churn.replicate).toBeLessThanOrEqual(chopper.defaults.replicaChurnLimit * KEYSPACE_SIZE)
      expect(r.churn.total).toBe(keyChurn(a, r.assignment))
      expect(r.churn.total).toBeLessThanOrEqual(r.churn.merge + r.churn.move + r.churn.replicate)
      expect(r.assignment.slices.length).toBeGreaterThanOrEqual(5)
      for (const v of Object.values(serverLoads(r.assignment, r.loads))) expect(v.slices).toBeGreaterThan(0)
      a = r.assignment
    }
  })

  describe('argument validation', () => {
    const { assignment, loads } = build([[8, 'a', 1], [8, 'b', 2]])

    test.each([
      [{ moveRatio: 0.5 }, /moveRatio: expected a finite number >= 1, got 0.5/],
      [{ moveRatio: Infinity }, /moveRatio/],
      [{ mergeChurnLimit: 2 }, /mergeChurnLimit: expected a number in \[0, 1\]/],
      [{ moveChurnLimit: -0.1 }, /moveChurnLimit/],
      [{ maxSlices: 0 }, /maxSlices: expected an integer/],
      [{ minSliceLength: 1.5 }, /minSliceLength/],
      [{ skipOverBudgetSlices: 'yes' }, /skipOverBudgetSlices: expected true or false/],
      [{ splitNoise: -1 }, /splitNoise: expected a finite number >= 0, got -1/],
      [{ moveRatios: 2 }, /unknown chopper option moveRatios \(valid options: mergeChurnLimit, /],
      ['fast', /chopper options must be an object/]
    ])('rejects options %p', (opts, pattern) => {
      invalidArg(() => chopper.rebalance(assignment, loads, opts), pattern)
    })

    test('undefined option values fall back to the defaults', () => {
      expect(chopper.rebalance(assignment, loads, { moveRatio: undefined })).toEqual(chopper.rebalance(assignment, loads))
    })

    test.each([
      [undefined, /loads is required/],
      [[1], /expected length 2, got 1/],
      [[1, -1], /loads\[1\] must be a finite number >= 0, got -1/],
      [[1, NaN], /loads\[1\].*got NaN/],
      ['12', /loads must be an array/]
    ])('rejects loads %p', (bad, pattern) => {
      invalidArg(() => chopper.rebalance(assignment, bad), pattern)
    })

    test('accepts a Float64Array of loads', () => {
      expect(chopper.rebalance(assignment, Float64Array.from(loads))).toEqual(chopper.rebalance(assignment, loads))
    })

    test('rejects an invalid assignment', () => {
      expect(() => chopper.rebalance({ ...assignment, slices: assignment.slices.slice(1) }, [1]))
        .toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ASSIGNMENT' }))
    })

    test('defaults are frozen and complete', () => {
      expect(Object.isFrozen(chopper.defaults)).toBe(true)
      expect(chopper.defaults).toEqual({
        mergeChurnLimit: 0.2,
        moveChurnLimit: 0.2,
        moveRatio: 1.25,
        moveReplicas: true,
        moveMeanRatio: 1.05,
        moveMeanNoise: 3,
        skipOverBudgetSlices: true,
        maxSlices: 65536,
        initialSlicesPerServer: 0,
        minSliceLength: 1,
        splitNoise: 2,
        hotKeyShare: 0.5,
        replicate: true,
        replicateRatio: 1.1,
        replicaLoadFraction: 0.25,
        minReplicas: 2,
        maxReplicas: 0,
        replicaHysteresis: 0.5,
        replicaChurnLimit: 1,
        balancePrimaries: true,
        primaryMargin: 0.5
      })
    })
  })
})

describe('chopper initial / addServer / removeServer', () => {
  const servers = { b: { url: 'http://127.0.0.1:1/b' }, a: { url: 'http://127.0.0.1:1/a' }, c: { url: 'http://127.0.0.1:1/c' } }

  test('initial is generation 1 with one contiguous 1/n range per server in id order', () => {
    const a = chopper.initial(servers)
    expect(a).toEqual(evenAssignment(servers, 1))
    expect(a.slices.map((s) => s.servers[0])).toEqual(['a', 'b', 'c'])
    invalidArg(() => chopper.initial({}), /at least one server/)
    invalidArg(() => chopper.initial({ a: { url: 'ftp://x' } }), /servers\.a\.url must be an http\(s\) URL/)
  })

  test('addServer adds a server with no slices; the next round moves load onto it', () => {
    const { assignment, loads } = build([[2, 'a', 40], [2, 'a', 40], [2, 'b', 40], [2, 'b', 40], [8, 'b', 0]])
    const added = chopper.addServer(assignment, 'c', 'http://127.0.0.1:1/c', loads)
    validateAssignment(added)
    expect(added.slices).toEqual(assignment.slices)
    expect(Object.keys(added.servers)).toEqual(['a', 'b', 'c'])
    expect(added.generation).toBe(assignment.generation)
    for (const replicate of [false, true]) {
      const r = chopper.chopperRound(added, loads, { replicate })
      // without replication c takes slices; with it, c (the coolest) may take replicas instead
      const onto = r.ops.filter((o) => (o.op === 'move' && o.to === 'c') || (o.op === 'replicate' && o.servers.includes('c')))
      expect(onto).not.toHaveLength(0)
      if (!replicate) expect(onto.every((o) => o.op === 'move')).toBe(true)
      expect(serverLoads(r.assignment, r.loads).c.load).toBeGreaterThan(0)
    }
    invalidArg(() => chopper.addServer(assignment, 'a', 'http://127.0.0.1:1/a'), /already in the assignment/)
    invalidArg(() => chopper.addServer(assignment, '', 'http://x'), /server id must be a non-empty string/)
    invalidArg(() => chopper.addServer(assignment, 'c', 'nope'), /url must be an http\(s\) URL/)
  })

  test('removeServer gives each leaving slice, hottest first, to the least-loaded remaining server', () => {
    // b = 40, c = 45. a's 50 -> b (90); a's 30 -> c (75); a's 10 -> c (85)
    const { assignment, loads } = build([[2, 'a', 10], [2, 'a', 50], [2, 'a', 30], [5, 'b', 40], [5, 'c', 45]])
    const r = chopper.removeServer(assignment, 'a', loads)
    validateAssignment(r)
    expect(view(r.slices, loads)).toEqual([[2, 'c', 10], [2, 'b', 50], [2, 'c', 30], [5, 'b', 40], [5, 'c', 45]])
    expect(Object.keys(r.servers)).toEqual(['b', 'c'])
    expect(r.generation).toBe(assignment.generation)
    expect(keyChurn(assignment, r)).toBe(6 * U) // exactly a's keys, nothing else
  })

  test('removeServer ties: least keyspace first, then id; without loads all slices count as idle', () => {
    const { assignment, loads } = build([[2, 'a', 5], [6, 'b', 40], [4, 'c', 40], [4, 'd', 40]])
    expect(view(chopper.removeServer(assignment, 'a', loads).slices)[0]).toEqual([2, 'c']) // c and d tie on keys too: c
    // no loads: c (4 units) and d (4 units) beat b (6); c by id
    expect(view(chopper.removeServer(assignment, 'a').slices)[0]).toEqual([2, 'c'])
  })

  test('removeServer drops the server from secondary replica lists too', () => {
    const { assignment } = build([[8, 'a', 0], [8, 'b', 0]])
    assignment.slices[1].servers = ['b', 'a']
    expect(chopper.removeServer(assignment, 'a').slices.map((s) => s.servers)).toEqual([['b'], ['b']])
  })

  test('removeServer refuses the last server and unknown servers', () => {
    const { assignment } = build([[16, 'a', 0]])
    invalidArg(() => chopper.removeServer(assignment, 'a'), /cannot remove server a: it is the last server/)
    invalidArg(() => chopper.removeServer(assignment, 'zz'), /server zz is not in the assignment/)
  })

  test('add then remove of a slice-less server is a no-op on the layout', () => {
    const { assignment } = build([[8, 'a', 0], [8, 'b', 0]])
    const back = chopper.removeServer(chopper.addServer(assignment, 'c', 'http://127.0.0.1:1/c'), 'c')
    expect(sameLayout(back, assignment)).toBe(true)
  })
})
