'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { validateAssignment, keyChurn, ownedRanges } = require('../../core/assignment')
const { SliceMap } = require('../../core/slice-map')
const { InvalidArgumentError } = require('../../core/errors')
const chopper = require('./chopper-one-replica') // minReplicas 1 unless a test sets it
const ch = require('../../controller/strategies/consistent-hash')
const { mergePhase } = require('../../controller/strategies/merge')
const { movePhase } = require('../../controller/strategies/move')
const { splitPhase } = require('../../controller/strategies/split')
const { U, working, build, view, prng, deepFreeze } = require('./helpers')

// A server whose load collection failed is *unknown* for the period: the
// controller passes `{ unknownServers: [id] }`, and the strategy freezes it
// (docs/algorithm.md, "Servers with unknown load").

const invalidArg = (fn, pattern) => {
  let err
  try { fn() } catch (e) { err = e }
  expect(err).toBeInstanceOf(InvalidArgumentError)
  expect(err.code).toBe('CHOPPER_ERR_INVALID_ARG')
  expect(err.message).toMatch(pattern)
}

/** The slices whose primary owner is in `ids`, as plain { start, end, servers }. */
const slicesOf = (a, ids) => a.slices
  .filter((s) => ids.includes(s.servers[0]))
  .map(({ start, end, servers }) => ({ start, end, servers }))

/** Every op that gives keys to, or takes keys from, one of `ids` (replica ops list `servers`). */
const opsTouching = (ops, ids) => ops.filter((o) =>
  ids.includes(o.to) || ids.includes(o.from) || ids.includes(o.server) || (o.servers || []).some((id) => ids.includes(id)))

// The paper's move phase, without replication: the hand-worked cases below are
// about which slices move (replication.test.js covers frozen servers with replicas).
const single = { replicate: false }

/** Ops that hand `id` load: a move onto it, or a new replica on it. */
const givesTo = (ops, ids) => ops.filter((o) =>
  (o.op === 'move' && ids.includes(o.to)) || (o.op === 'replicate' && o.servers.some((id) => ids.includes(id))))

const sum = (xs) => Array.from(xs).reduce((x, y) => x + y, 0)

/**
 * A random assignment of 2-6 servers over up to ~25 slices with random cut
 * points and owners (some servers may own nothing), 1..n-1 of them unknown.
 * Unknown servers' slices read 0 most of the time (a failed collection) and
 * otherwise a last-known figure; known slices get heavy-tailed loads.
 */
function randomCase (rand) {
  const n = 2 + Math.floor(rand() * 5)
  const ids = Array.from({ length: n }, (_, i) => `s${i + 1}`)
  const cuts = new Set()
  const count = n + Math.floor(rand() * 20)
  while (cuts.size < count - 1) cuts.add(1 + Math.floor(rand() * (KEYSPACE_SIZE - 1)))
  const bounds = [0, ...[...cuts].sort((x, y) => x - y), KEYSPACE_SIZE]
  const slices = []
  for (let i = 0; i + 1 < bounds.length; i++) {
    slices.push({ start: bounds[i], end: bounds[i + 1], servers: [ids[Math.floor(rand() * n)]] })
  }
  const servers = Object.fromEntries(ids.map((id) => [id, { url: `http://127.0.0.1:1/${id}` }]))
  const shuffled = ids.slice()
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [shuffled[i], shuffled[j]] = [shuffled[j], shuffled[i]]
  }
  const unknown = shuffled.slice(0, 1 + Math.floor(rand() * (n - 1)))
  return { assignment: { generation: 5, slices, servers }, unknown, loads: (a) => loadsFor(a, unknown, rand) }
}

function loadsFor (a, unknown, rand) {
  return a.slices.map((s) => {
    if (unknown.includes(s.servers[0])) return rand() < 0.7 ? 0 : Math.floor(500 * rand())
    return rand() < 0.15 ? 0 : Math.floor(1000 * rand() ** 3)
  })
}

describe('servers with unknown load (chopper)', () => {
  // a and b are hot; c's collection failed, so its slices read 0
  const failed = () => build([
    [2, 'a', 40], [2, 'a', 40], [2, 'a', 40], [2, 'b', 40], [2, 'b', 40], [2, 'b', 40], [2, 'c', 0], [2, 'c', 0]
  ])

  test('a failed collection attracts slices when c is not marked unknown (what this feature prevents)', () => {
    const { assignment, loads } = failed()
    const r = chopper.chopperRound(assignment, loads)
    // c's two zero slices merge, and c, looking idle, is the coolest server: it gets moves or replicas
    expect(givesTo(r.ops, ['c'])).not.toHaveLength(0)
    expect(chopper.chopperRound(assignment, loads, single).ops.filter((o) => o.op === 'move' && o.to === 'c')).not.toHaveLength(0)
    expect(r.ops).toContainEqual(expect.objectContaining({ op: 'merge', server: 'c' }))
    expect(r.frozen).toEqual([])
  })

  test('marked unknown, c is frozen: nothing lands on it, its slices stay, and a/b alone decide the ratio', () => {
    const { assignment, loads } = failed()
    const r = chopper.chopperRound(assignment, loads, single, { unknownServers: ['c'] })
    expect(opsTouching(r.ops, ['c'])).toEqual([])
    expect(slicesOf(r.assignment, ['c'])).toEqual(slicesOf(assignment, ['c']))
    // a = b = 120: hottest / coolest = 1 among the known servers
    expect(r.ops.filter((o) => o.op === 'move')).toEqual([])
    expect(r.moveStop).toBe('ratio')
    expect(r.frozen).toEqual(['c'])
    expect(r.imbalance.before).toBe(1) // over a and b only
    expect(chopper.rebalance(assignment, loads, single, { unknownServers: ['c'] })).toEqual(r.assignment)
  })

  test('a frozen server does not donate, and is not split, even when its last-known load is the highest', () => {
    // c's stale figures say it is hot; a (100) still gives load to b (10), as if c were absent
    const { assignment, loads } = build([[3, 'c', 300], [3, 'c', 300], [3, 'a', 50], [3, 'a', 50], [4, 'b', 10]])
    const without = chopper.chopperRound(assignment, loads, single)
    expect(without.ops).toContainEqual(expect.objectContaining({ op: 'move', from: 'c' }))
    expect(without.ops).toContainEqual(expect.objectContaining({ op: 'split', server: 'c' }))

    const r = chopper.chopperRound(assignment, loads, single, { unknownServers: ['c'] })
    expect(opsTouching(r.ops, ['c'])).toEqual([])
    expect(view(r.assignment.slices, r.loads).slice(0, 2)).toEqual([[3, 'c', 300], [3, 'c', 300]])
    expect(r.ops.filter((o) => o.op === 'move').map((o) => [o.from, o.to, o.load])).toEqual([['a', 'b', 50]])
  })

  test('known loads all idle: nothing changes, even if stale figures are not 0', () => {
    const { assignment, loads } = build([[8, 'a', 0], [4, 'b', 0], [4, 'c', 500]])
    const r = chopper.chopperRound(assignment, loads, undefined, { unknownServers: ['c'] })
    expect(r.assignment).toEqual(assignment)
    expect(r.ops).toEqual([])
    expect(r.moveStop).toBe(null)
    expect(r.frozen).toEqual(['c'])
  })

  test('every server unknown: the assignment comes back unchanged', () => {
    const { assignment, loads } = build([[2, 'a', 0], [2, 'a', 0], [12, 'b', 900]])
    const r = chopper.chopperRound(assignment, loads, undefined, { unknownServers: ['b', 'a'] })
    expect(r.assignment).toEqual(assignment)
    expect(r.ops).toEqual([])
    expect(r.frozen).toEqual(['a', 'b'])
  })

  test('the order of unknownServers does not matter, and inputs are not mutated', () => {
    const { assignment, loads } = build([[2, 'c', 5], [2, 'a', 1], [4, 'b', 100], [2, 'a', 10], [2, 'c', 10], [1, 'd', 0], [3, 'd', 0]])
    deepFreeze(assignment)
    deepFreeze(loads)
    const inputs = deepFreeze({ unknownServers: ['d', 'c'] })
    const snapshot = JSON.stringify({ assignment, loads, inputs })
    const r = chopper.chopperRound(assignment, loads, undefined, inputs) // frozen: any write would throw
    expect(chopper.chopperRound(assignment, loads, undefined, { unknownServers: ['c', 'd'] })).toEqual(r)
    expect(r.frozen).toEqual(['c', 'd'])
    expect(JSON.stringify({ assignment, loads, inputs })).toBe(snapshot)
  })

  test('no, empty or undefined unknownServers behave exactly as before', () => {
    const { assignment, loads } = failed()
    const plain = chopper.chopperRound(assignment, loads)
    for (const inputs of [undefined, null, {}, { unknownServers: undefined }, { unknownServers: [] }]) {
      expect(chopper.chopperRound(assignment, loads, undefined, inputs)).toEqual(plain)
    }
  })

  test('a failed collection never attracts slices, over 200 random assignments and loads', () => {
    const rand = prng(2024)
    let attractedWithout = 0
    let movesAmongKnown = 0
    for (let c = 0; c < 200; c++) {
      const { assignment, unknown, loads: loadsOf } = randomCase(rand)
      const limits = [0.05, 0.2, 1]
      const opts = {
        mergeChurnLimit: limits[Math.floor(rand() * 3)],
        moveChurnLimit: limits[Math.floor(rand() * 3)]
      }
      const inputs = deepFreeze({ unknownServers: unknown })
      let a = deepFreeze(assignment)
      for (let round = 0; round < 3; round++) {
        const loads = deepFreeze(loadsOf(a))
        if (round === 0) {
          const without = chopper.chopperRound(a, loads, opts)
          if (givesTo(without.ops, unknown).length > 0) attractedWithout++
        }
        const r = chopper.chopperRound(a, loads, opts, inputs)
        validateAssignment(r.assignment) // tiles the keyspace, names only known ids
        // the unknown servers own exactly the slices they owned: nothing landed on, left or changed within them
        expect(slicesOf(r.assignment, unknown)).toEqual(slicesOf(a, unknown))
        expect(opsTouching(r.ops, unknown)).toEqual([])
        expect(r.frozen).toEqual(unknown.slice().sort())
        // the other rules still hold
        expect(r.churn.merge).toBeLessThanOrEqual(opts.mergeChurnLimit * KEYSPACE_SIZE)
        expect(r.churn.move).toBeLessThanOrEqual(opts.moveChurnLimit * KEYSPACE_SIZE)
        expect(r.churn.total).toBe(keyChurn(a, r.assignment))
        expect(r.churn.replicate).toBeLessThanOrEqual(chopper.defaults.replicaChurnLimit * KEYSPACE_SIZE)
        expect(r.churn.total).toBeLessThanOrEqual(r.churn.merge + r.churn.move + r.churn.replicate)
        expect(sum(r.loads)).toBeCloseTo(sum(loads), 6)
        movesAmongKnown += r.ops.filter((o) => o.op === 'move' || o.op === 'replicate').length
        a = deepFreeze(r.assignment)
      }
    }
    // the property is not vacuous: without the argument, most cases hand the unknown server slices,
    // and with it the known servers still balance among themselves
    expect(attractedWithout).toBeGreaterThan(100)
    expect(movesAmongKnown).toBeGreaterThan(100)
  })
})

describe('phases with frozen servers', () => {
  test('merge: frozen slices neither start nor join a run, and their loads stay out of the mean', () => {
    // known mean = (1 + 1 + 1 + 9) / 4 = 3; with c's 0s counted it would be 12 / 7
    const spec = [[2, 'a', 1], [2, 'c', 0], [2, 'a', 1], [2, 'a', 1], [2, 'c', 0], [2, 'c', 0], [4, 'b', 9]]
    const free = mergePhase(working(spec), ['a', 'b', 'c'], KEYSPACE_SIZE)
    expect(free.ops).toContainEqual(expect.objectContaining({ server: 'c' }))
    const r = mergePhase(working(spec), ['a', 'b', 'c'], KEYSPACE_SIZE, new Set(['c']))
    // only a's own neighbours 1 + 1 = 2 < 3 merge; the run stops at c
    expect(view(r.slices)).toEqual([[2, 'a', 1], [2, 'c', 0], [4, 'a', 2], [2, 'c', 0], [2, 'c', 0], [4, 'b', 9]])
    expect(r.churn).toBe(0)
  })

  test('move: a frozen server is never the coolest, the hottest or a donor', () => {
    const spec = [[4, 'a', 50], [4, 'a', 30], [4, 'a', 20], [2, 'b', 60], [2, 'c', 0]]
    const opts = { ratio: 1.25, churnLimit: KEYSPACE_SIZE }
    expect(movePhase(working(spec), ['a', 'b', 'c'], opts).ops[0]).toMatchObject({ from: 'a', to: 'c' })
    const r = movePhase(working(spec), ['a', 'b', 'c'], { ...opts, frozen: new Set(['c']) })
    // among a (100) and b (60) only: the 50 would make b 110 > 100, so the 30 moves;
    // then b (90) is a receiver and a (70) the coolest: nothing left to try
    expect(r.ops.map((o) => [o.from, o.to, o.load])).toEqual([['a', 'b', 30]])
    expect(r.stop).toBe('no-candidate')
    expect(movePhase(working(spec), ['a', 'b', 'c'], { ...opts, frozen: new Set(['a', 'b', 'c']) }))
      .toMatchObject({ ops: [], churn: 0, stop: 'idle' })
  })

  test('split: frozen slices are never split, and their loads stay out of the mean', () => {
    // known mean = 50 / 3: b's 30 is split; with c's stale 1000 counted, only c's slice would be
    const spec = [[4, 'a', 10], [4, 'a', 10], [4, 'b', 30], [4, 'c', 1000]]
    const limits = { maxSlices: 100, minSliceLength: 1 }
    expect(splitPhase(working(spec), limits).ops.map((o) => o.server)).toEqual(['c'])
    const r = splitPhase(working(spec), { ...limits, frozen: new Set(['c']) })
    expect(view(r.slices)).toEqual([[4, 'a', 10], [4, 'a', 10], [2, 'b', 15], [2, 'b', 15], [4, 'c', 1000]])
  })
})

describe('removeServer with unknown servers (chopper)', () => {
  // a leaves. b's collection failed (reads 0); c = 45, d = 40
  const { assignment, loads } = build([[2, 'a', 10], [2, 'a', 50], [2, 'a', 30], [4, 'b', 0], [3, 'c', 45], [3, 'd', 40]])

  test('the leaving slices go only to known servers, hottest first to the least loaded', () => {
    // without the argument, b looks idle and takes the 50
    expect(view(chopper.removeServer(assignment, 'a', loads).slices)[1]).toEqual([2, 'b'])
    const r = chopper.removeServer(assignment, 'a', loads, undefined, { unknownServers: ['b'] })
    validateAssignment(r)
    // 50 -> d (90); 30 -> c (75); 10 -> c (85)
    expect(view(r.slices, loads)).toEqual([[2, 'c', 10], [2, 'd', 50], [2, 'c', 30], [4, 'b', 0], [3, 'c', 45], [3, 'd', 40]])
    expect(keyChurn(assignment, r)).toBe(6 * U)
  })

  test('when every remaining server is unknown, the slices still go somewhere: the usual rule over all of them', () => {
    const all = { unknownServers: ['b', 'c', 'd'] }
    expect(chopper.removeServer(assignment, 'a', loads, undefined, all)).toEqual(chopper.removeServer(assignment, 'a', loads))
  })

  test('the leaving server may itself be unknown', () => {
    const r = chopper.removeServer(deepFreeze(assignment), 'a', loads, undefined, deepFreeze({ unknownServers: ['a', 'b'] }))
    expect(r).toEqual(chopper.removeServer(assignment, 'a', loads, undefined, { unknownServers: ['b'] }))
    expect(Object.keys(r.servers)).toEqual(['b', 'c', 'd'])
  })

  test('addServer accepts and validates the argument; the new server is not in it', () => {
    const plain = chopper.addServer(assignment, 'e', 'http://127.0.0.1:1/e', loads)
    expect(chopper.addServer(assignment, 'e', 'http://127.0.0.1:1/e', loads, undefined, { unknownServers: ['b'] })).toEqual(plain)
    invalidArg(() => chopper.addServer(assignment, 'e', 'http://127.0.0.1:1/e', loads, undefined, { unknownServers: ['e'] }),
      /inputs\.unknownServers\[0\]: server e is not in the assignment/)
  })
})

describe('inputs validation', () => {
  const { assignment, loads } = build([[8, 'a', 1], [8, 'b', 2]])
  const five = Object.fromEntries(['s1', 's2', 's3', 's4', 's5'].map((id) => [id, { url: `http://127.0.0.1:1/${id}` }]))
  const ring = ch.initial(five)
  const calls = {
    'chopper.rebalance': (inputs) => chopper.rebalance(assignment, loads, undefined, inputs),
    'chopper.chopperRound': (inputs) => chopper.chopperRound(assignment, loads, undefined, inputs),
    'chopper.addServer': (inputs) => chopper.addServer(assignment, 'c', 'http://127.0.0.1:1/c', loads, undefined, inputs),
    'chopper.removeServer': (inputs) => chopper.removeServer(assignment, 'b', loads, undefined, inputs),
    'consistent-hash.rebalance': (inputs) => ch.rebalance(ring, ring.slices.map(() => 1), undefined, rename(inputs)),
    'consistent-hash.addServer': (inputs) => ch.addServer(ring, 'x', 'http://127.0.0.1:1/x', undefined, undefined, rename(inputs)),
    'consistent-hash.removeServer': (inputs) => ch.removeServer(ring, 's5', undefined, undefined, rename(inputs))
  }
  // the cases below name servers a and b; the ring's servers are s1..s5
  function rename (inputs) {
    if (!inputs || !Array.isArray(inputs.unknownServers)) return inputs
    return { ...inputs, unknownServers: inputs.unknownServers.map((id) => ({ a: 's1', b: 's2' })[id] ?? id) }
  }

  const bad = [
    ['not an object', 'b', /inputs must be an object \{ unknownServers, requests, hotKeys \}, got "b"/],
    ['an array', ['b'], /inputs must be an object/],
    ['an unknown field', { unknownServer: ['b'] }, /unknown inputs field unknownServer \(valid fields: unknownServers, requests, hotKeys\)/],
    ['requests not a number', { requests: '10' }, /invalid inputs\.requests: expected a finite number >= 0, got "10"/],
    ['requests negative', { requests: -1 }, /invalid inputs\.requests: expected a finite number >= 0, got -1/],
    ['requests not finite', { requests: Infinity }, /invalid inputs\.requests: expected a finite number >= 0, got Infinity/],
    ['unknownServers not an array', { unknownServers: 'b' }, /invalid inputs\.unknownServers: expected an array of server ids, got "b"/],
    ['unknownServers null', { unknownServers: null }, /invalid inputs\.unknownServers: expected an array of server ids, got null/],
    ['a non-string id', { unknownServers: ['a', 3] }, /inputs\.unknownServers\[1\] must be a non-empty string, got 3/],
    ['an empty id', { unknownServers: [''] }, /inputs\.unknownServers\[0\] must be a non-empty string/],
    ['an id not in the assignment', { unknownServers: ['zz'] }, /inputs\.unknownServers\[0\]: server zz is not in the assignment/],
    ['a duplicate', { unknownServers: ['b', 'a', 'b'] }, /inputs\.unknownServers lists server (b|s2) twice/]
  ]

  for (const [name, call] of Object.entries(calls)) {
    test.each(bad)(`${name} rejects inputs that are %s`, (_, inputs, pattern) => {
      invalidArg(() => call(inputs), pattern)
    })
  }

  test('options are still checked first', () => {
    invalidArg(() => chopper.rebalance(assignment, loads, { moveRatio: 0 }, 'b'), /moveRatio/)
    invalidArg(() => ch.rebalance(ring, ring.slices.map(() => 1), { vnodes: -1 }, 'b'), /vnodes/)
  })
})

describe('consistent-hash and unknown servers', () => {
  const five = Object.fromEntries(['s1', 's2', 's3', 's4', 's5'].map((id) => [id, { url: `http://127.0.0.1:1/${id}` }]))

  test('the ring accepts unknownServers but does not consult it: the hash points decide', () => {
    const ring = deepFreeze({ ...ch.initial(five), generation: 6 })
    const loads = ring.slices.map((_, i) => i % 7)
    const inputs = deepFreeze({ unknownServers: ['s1', 's2', 's4'] })
    expect(ch.rebalance(ring, loads, undefined, inputs)).toEqual(ch.rebalance(ring, loads))
    expect(ch.addServer(ring, 's6', 'http://127.0.0.1:1/s6', loads, undefined, inputs))
      .toEqual(ch.addServer(ring, 's6', 'http://127.0.0.1:1/s6', loads))
    const removed = ch.removeServer(ring, 's3', loads, undefined, inputs)
    expect(removed).toEqual(ch.removeServer(ring, 's3', loads))
    // unknown servers do take some of s3's keys, because their points follow s3's
    const after = new SliceMap(removed)
    const gainers = new Set(ownedRanges(ring, 's3').map((r) => after.ownerOf(r.start)))
    expect([...gainers].filter((id) => inputs.unknownServers.includes(id))).not.toEqual([])
  })
})
