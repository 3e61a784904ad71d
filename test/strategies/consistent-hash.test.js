'use strict'

const farmhash = require('farmhash')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { validateAssignment, evenAssignment, keyChurn, sameLayout, ownedRanges } = require('../../core/assignment')
const { totalLength } = require('../../core/ranges')
const { SliceMap } = require('../../core/slice-map')
const { InvalidArgumentError } = require('../../core/errors')
const ch = require('../../controller/strategies/consistent-hash')
const { prng, deepFreeze } = require('./helpers')

const serversOf = (ids) => Object.fromEntries(ids.map((id) => [id, { url: `http://127.0.0.1:1/${id}` }]))
const five = serversOf(['s1', 's2', 's3', 's4', 's5'])

/** The ring by definition: first point clockwise with point >= key, wrapping; equal points go to the lower id. */
function bruteForceOwner (ids, vnodes, key) {
  let best = null
  let lowest = null
  const better = (p, id, cur) => cur === null || p < cur.p || (p === cur.p && id < cur.id)
  for (const id of ids) {
    for (let i = 0; i < vnodes; i++) {
      const p = farmhash.fingerprint32(`${id}#${i}`)
      if (p >= key && better(p, id, best)) best = { p, id }
      if (better(p, id, lowest)) lowest = { p, id }
    }
  }
  return (best || lowest).id
}

function sampleKeys (seed, n, ids, vnodes) {
  const rand = prng(seed)
  const keys = [0, 1, KEYSPACE_SIZE - 1]
  for (let i = 0; i < n; i++) keys.push(Math.floor(rand() * KEYSPACE_SIZE))
  // the points themselves and their neighbours are where off-by-one errors live
  for (const id of ids) {
    for (let i = 0; i < Math.min(vnodes, 10); i++) {
      const p = farmhash.fingerprint32(`${id}#${i}`)
      for (const k of [p - 1, p, p + 1]) if (k >= 0 && k < KEYSPACE_SIZE) keys.push(k)
    }
  }
  return keys
}

describe('consistent-hash strategy', () => {
  test('the assignment agrees with a brute-force ring lookup', () => {
    const ids = Object.keys(five)
    const map = new SliceMap(ch.initial(five))
    const keys = sampleKeys(7, 2000, ids, 100)
    const mismatches = keys.filter((k) => map.ownerOf(k) !== bruteForceOwner(ids, 100, k))
    expect(mismatches).toEqual([])
    expect(keys.length).toBeGreaterThan(2000)
  })

  test('covers the keyspace, coalesces same-owner neighbours, and spreads keys across servers', () => {
    const a = ch.initial(five)
    validateAssignment(a)
    expect(a.generation).toBe(1)
    for (let i = 1; i < a.slices.length; i++) expect(a.slices[i].servers[0]).not.toBe(a.slices[i - 1].servers[0])
    for (const id of Object.keys(five)) {
      const share = totalLength(ownedRanges(a, id)) / KEYSPACE_SIZE
      expect(share).toBeGreaterThan(0.2 * 0.6) // 100 vnodes: each share within +-40% of 1/5
      expect(share).toBeLessThan(0.2 * 1.4)
    }
    // more vnodes, more (smaller) ranges
    expect(ch.initial(five, { vnodes: 10 }).slices.length).toBeLessThan(a.slices.length)
  })

  test('rebalance never moves anything, whatever the loads', () => {
    const a = deepFreeze({ ...ch.initial(five), generation: 9 })
    const rand = prng(3)
    const loads = a.slices.map((_, i) => (i === 0 ? 1e9 : Math.floor(rand() * 10)))
    const b = ch.rebalance(a, loads)
    expect(b).not.toBe(a)
    expect(sameLayout(a, b)).toBe(true)
    expect(b.generation).toBe(9)
    expect(() => ch.rebalance(a, [1])).toThrow(InvalidArgumentError)
  })

  test('addServer moves only keys that now belong to the new server, about 1/(n+1) of them', () => {
    const before = { ...ch.initial(five), generation: 4 }
    const after = ch.addServer(before, 's6', 'http://127.0.0.1:1/s6')
    validateAssignment(after)
    expect(after.generation).toBe(4)
    const churn = keyChurn(before, after)
    // every key that changed owner went to s6, and s6 only got keys that changed owner
    expect(churn).toBe(totalLength(ownedRanges(after, 's6')))
    expect(churn / KEYSPACE_SIZE).toBeGreaterThan(1 / 6 * 0.6)
    expect(churn / KEYSPACE_SIZE).toBeLessThan(1 / 6 * 1.4)
    const m0 = new SliceMap(before)
    const m1 = new SliceMap(after)
    for (const k of sampleKeys(11, 2000, ['s6'], 100)) {
      if (m0.ownerOf(k) !== m1.ownerOf(k)) expect(m1.ownerOf(k)).toBe('s6')
    }
  })

  test('removeServer moves exactly the leaving server\'s keys', () => {
    const before = ch.initial(five)
    const after = ch.removeServer(before, 's3')
    validateAssignment(after)
    expect(Object.keys(after.servers)).toEqual(['s1', 's2', 's4', 's5'])
    expect(keyChurn(before, after)).toBe(totalLength(ownedRanges(before, 's3')))
    // and the result is the ring of the remaining servers
    expect(after).toEqual(ch.initial(serversOf(['s1', 's2', 's4', 's5'])))
    // add back: the original ring
    expect(sameLayout(ch.addServer(after, 's3', five.s3.url), before)).toBe(true)
  })

  test('vnodes: 0 is the paper\'s contiguous 1/n setup', () => {
    expect(ch.initial(five, { vnodes: 0 })).toEqual(evenAssignment(five, 1))
    const removed = ch.removeServer(ch.initial(five, { vnodes: 0 }), 's5', null, { vnodes: 0 })
    expect(removed).toEqual(evenAssignment(serversOf(['s1', 's2', 's3', 's4']), 1))
  })

  test('is deterministic and does not mutate its input', () => {
    const a = deepFreeze(ch.initial(five))
    expect(ch.initial(five)).toEqual(a)
    expect(ch.addServer(a, 'x', 'http://127.0.0.1:1/x')).toEqual(ch.addServer(a, 'x', 'http://127.0.0.1:1/x'))
    ch.removeServer(a, 's1')
  })

  test('validates options and arguments', () => {
    const a = ch.initial(five)
    expect(Object.isFrozen(ch.defaults)).toBe(true)
    expect(ch.defaults).toEqual({ vnodes: 100 })
    expect(() => ch.initial(five, { vnodes: -1 })).toThrow(/invalid consistent-hash option vnodes: expected an integer in \[0, 10000\], got -1/)
    expect(() => ch.initial(five, { vnodes: 2.5 })).toThrow(InvalidArgumentError)
    expect(() => ch.initial(five, { replicas: 3 })).toThrow(/unknown consistent-hash option replicas \(valid options: vnodes\)/)
    expect(() => ch.initial({})).toThrow(/at least one server/)
    expect(() => ch.addServer(a, 's1', 'http://127.0.0.1:1/s1')).toThrow(/already in the assignment/)
    expect(() => ch.removeServer(a, 'nope')).toThrow(/not in the assignment/)
    expect(() => ch.removeServer(ch.initial(serversOf(['only'])), 'only')).toThrow(/it is the last server/)
  })
})
