'use strict'

const { KEYSPACE_SIZE, sliceKey } = require('../../core/keyspace')
const { SliceMap } = require('../../core/slice-map')
const { validateAssignment, keyChurn, serverLoads, imbalance } = require('../../core/assignment')
const { InvalidArgumentError } = require('../../core/errors')
const chopper = require('./chopper-one-replica') // minReplicas 1 unless a test sets it
const { U, build, deepFreeze } = require('./helpers')

// Asymmetric replication of hot slices (docs/algorithm.md, "Replication";
// docs/replication.md for the assignment format).

const invalidArg = (fn, pattern) => {
  let err
  try { fn() } catch (e) { err = e }
  expect(err).toBeInstanceOf(InvalidArgumentError)
  expect(err.code).toBe('CHOPPER_ERR_INVALID_ARG')
  expect(err.message).toMatch(pattern)
}

/** The servers of the slice holding key `k` (slices are cut, never moved off a replicated slice). */
const serversAt = (a, k) => a.slices.find((s) => s.start <= k && k < s.end).servers
/** An assignment with `servers` on the slice starting at `start`. */
const withServers = (a, start, servers) => ({ ...a, slices: a.slices.map((s) => (s.start === start ? { ...s, servers } : s)) })
const opsOf = (r, op) => r.ops.filter((o) => o.op === op)

describe('replication phase', () => {
  test('a hot slice gets replicas in the round that first sees it hot, appended on the least-loaded servers', () => {
    // a = 210 > 1.25 x mean (83.3). Unit = max(0.25 x 83.3, mean slice 62.5) = 62.5; 200 / 62.5 -> 4, capped at 3.
    // b and c tie on load and keys: b first (id).
    const { assignment, loads } = build([[4, 'a', 200], [4, 'a', 10], [4, 'b', 20], [4, 'c', 20]])
    const r = chopper.chopperRound(deepFreeze(assignment), deepFreeze(loads))
    validateAssignment(r.assignment)
    expect(opsOf(r, 'replicate')).toEqual([{ op: 'replicate', start: 0, end: 4 * U, servers: ['b', 'c'], replicas: 3, load: 200, churn: 8 * U }])
    // the split phase then halves it; both halves keep the whole set, primary first ...
    const alone = chopper.chopperRound(deepFreeze(assignment), deepFreeze(loads), { balancePrimaries: false })
    expect(alone.assignment.slices.slice(0, 2).map((s) => [s.start / U, s.end / U, s.servers])).toEqual([[0, 2, ['a', 'b', 'c']], [2, 4, ['a', 'b', 'c']]])
    // ... and the primary phase gives one half's writes (100 of the 200 a would write) to b
    expect(r.assignment.slices.slice(0, 2).map((s) => [s.start / U, s.end / U, s.servers])).toEqual([[0, 2, ['b', 'a', 'c']], [2, 4, ['a', 'b', 'c']]])
    expect(opsOf(r, 'primary')).toEqual([{ op: 'primary', start: 0, end: 2 * U, from: 'a', to: 'b', load: 100 }])
    expect(r.churn.replicate).toBe(8 * U)
    expect(r.churn.total).toBe(keyChurn(assignment, r.assignment)) // a replica costs its range once per gained server
    expect(r.churn.total).toBe(8 * U)
    // imbalance is over the spread loads: the 200 counts 200 / 3 on each server
    expect(r.imbalance.after).toBeCloseTo(imbalance(serverLoads(r.assignment, r.loads)), 12)
    expect(r.imbalance.after).toBeLessThan(r.imbalance.before)
  })

  test('replicas grow with load, keeping the existing ones in order, up to every server', () => {
    // five servers; a's one-unit slice X carries L, which grows round after round, and a has 40
    // besides (so a stays above the balance target until X is everywhere; below it nothing grows)
    const spec = (L) => [[1, 'a', L], [3, 'a', 40], [3, 'b', 10], [3, 'c', 10], [3, 'd', 10], [3, 'e', 10]]
    let set = ['a']
    const counts = []
    for (const L of [30, 60, 100, 1000, 5000]) {
      const { assignment, loads } = build(spec(L))
      const r = chopper.chopperRound(withServers(assignment, 0, set), loads, { moveReplicas: false, balancePrimaries: false }) // the replication phase alone
      const after = serversAt(r.assignment, 0)
      expect(after.slice(0, set.length)).toEqual(set) // kept, in order; new ones appended
      set = after
      counts.push(set.length)
    }
    expect(counts).toEqual([2, 3, 4, 5, 5]) // one more per step here, then every server
  })

  describe('moves of replicated slices (moveReplicas)', () => {
    // X [0, 1U) on [a, b] carries 120 (60 a share); Y on [c, d] 20; W on [a, b] 40.
    // a = b = 80, c = d = 10. The unit is huge, so replication leaves every set at 2.
    const setup = () => {
      const { assignment, loads } = build([[1, 'a', 120], [7, 'c', 20], [8, 'a', 40]], ['b', 'd'])
      const sets = [['a', 'b'], ['c', 'd'], ['a', 'b']]
      return { assignment: deepFreeze({ ...assignment, slices: assignment.slices.map((sl, i) => ({ ...sl, servers: sets[i] })) }), loads }
    }
    const opts = { minReplicas: 2, replicaLoadFraction: 100 }

    test('a server\'s share moves like a slice: the donor leaves the set, the receiver joins at its end, the next server becomes primary', () => {
      const { assignment, loads } = setup()
      const r = chopper.chopperRound(assignment, loads, opts)
      validateAssignment(r.assignment) // no server twice in a set
      const moves = opsOf(r, 'move')
      expect(moves[0]).toEqual({ op: 'move', start: 0, end: U, from: 'a', to: 'c', load: 60, churn: U, replicas: 2 })
      // then b, the next hottest, gives its share to d: X ends on [c, d], still two servers
      expect(moves[1]).toEqual({ op: 'move', start: 0, end: U, from: 'b', to: 'd', load: 60, churn: U, replicas: 2 })
      expect(serversAt(r.assignment, 0)).toEqual(['c', 'd'])
      for (const sl of r.assignment.slices) expect(sl.servers).toHaveLength(2)
      expect(r.imbalance.after).toBeLessThan(r.imbalance.before)
      expect(r.churn.move).toBe(2 * U)
      expect(r.churn.total).toBe(keyChurn(assignment, r.assignment))
    })

    test('a primary that gives its share away hands the role to the next server', () => {
      // as above, but b is cool: only a donates X's share
      const { assignment, loads } = build([[1, 'a', 120], [7, 'c', 20], [8, 'a', 40]], ['b', 'd'])
      const sets = [['a', 'b'], ['c', 'd'], ['a', 'd']]
      const a = { ...assignment, slices: assignment.slices.map((sl, i) => ({ ...sl, servers: sets[i] })) }
      const r = chopper.chopperRound(a, loads, opts)
      expect(opsOf(r, 'move')[0]).toEqual(expect.objectContaining({ start: 0, from: 'a', to: 'c', replicas: 2 }))
      expect(serversAt(r.assignment, 0)).toEqual(['b', 'c'])
    })

    test('a share whose slice has another server below the mean stays: the front ends spill to it, no move needed', () => {
      // X [0, 1U) on [a, b] carries 60 (30 a share); V [1U, 8U) on a alone carries 60 but is
      // wider than the move budget; no budget for new replicas, so the sets stay as given.
      const o = { ...opts, replicaChurnLimit: 0 }
      const round = (spec, extra, sets) => {
        const { assignment, loads } = build(spec, extra)
        return chopper.chopperRound({ ...assignment, slices: assignment.slices.map((sl, i) => ({ ...sl, servers: sets[i] })) }, loads, o)
      }
      // a: 30 + 60 = 90, b: 30, c = d = 10; mean 35. b is below it: X stays where it is
      const cool = round([[1, 'a', 60], [7, 'a', 60], [8, 'c', 20]], ['b', 'd'], [['a', 'b'], ['a'], ['c', 'd']])
      expect(opsOf(cool, 'move')).toEqual([])
      expect(serversAt(cool.assignment, 0)).toEqual(['a', 'b'])
      // the same with b busy (a 40 of its own: b at 70, mean 45): X's share goes to the coolest
      const busy = round([[1, 'a', 60], [7, 'a', 60], [4, 'b', 40], [4, 'c', 20]], ['d'], [['a', 'b'], ['a'], ['b'], ['c', 'd']])
      expect(opsOf(busy, 'move')[0]).toEqual(expect.objectContaining({ start: 0, from: 'a', to: 'c', load: 30, replicas: 2 }))
      expect(serversAt(busy.assignment, 0)).not.toContain('a')
    })

    test('a server at or below the mean gives no share away: it needs no relief, and the move would only cost a cold cache', () => {
      // Three servers, a standby for every slice (scenario 9's layout, round captured live):
      // X1 [a, b] 200, X2 [b, c] 170, X4 [a, b] 20 (narrow enough for the move budget),
      // X3 [c, a] 100: a 160, b 195, c 135, mean 163.3. b is the hottest, but each of its
      // slices has its other server below the mean (spill covers it); a is next, below the
      // mean: before the rule, its share of X4 (10) went to c, leaving b as hot as before.
      const o = { ...opts, replicaChurnLimit: 0 }
      const { assignment, loads } = build([[5, 'a', 200], [5, 'b', 170], [2, 'a', 20], [4, 'c', 100]])
      const sets = [['a', 'b'], ['b', 'c'], ['a', 'b'], ['c', 'a']]
      const a = deepFreeze({ ...assignment, slices: assignment.slices.map((sl, i) => ({ ...sl, servers: sets[i] })) })
      const r = chopper.chopperRound(a, loads, o)
      expect(opsOf(r, 'move')).toEqual([])
      expect(r.moveStop).toBe('no-candidate')
      expect(r.churn.total).toBe(0)
      expect(r.assignment.slices.map((sl) => sl.servers)).toEqual(expect.arrayContaining([['a', 'b'], ['b', 'c'], ['c', 'a']]))
      expect(serversAt(r.assignment, 10 * U)).toEqual(['a', 'b']) // X4 stays
    })

    test('never onto a server that holds the slice already; frozen sets and moveReplicas: false stay put', () => {
      const { assignment, loads } = setup()
      // with c and d frozen, the only receivers are a and b, which hold X: nothing can move
      const frozen = chopper.chopperRound(assignment, loads, opts, { unknownServers: ['c', 'd'] })
      expect(opsOf(frozen, 'move')).toEqual([])
      // b's load unknown: X's and W's sets have a frozen server, so neither moves
      const stale = chopper.chopperRound(assignment, loads, opts, { unknownServers: ['b'] })
      expect(opsOf(stale, 'move').filter((m) => m.replicas)).toEqual([])
      expect(serversAt(stale.assignment, 0)).toEqual(['a', 'b'])
      const off = chopper.chopperRound(assignment, loads, { ...opts, moveReplicas: false })
      expect(opsOf(off, 'move')).toEqual([])
      expect(serversAt(off.assignment, 0)).toEqual(['a', 'b'])
    })
  })

  test('maxReplicas caps the count; minReplicas is a floor for every slice', () => {
    const { assignment, loads } = build([[1, 'a', 5000], [3, 'a', 10], [3, 'b', 10], [3, 'c', 10], [3, 'd', 10], [3, 'e', 10]])
    expect(serversAt(chopper.rebalance(assignment, loads, { maxReplicas: 2 }), 0)).toHaveLength(2)
    expect(serversAt(chopper.rebalance(assignment, loads), 0)).toHaveLength(5)
    const floor = chopper.chopperRound(assignment, loads, { minReplicas: 2, replicaChurnLimit: 5 })
    for (const s of floor.assignment.slices) expect(s.servers.length).toBeGreaterThanOrEqual(2)
    // the floor above the server count means every server
    const all = chopper.rebalance(assignment, loads, { minReplicas: 9, replicaChurnLimit: 5 })
    for (const s of all.slices) expect(s.servers).toHaveLength(5)
  })

  test('replicas drop as the slice cools, with hysteresis: no flapping near the threshold', () => {
    // X (one unit) on a, b, c, d; five servers with background 10 each, so six slices.
    // Unit = max(0.25 x mean server load, mean slice load) = mean slice load = T / 6.
    // Up count ceil(L / unit); with replicaHysteresis 0.5 a drop needs the down count ceil(L / (0.5 unit)) below 4.
    const spec = (L) => [[1, 'a', L], [3, 'a', 10], [3, 'b', 10], [3, 'c', 10], [3, 'd', 10], [3, 'e', 10]]
    const start = withServers(build(spec(0)).assignment, 0, ['a', 'b', 'c', 'd'])
    const countAt = (L, opts) => serversAt(chopper.rebalance(start, build(spec(L)).loads, opts), 0).length
    // L = 60: T = 110, unit 18.3; up = 4, so nothing changes
    expect(countAt(60)).toBe(4)
    // L = 40: T = 90, unit 15: up = 3, down = ceil(40 / 7.5) = 6 -> keeps 4 (without hysteresis: 3)
    expect(countAt(40)).toBe(4)
    expect(countAt(40, { replicaHysteresis: 0 })).toBe(3)
    // L = 15: T = 65, unit 10.8: down = ceil(15 / 5.4) = 3 -> drops to 3
    expect(countAt(15)).toBe(3)
    // L = 5: down = ceil(5 / 4.6) = 2
    expect(countAt(5)).toBe(2)
    // idle: drops to the primary alone
    // (replicateRatio 1.25: a background server at 1.19x the mean would otherwise attract a replica of its own)
    const cold = chopper.chopperRound(start, build(spec(0)).loads.map((x, i) => (i === 1 ? 1 : x)), { replicateRatio: 1.25 })
    expect(serversAt(cold.assignment, 0)).toEqual(['a'])
    expect(opsOf(cold, 'unreplicate')).toEqual([expect.objectContaining({ start: 0, end: U, replicas: 1 })])
    expect(cold.churn.replicate).toBe(0) // dropping is free
    expect(cold.churn.total).toBe(keyChurn(start, cold.assignment))

    // a load swinging +-20 % around 40 never changes the count: 4 replicas stay
    for (const L of [48, 32, 48, 32, 40]) expect(countAt(L)).toBe(4)
  })

  test('a drop removes the replicas on the most loaded servers and never the primary', () => {
    // X on [a, e, b]; e is the busiest of the secondaries (b: 10, e: 60)
    const { assignment, loads } = build([[1, 'a', 0.5], [3, 'a', 10], [3, 'b', 10], [3, 'c', 10], [3, 'd', 10], [3, 'e', 60]])
    const start = withServers(assignment, 0, ['a', 'e', 'b'])
    const r = chopper.chopperRound(start, loads, { moveReplicas: false }) // the replication phase alone
    expect(opsOf(r, 'unreplicate')[0]).toEqual(expect.objectContaining({ start: 0, servers: ['e', 'b'] }))
    const two = chopper.chopperRound(withServers(assignment, 0, ['a', 'e', 'b']), loads, { minReplicas: 2, replicaChurnLimit: 0, moveReplicas: false })
    expect(serversAt(two.assignment, 0)).toEqual(['a', 'b'])
  })

  test('the churn budget is respected and counted, hottest slices first', () => {
    // three hot 2-unit slices on a (a = 750, far above the target). Unit = mean slice load 154;
    // each wants 2 servers, one new replica for 2 units of churn. A budget of 5 units affords
    // the two hottest (300, then 250); the 200 would take it to 6.
    const { assignment, loads } = build([[2, 'a', 300], [2, 'a', 200], [2, 'a', 250], [5, 'b', 10], [5, 'c', 10]])
    const r = chopper.chopperRound(assignment, loads, { replicaChurnLimit: 5 / 16 })
    const reps = opsOf(r, 'replicate')
    expect(reps.map((o) => [o.start / U, o.load, o.servers.length, o.churn / U])).toEqual([[0, 300, 1, 2], [4, 250, 1, 2]])
    expect(r.churn.replicate).toBe(4 * U)
    expect(r.churn.replicate).toBeLessThanOrEqual((5 / 16) * KEYSPACE_SIZE)
    expect(r.churn.total).toBe(keyChurn(assignment, r.assignment))
    expect(r.churn.total).toBeLessThanOrEqual(r.churn.merge + r.churn.move + r.churn.replicate)
    // a budget of 6 units takes all three
    expect(opsOf(chopper.chopperRound(assignment, loads, { replicaChurnLimit: 6 / 16 }), 'replicate')).toHaveLength(3)
    // no budget, no replicas
    expect(opsOf(chopper.chopperRound(assignment, loads, { replicaChurnLimit: 0 }), 'replicate')).toEqual([])
  })

  test('a replica that would leave a server hotter than anything was is taken back', () => {
    // Balanced already (each server ~100): replicating a's 100 onto b or c would make them the hottest.
    const { assignment, loads } = build([[6, 'a', 100], [5, 'b', 95], [5, 'c', 97]])
    const r = chopper.chopperRound(assignment, loads)
    expect(opsOf(r, 'replicate')).toEqual([])
    expect(r.churn.replicate).toBe(0)
  })

  test('replicated slices merge only with neighbours on the same servers, never move; a split keeps the set on both halves', () => {
    const { assignment, loads } = build([[1, 'a', 1], [1, 'a', 1], [6, 'a', 100], [4, 'b', 10], [4, 'b', 10]])
    // single-owner (chopper.test.js): a's cold pair merges and moves to b
    const single = chopper.chopperRound(assignment, loads, { replicate: false })
    expect(opsOf(single, 'merge')).not.toEqual([])
    expect(opsOf(single, 'move')).not.toEqual([])
    // every slice on two servers (minReplicas 2): nothing moves; only neighbours on the very
    // same servers merge (no churn), and the hot one is split
    const r = chopper.chopperRound(assignment, loads, { minReplicas: 2, replicaChurnLimit: 16, balancePrimaries: false })
    validateAssignment(r.assignment)
    for (const m of opsOf(r, 'merge')) expect(m.churn).toBe(0)
    expect(opsOf(r, 'move')).toEqual([])
    const split = opsOf(r, 'split').find((o) => o.start === 2 * U)
    expect(split).toBeDefined()
    const halves = r.assignment.slices.filter((s) => s.start >= 2 * U && s.end <= 8 * U)
    expect(halves).toHaveLength(2)
    expect(halves[0].servers).toEqual(halves[1].servers)
    expect(halves[0].servers[0]).toBe('a')
    expect(halves[0].servers.length).toBeGreaterThanOrEqual(2)
  })

  test('frozen servers: a slice with a frozen server keeps its set; frozen servers get no replicas', () => {
    const { assignment, loads } = build([[4, 'a', 400], [4, 'b', 10], [4, 'c', 10], [4, 'd', 10]])
    const r = chopper.chopperRound(withServers(assignment, 4 * U, ['b', 'c']), loads, undefined, { unknownServers: ['c'] })
    expect(serversAt(r.assignment, 4 * U)).toEqual(['b', 'c'])
    expect(serversAt(r.assignment, 0)).not.toContain('c')
    expect(serversAt(r.assignment, 0).length).toBeGreaterThan(1)
    for (const o of opsOf(r, 'replicate')) expect(o.servers).not.toContain('c')
  })

  test('is deterministic, whatever the key order of the servers object', () => {
    const { assignment, loads } = build([[2, 'c', 5], [2, 'a', 1], [4, 'b', 300], [4, 'a', 10], [4, 'c', 10]], ['d'])
    const start = withServers(assignment, 12 * U, ['c', 'a'])
    const reordered = { ...start, servers: Object.fromEntries(Object.entries(start.servers).reverse()) }
    const first = chopper.chopperRound(start, loads)
    expect(opsOf(first, 'replicate')).not.toEqual([])
    expect(chopper.chopperRound(start, loads)).toEqual(first)
    expect(JSON.stringify(chopper.chopperRound(reordered, loads))).toBe(JSON.stringify(first))
  })

  test('replicate: false is the single-owner round: no replicas, no replication churn field', () => {
    const { assignment, loads } = build([[4, 'a', 200], [4, 'a', 10], [4, 'b', 20], [4, 'c', 20]])
    const r = chopper.chopperRound(assignment, loads, { replicate: false })
    expect(r.assignment.slices.every((s) => s.servers.length === 1)).toBe(true)
    expect(Object.keys(r.churn)).toEqual(['merge', 'move', 'total'])
    expect(r.ops.filter((o) => o.op === 'replicate' || o.op === 'unreplicate')).toEqual([])
    // (test/strategies/golden.test.js pins 300 seeded rounds with replicate: false to the pre-replication results)
  })
})

describe('removeServer and addServer with replicas', () => {
  test('a leaving primary hands a replicated slice to its next server at no churn; its own slices are reassigned', () => {
    const { assignment, loads } = build([[4, 'a', 90], [4, 'a', 10], [4, 'b', 20], [4, 'c', 20]])
    const start = withServers(assignment, 0, ['a', 'c', 'b'])
    const r = chopper.removeServer(start, 'a', loads)
    validateAssignment(r)
    expect(r.slices[0].servers).toEqual(['c', 'b'])
    expect(r.slices[1].servers).toHaveLength(1)
    expect(keyChurn(start, r)).toBe(4 * U) // only the slice a held alone
    // single-owner mode keeps the old rule: the leaving primary's slice goes to the least-loaded server
    const old = chopper.removeServer(start, 'a', loads, { replicate: false })
    expect(old.slices[0].servers[0]).not.toBe('a')
  })

  test('a new server is the least loaded, so it is the first to receive replicas', () => {
    const { assignment, loads } = build([[4, 'a', 300], [4, 'a', 10], [4, 'b', 100], [4, 'c', 100]])
    const added = chopper.addServer(assignment, 'd', 'http://127.0.0.1:1/d', loads)
    const r = chopper.chopperRound(added, loads)
    expect(opsOf(r, 'replicate')[0].servers[0]).toBe('d')
  })
})

describe('replication options', () => {
  const { assignment, loads } = build([[8, 'a', 1], [8, 'b', 2]])
  test.each([
    [{ replicate: 'yes' }, /option replicate: expected true or false, got "yes"/],
    [{ replicaLoadFraction: 0 }, /option replicaLoadFraction: expected a finite number > 0, got 0/],
    [{ replicaLoadFraction: Infinity }, /option replicaLoadFraction/],
    [{ minReplicas: 0 }, /option minReplicas: expected an integer in \[1, /],
    [{ minReplicas: 1.5 }, /option minReplicas/],
    [{ maxReplicas: -1 }, /option maxReplicas: expected an integer in \[0, /],
    [{ replicaHysteresis: 1 }, /option replicaHysteresis: expected a number in \[0, 1\), got 1/],
    [{ replicaChurnLimit: -0.1 }, /option replicaChurnLimit: expected a finite number >= 0, got -0.1/],
    [{ minReplicas: 3, maxReplicas: 2 }, /option minReplicas: expected at most maxReplicas \(2\), got 3/],
    [{ balancePrimaries: 1 }, /option balancePrimaries: expected true or false/],
    [{ primaryMargin: -1 }, /option primaryMargin: expected a finite number >= 0/]
  ])('rejects %p, naming the option', (opts, pattern) => {
    invalidArg(() => chopper.rebalance(assignment, loads, opts), pattern)
    invalidArg(() => chopper.removeServer(assignment, 'a', loads, opts), pattern)
  })

  test('maxReplicas 0 means no cap; minReplicas may exceed the server count', () => {
    expect(() => chopper.rebalance(assignment, loads, { maxReplicas: 0, minReplicas: 10 })).not.toThrow()
  })
})

describe('hot-set shift, closed loop (issue 10 item 5)', () => {
  // Scenarios 1 and 5 of bench/experiments: 3 servers, keys key-0..key-9, 80 % of the
  // traffic on 3 hot keys (26.7 % each), a different hot set each phase.
  const servers = { a: { url: 'http://127.0.0.1:1/a' }, b: { url: 'http://127.0.0.1:1/b' }, c: { url: 'http://127.0.0.1:1/c' } }
  const PHASES = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 4, 8], [1, 5, 9], [2, 3, 7]]

  /** Per phase, the real imbalance (spread over replicas) before each of `rounds` rounds and after the last. */
  function run (name, phases, rounds, opts) {
    let a = chopper.initial(servers)
    return phases.map((hot) => {
      const keys = Array.from({ length: 10 }, (_, i) => ({ key: sliceKey(`${name}${i}`), weight: hot.includes(i) ? 80 / 3 : 20 / 7 }))
      const trace = []
      for (let r = 0; r <= rounds; r++) {
        const map = new SliceMap(a)
        const loads = new Float64Array(a.slices.length)
        for (const { key, weight } of keys) loads[map.indexOf(key)] += weight
        trace.push(imbalance(serverLoads(a, loads)))
        if (r < rounds) a = chopper.rebalance(a, loads, opts)
      }
      return trace
    })
  }
  const recovery = (trace) => { const r = trace.findIndex((x) => x < 1.25); return r < 0 ? Infinity : r }

  test('the scenario key set: below 1.25 within 2 rounds after each shift', () => {
    const traces = run('key-', PHASES.slice(0, 3), 8)
    for (const t of traces.slice(1)) expect(recovery(t)).toBeLessThanOrEqual(2)
    for (const t of traces) expect(t[t.length - 1]).toBeLessThan(1.25)
  })

  test('over 20 key sets and 5 shifts each, replication recovers within 2 rounds far more often than the single-owner round', () => {
    // measured when written: 96 % within 2 rounds with replication (57 % within 1),
    // 55 % without (38 % within 1; 11 of the 200 shifts never below 1.25 in 8 rounds)
    const within = (opts, limit) => {
      let ok = 0
      let all = 0
      for (let set = 0; set < 20; set++) {
        for (const t of run(`set${set}-key-`, PHASES, 8, opts).slice(1)) {
          all++
          if (recovery(t) <= limit) ok++
        }
      }
      return ok / all
    }
    const replicated = within(undefined, 2)
    const single = within({ replicate: false }, 2)
    expect(replicated).toBeGreaterThanOrEqual(0.9)
    expect(single).toBeLessThan(0.75)
  })
})

describe('split noise (splitNoise): under a steady load the map settles', () => {
  const real = require('../../controller/strategies/chopper')
  const servers3 = { a: { url: 'http://127.0.0.1:1' }, b: { url: 'http://127.0.0.1:2' }, c: { url: 'http://127.0.0.1:3' } }
  // Scenario 5's steady state: 10 keys, 3 of them with 80 % of 337 requests a period,
  // each period's count per key a seeded Poisson draw.
  const keys = Array.from({ length: 10 }, (_, i) => ({ hash: sliceKey(`key-${i}`), mean: (i < 3 ? 0.8 / 3 : 0.2 / 7) * 337 }))
  function changedRounds (opts) {
    let seed = 7
    const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 }
    const poisson = (mean) => {
      const limit = Math.exp(-mean)
      let k = 0
      for (let p = rnd(); p > limit; p *= rnd()) k++
      return k
    }
    let a = real.initial(servers3, opts)
    let changed = 0
    for (let r = 0; r < 200; r++) {
      const map = new SliceMap(a)
      const loads = new Float64Array(a.slices.length)
      let requests = 0
      for (const k of keys) {
        const n = poisson(k.mean)
        loads[map.indexOf(k.hash)] += n
        requests += n
      }
      const next = real.chopperRound(a, loads, opts, { requests }).assignment
      if (r >= 100 && JSON.stringify(next.slices) !== JSON.stringify(a.slices)) changed++
      a = next
    }
    return changed
  }

  test('rounds 100-199 change the map far less often than with the paper\'s threshold', () => {
    // measured when written: 2 of 100 with the default (2), 4 with splitNoise 3, 64 with 1 and 92 with 0
    // (slices near the mean slice load split on chance and merged back)
    expect(changedRounds({})).toBeLessThan(20)
    expect(changedRounds({ splitNoise: 0 })).toBeGreaterThan(80)
  })

  test('the noise is in requests: loads as costs with the request count give the same round', () => {
    const { assignment } = build([[4, 'a', 0], [4, 'b', 0], [4, 'c', 0], [4, 'a', 0]])
    const counts = [12, 8, 9, 11]
    const costs = counts.map((n) => n * 8)
    const byCount = real.chopperRound(assignment, counts, {}, { requests: 40 })
    expect(real.chopperRound(assignment, costs, {}, { requests: 40 }).assignment).toEqual(byCount.assignment)
    expect(byCount.ops.filter((o) => o.op === 'split')).toEqual([]) // 12 is within 2 x the noise of the mean 10
    expect(real.chopperRound(assignment, counts, { splitNoise: 0 }, { requests: 40 }).ops.filter((o) => o.op === 'split')).toHaveLength(2)
  })

  test('with replicate: false the option is not used (the paper\'s round)', () => {
    const { assignment } = build([[4, 'a', 0], [4, 'b', 0], [4, 'c', 0], [4, 'a', 0]])
    const loads = [12, 8, 9, 11]
    expect(real.chopperRound(assignment, loads, { replicate: false, splitNoise: 3 }, { requests: 40 }))
      .toEqual(real.chopperRound(assignment, loads, { replicate: false, splitNoise: 0 }, { requests: 40 }))
  })
})

describe('a standby replica for every slice (minReplicas 2)', () => {
  test('slices on the same servers merge again: the slice count stays bounded round after round', () => {
    const real = require('../../controller/strategies/chopper')
    const o = { minReplicas: 2, initialSlicesPerServer: 1 }
    let a = real.initial({ a: { url: 'http://127.0.0.1:1' }, b: { url: 'http://127.0.0.1:2' }, c: { url: 'http://127.0.0.1:3' } }, o)
    for (let r = 0; r < 30; r++) a = real.rebalance(a, a.slices.map((s, i) => (i % 7 === 0 ? 50 : 5)), o)
    expect(a.slices.length).toBeLessThan(40) // without same-set merges: doubling every round
  })

  const real = require('../../controller/strategies/chopper')
  const servers3 = { a: { url: 'http://127.0.0.1:1' }, b: { url: 'http://127.0.0.1:2' }, c: { url: 'http://127.0.0.1:3' } }
  test('the initial layout puts each slice on its server and the next one; a round keeps at least 2 everywhere', () => {
    const o = { minReplicas: 2, initialSlicesPerServer: 1 }
    const a = real.initial(servers3, o)
    expect(a.slices.map((s) => s.servers)).toEqual([['a', 'b'], ['b', 'c'], ['c', 'a']])
    const next = real.rebalance(a, [30, 10, 10], o)
    for (const s of next.slices) expect(s.servers.length).toBeGreaterThanOrEqual(2)
    expect(real.initial({ a: servers3.a }, o).slices[0].servers).toEqual(['a']) // capped at the server count
    expect(real.initial(servers3, { ...o, replicate: false }).slices.map((s) => s.servers.length)).toEqual([1, 1, 1])
    expect(real.initial(servers3, { initialSlicesPerServer: 1 }).slices.map((s) => s.servers.length)).toEqual([2, 2, 2]) // the default: 2
  })

  test('by default each server\'s 1/n is cut in 4 slices with the same servers (1 without standbys); maxSlices bounds the cut', () => {
    const a = real.initial(servers3)
    expect(validateAssignment(a)).toBe(a)
    expect(a.slices).toHaveLength(12)
    const paper = real.initial(servers3, { initialSlicesPerServer: 1 })
    paper.slices.forEach((s, i) => {
      const parts = a.slices.slice(4 * i, 4 * i + 4)
      expect(parts.map((p) => p.servers)).toEqual(Array(4).fill(s.servers))
      expect([parts[0].start, parts[3].end]).toEqual([s.start, s.end]) // contiguous: the same keys as the paper's slice
      for (const p of parts) expect(p.end - p.start).toBeGreaterThanOrEqual(Math.floor((s.end - s.start) / 4))
    })
    expect(real.initial(servers3, { initialSlicesPerServer: 8 }).slices).toHaveLength(24)
    expect(real.initial(servers3, { minReplicas: 1 }).slices).toHaveLength(3) // single owners: the paper's layout
    expect(real.initial(servers3, { replicate: false }).slices).toHaveLength(3)
    expect(real.initial({ a: servers3.a }).slices).toHaveLength(1) // one server: no standby to give
    expect(real.initial(servers3, { maxSlices: 7 }).slices).toHaveLength(6) // 2 per server: 3 x 2 <= 7
    expect(real.initial(servers3, { maxSlices: 3 }).slices).toHaveLength(3)
  })
})
