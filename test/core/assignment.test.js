'use strict'

const {
  validateAssignment, evenAssignment, keyChurn, spreadLoads, serverLoads, imbalance, ownedRanges, sameLayout, cloneAssignment, acceptsUpdate, checkPlausible, MAX_AHEAD_MS
} = require('../../core/assignment')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { normalize, subtract, contains, totalLength } = require('../../core/ranges')

const servers = { a: { url: 'http://127.0.0.1:1' }, b: { url: 'http://127.0.0.1:2' } }
const H = KEYSPACE_SIZE / 2

function valid () {
  return { generation: 3, slices: [{ start: 0, end: H, servers: ['a'] }, { start: H, end: KEYSPACE_SIZE, servers: ['b'] }], servers }
}

describe('validateAssignment', () => {
  test('accepts a well-formed assignment', () => {
    expect(validateAssignment(valid())).toBeTruthy()
  })

  const cases = {
    'not an object': [null, /expected an object/],
    'bad generation type': [{ ...valid(), generation: '3' }, /generation/],
    'negative generation': [{ ...valid(), generation: -1 }, /generation/],
    'servers not an object': [{ ...valid(), servers: [] }, /servers must be/],
    'server without url': [{ ...valid(), servers: { a: {}, b: servers.b } }, /servers\.a\.url/],
    'empty slices': [{ ...valid(), slices: [] }, /non-empty array/],
    'gap at the start': [{ ...valid(), slices: [{ start: 5, end: KEYSPACE_SIZE, servers: ['a'] }] }, /gap in the keyspace at 0/],
    'gap in the middle': [{ ...valid(), slices: [{ start: 0, end: 10, servers: ['a'] }, { start: 11, end: KEYSPACE_SIZE, servers: ['b'] }] }, /gap in the keyspace at 10/],
    'gap at the end': [{ ...valid(), slices: [{ start: 0, end: H, servers: ['a'] }] }, /at the end/],
    overlap: [{ ...valid(), slices: [{ start: 0, end: H + 1, servers: ['a'] }, { start: H, end: KEYSPACE_SIZE, servers: ['b'] }] }, /overlaps/],
    'empty slice': [{ ...valid(), slices: [{ start: 0, end: 0, servers: ['a'] }, { start: 0, end: KEYSPACE_SIZE, servers: ['b'] }] }, /end must be/],
    'end past 2^32': [{ ...valid(), slices: [{ start: 0, end: KEYSPACE_SIZE + 1, servers: ['a'] }] }, /end must be/],
    'fractional start': [{ ...valid(), slices: [{ start: 0.5, end: KEYSPACE_SIZE, servers: ['a'] }] }, /start must be/],
    'unknown server': [{ ...valid(), slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['ghost'] }] }, /unknown server "ghost"/],
    'no owner': [{ ...valid(), slices: [{ start: 0, end: KEYSPACE_SIZE, servers: [] }] }, /servers must be a non-empty array/]
  }
  for (const [name, [a, message]] of Object.entries(cases)) {
    test(`rejects ${name}`, () => {
      expect(() => validateAssignment(a)).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ASSIGNMENT', status: 400, message: expect.stringMatching(message) }))
    })
  }

  test('rejects a generation that does not increase', () => {
    expect(() => validateAssignment(valid(), { previousGeneration: 3 })).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_STALE_GENERATION', status: 409 }))
    expect(() => validateAssignment(valid(), { previousGeneration: 2 })).not.toThrow()
  })
})

describe('assignment helpers', () => {
  test('evenAssignment gives each server one contiguous half', () => {
    const a = evenAssignment(servers)
    expect(a.slices.map((s) => s.servers[0])).toEqual(['a', 'b'])
    expect(validateAssignment(a)).toBeTruthy()
  })

  test('keyChurn counts only key ranges whose owner changed', () => {
    const before = valid()
    const split = { ...valid(), slices: [{ start: 0, end: 100, servers: ['a'] }, { start: 100, end: H, servers: ['a'] }, { start: H, end: KEYSPACE_SIZE, servers: ['b'] }] }
    expect(keyChurn(before, split)).toBe(0)
    const moved = { ...valid(), slices: [{ start: 0, end: 100, servers: ['b'] }, { start: 100, end: H, servers: ['a'] }, { start: H, end: KEYSPACE_SIZE, servers: ['b'] }] }
    expect(keyChurn(before, moved)).toBe(100)
  })

  test('spreadLoads attributes reports of an older layout by overlap', () => {
    const a = valid()
    const loads = spreadLoads(a, [{ start: 0, end: KEYSPACE_SIZE, count: 10 }, { start: H, end: H + 10, count: 4 }])
    expect(Array.from(loads)).toEqual([5, 9])
  })

  test('serverLoads and imbalance follow the paper\'s max/mean', () => {
    const per = serverLoads(valid(), [30, 10])
    expect(per.a.load).toBe(30)
    expect(imbalance(per)).toBe(1.5)
    expect(imbalance({ a: 0, b: 0 })).toBe(1)
  })

  test('ownedRanges, sameLayout and cloneAssignment', () => {
    expect(ownedRanges(valid(), 'b')).toEqual([{ start: H, end: KEYSPACE_SIZE }])
    const c = cloneAssignment(valid())
    expect(sameLayout(c, valid())).toBe(true)
    c.slices[0].servers[0] = 'b'
    expect(sameLayout(c, valid())).toBe(false)
  })
})

describe('ranges', () => {
  test('normalize coalesces, subtract cuts, contains searches', () => {
    const a = normalize([{ start: 10, end: 20 }, { start: 0, end: 5 }, { start: 5, end: 8 }])
    expect(a).toEqual([{ start: 0, end: 8 }, { start: 10, end: 20 }])
    expect(subtract(a, [{ start: 2, end: 12 }])).toEqual([{ start: 0, end: 2 }, { start: 12, end: 20 }])
    expect(subtract([{ start: 0, end: 10 }], [{ start: 0, end: 10 }])).toEqual([])
    expect(contains(a, 7)).toBe(true)
    expect(contains(a, 8)).toBe(false)
    expect(totalLength(a)).toBe(18)
  })
})

describe('acceptsUpdate: epochs and implausible values (docs/controller-ha.md)', () => {
  const now = 1.8e12
  const base = (generation, epoch) => ({ ...evenAssignment({ a: { url: 'http://127.0.0.1:1' }, b: { url: 'http://127.0.0.1:2' } }, generation), ...(epoch === undefined ? {} : { epoch }) })

  test('a lower epoch is refused whatever its generation; a higher one is taken', () => {
    const current = base(now - 10, now - 5000)
    expect(() => acceptsUpdate(current, base(now - 5, now - 6000), { now })).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_STALE_EPOCH', status: 409 }))
    expect(() => acceptsUpdate(current, base(now - 5), { now })).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_STALE_EPOCH' }))
    expect(acceptsUpdate(current, base(now - 5, now - 100), { now })).toBe(true)
    expect(acceptsUpdate(current, base(now - 5, now - 5000), { now })).toBe(true)
    // The same generation again under the same epoch is a repeat, not an update.
    expect(acceptsUpdate(current, base(now - 10, now - 5000), { now })).toBe(false)
  })

  test('a generation or epoch far beyond the clock is refused: one forged push cannot wedge a member', () => {
    const current = base(now - 10)
    for (const bad of [base(Number.MAX_SAFE_INTEGER), base(now + MAX_AHEAD_MS + 1), base(now, Number.MAX_SAFE_INTEGER)]) {
      expect(() => acceptsUpdate(current, bad, { now })).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_IMPLAUSIBLE', status: 400 }))
    }
    // Up to the allowance ahead of the clock is fine (clock skew between machines).
    expect(acceptsUpdate(current, base(now + MAX_AHEAD_MS), { now })).toBe(true)
    // Small generations (tests, a controller with generationBase 0) stay plausible.
    expect(acceptsUpdate(base(3), base(4), { now })).toBe(true)
    expect(() => checkPlausible(now + MAX_AHEAD_MS + 1, 0, 'generation', now)).toThrow(/implausible generation/)
  })
})
