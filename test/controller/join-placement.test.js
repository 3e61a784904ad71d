'use strict'

const fc = require('fast-check')
const { placeJoiners } = require('../../controller/join-placement')
const { validateAssignment } = require('../../core/assignment')
const { initial } = require('../../controller/strategies/chopper')
const { KEYSPACE_SIZE } = require('../../core/keyspace')

const servers = (n, prefix = 's') => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${String(i).padStart(4, '0')}`, { url: `http://127.0.0.1:${1000 + i}` }]))

function roles (a) {
  const out = {}
  for (const id of Object.keys(a.servers)) out[id] = 0
  for (const s of a.slices) for (const id of s.servers) out[id]++
  return out
}

describe('placeJoiners', () => {
  test('every joiner gets its share of roles from the servers holding most; the keyspace stays tiled (property)', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 60 }), fc.boolean(), (before, joins, replicate) => {
      const base = initial(servers(before), { replicate })
      const joiners = Object.keys(servers(joins, 'j'))
      const withJoiners = { ...base, servers: { ...base.servers, ...servers(joins, 'j') } }
      const out = placeJoiners(withJoiners, joiners)
      validateAssignment(out)
      const r = roles(out)
      for (const id of joiners) expect(r[id]).toBeGreaterThanOrEqual(1)
      // no slice lists a server twice, and nobody was left with nothing
      for (const id of Object.keys(out.servers)) expect(r[id]).toBeGreaterThanOrEqual(1)
      expect(withJoiners.slices).toEqual(base.slices) // the input is untouched
    }), { numRuns: 150 })
  })

  test('1,000 joiners into 4,000 servers: each joiner holds about the mean, and no key changes hands but the roles given', () => {
    const base = initial(servers(4000), {})
    const joiners = Object.keys(servers(1000, 'j'))
    const out = placeJoiners({ ...base, servers: { ...base.servers, ...servers(1000, 'j') } }, joiners)
    const r = roles(out)
    const mean = Object.values(r).reduce((x, y) => x + y, 0) / Object.keys(r).length
    for (const id of joiners) expect(r[id]).toBeGreaterThanOrEqual(Math.floor(mean * 0.75))
    let coverage = 0
    for (const s of out.slices) coverage += s.end - s.start
    expect(coverage).toBe(KEYSPACE_SIZE)
  })

  test('a joiner already placed (a strategy that places its own, as consistent hashing does) is left alone', () => {
    const base = initial(servers(3), { replicate: false })
    expect(placeJoiners(base, ['s0001'])).toBe(base)
  })
})
