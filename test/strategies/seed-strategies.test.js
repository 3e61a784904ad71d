'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { validateAssignment, ownedRanges, sameLayout } = require('../../core/assignment')
const { subtract, totalLength } = require('../../core/ranges')
const { InvalidArgumentError } = require('../../core/errors')
const { getStrategy } = require('../../controller/strategies')
const { prng, deepFreeze } = require('./helpers')

// The contract every strategy added for issue 14 keeps (docs/algorithm.md):
// valid tilings, no mutation, determinism, unknown servers never receive keys,
// options validated with messages that name them.

const NAMES = ['neighbour-offload', 'bounded-consistent-hash', 'slicer-weighted']
const url = (id) => `http://127.0.0.1:1/${id}`

/** A random assignment (2-7 servers, random cuts and owners) with heavy-tailed loads. */
function randomCase (rand) {
  const n = 2 + Math.floor(rand() * 6)
  const ids = Array.from({ length: n }, (_, i) => `s${i + 1}`)
  const cuts = new Set()
  const count = n + Math.floor(rand() * 30)
  while (cuts.size < count - 1) cuts.add(1 + Math.floor(rand() * (KEYSPACE_SIZE - 1)))
  const bounds = [0, ...[...cuts].sort((x, y) => x - y), KEYSPACE_SIZE]
  const slices = []
  for (let i = 0; i + 1 < bounds.length; i++) slices.push({ start: bounds[i], end: bounds[i + 1], servers: [ids[Math.floor(rand() * n)]] })
  const servers = Object.fromEntries(ids.map((id) => [id, { url: url(id) }]))
  const loads = slices.map(() => (rand() < 0.2 ? 0 : Math.floor(1 / (0.02 + rand()) * 10)))
  const unknown = rand() < 0.5 ? [] : ids.filter(() => rand() < 0.3).slice(0, n - 1)
  return { assignment: { generation: 3, slices, servers }, loads, ids, unknown }
}

/** Keys `id` owns in `after` but did not own in `before`. */
const gained = (before, after, id) => totalLength(subtract(ownedRanges(after, id), ownedRanges(before, id)))

describe.each(NAMES)('%s strategy contract', (name) => {
  const s = getStrategy(name)

  test('is registered with the full interface and frozen defaults', () => {
    expect(s.name).toBe(name)
    expect(Object.isFrozen(s.defaults)).toBe(true)
    for (const fn of ['initial', 'rebalance', 'addServer', 'removeServer']) expect(typeof s[fn]).toBe('function')
  })

  test('initial tiles the keyspace with every server owning keys, generation 1', () => {
    const servers = Object.fromEntries(['a', 'b', 'c', 'd'].map((id) => [id, { url: url(id) }]))
    const a = s.initial(deepFreeze(servers))
    validateAssignment(a)
    expect(a.generation).toBe(1)
    for (const id of Object.keys(servers)) expect(totalLength(ownedRanges(a, id))).toBeGreaterThan(0)
  })

  test('random inputs: valid output, inputs untouched, deterministic, unknown servers gain nothing', () => {
    const rand = prng(`${name}-contract`)
    for (let c = 0; c < 150; c++) {
      const { assignment, loads, ids, unknown } = randomCase(rand)
      const frozen = deepFreeze({ assignment, loads, inputs: { unknownServers: unknown } })
      const snapshot = JSON.stringify(frozen)
      const next = s.rebalance(frozen.assignment, frozen.loads, undefined, frozen.inputs)
      validateAssignment(next)
      expect(next.generation).toBe(3)
      expect(sameLayout(next, s.rebalance(frozen.assignment, frozen.loads, undefined, frozen.inputs))).toBe(true)
      for (const u of unknown) expect(gained(assignment, next, u)).toBe(0)

      const added = s.addServer(frozen.assignment, 'new', url('new'), frozen.loads, undefined, frozen.inputs)
      validateAssignment(added)
      expect(Object.keys(added.servers)).toContain('new')
      for (const u of unknown) expect(gained(assignment, added, u)).toBe(0)

      const leaving = ids[Math.floor(rand() * ids.length)]
      const removed = s.removeServer(frozen.assignment, leaving, frozen.loads, undefined, frozen.inputs)
      validateAssignment(removed)
      expect(Object.keys(removed.servers)).not.toContain(leaving)
      expect(removed.slices.every((x) => !x.servers.includes(leaving))).toBe(true)
      const remainingKnown = ids.filter((id) => id !== leaving && !unknown.includes(id))
      if (remainingKnown.length > 0) for (const u of unknown) if (u !== leaving) expect(gained(assignment, removed, u)).toBe(0)
      expect(JSON.stringify(frozen)).toBe(snapshot)
    }
  })

  test('rejects bad options naming the option, and unknown option names', () => {
    const servers = { a: { url: url('a') }, b: { url: url('b') } }
    const bad = {
      'neighbour-offload': [['buckets', 0], ['offloadPercent', 0], ['offloadPercent', 101], ['threshold', -1], ['churnLimit', 2]],
      'bounded-consistent-hash': [['vnodes', 0], ['balanceFactor', 0.9], ['balanceFactor', Infinity]],
      'slicer-weighted': [['mergeChurnLimit', -0.1], ['moveChurnLimit', 1.5], ['minWeight', -1], ['maxSlices', 0], ['minSliceLength', 0]]
    }[name]
    for (const [key, value] of bad) {
      expect(() => s.initial(servers, { [key]: value })).toThrow(InvalidArgumentError)
      expect(() => s.initial(servers, { [key]: value })).toThrow(new RegExp(`invalid ${name} option ${key}: expected`))
      const a = s.initial(servers)
      expect(() => s.rebalance(a, a.slices.map(() => 1), { [key]: value })).toThrow(new RegExp(`option ${key}`))
    }
    expect(() => s.initial(servers, { typo: 1 })).toThrow(new RegExp(`unknown ${name} option typo`))
    const a = s.initial(servers)
    expect(() => s.rebalance(a, [1])).toThrow(/loads must have one entry per slice/)
    expect(() => s.rebalance(a, a.slices.map(() => 1), undefined, { unknownServers: ['zz'] })).toThrow(/not in the assignment/)
    expect(() => s.removeServer(s.initial({ a: { url: url('a') } }), 'a')).toThrow(/last server/)
  })

  test('an idle period changes nothing that was balanced already', () => {
    const servers = Object.fromEntries(['a', 'b', 'c'].map((id) => [id, { url: url(id) }]))
    const a = s.initial(servers)
    expect(sameLayout(s.rebalance(a, a.slices.map(() => 0)), a)).toBe(true)
  })
})
