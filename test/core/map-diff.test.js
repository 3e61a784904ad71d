'use strict'

const fc = require('fast-check')
const { diffMaps, applyDiff, isDiff } = require('../../core/map-diff')
const { validateAssignment } = require('../../core/assignment')
const { KEYSPACE_SIZE } = require('../../core/keyspace')

/** A random valid assignment: sorted cut points, 1-3 servers a slice, some moving. */
const assignmentArb = (generation) => fc.record({
  cuts: fc.uniqueArray(fc.integer({ min: 1, max: KEYSPACE_SIZE - 1 }), { maxLength: 12 }),
  ids: fc.uniqueArray(fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f'), { minLength: 1, maxLength: 6 }),
  picks: fc.array(fc.tuple(fc.nat(), fc.nat({ max: 2 }), fc.boolean(), fc.boolean()), { minLength: 13, maxLength: 13 }),
  port: fc.integer({ min: 1, max: 3 })
}).map(({ cuts, ids, picks, port }) => {
  const bounds = [0, ...cuts.sort((x, y) => x - y), KEYSPACE_SIZE]
  const servers = {}
  for (const id of ids) servers[id] = { url: `http://127.0.0.1:${id.charCodeAt(0) * 10 + (id === 'a' ? port : 0)}` }
  const slices = []
  for (let k = 0; k + 1 < bounds.length; k++) {
    const [n, extra, moving, withHolders] = picks[k]
    const list = []
    for (let r = 0; r <= extra && r < ids.length; r++) list.push(ids[(n + r) % ids.length])
    const s = { start: bounds[k], end: bounds[k + 1], servers: list }
    if (moving) {
      s.moving = true
      if (withHolders) s.holders = [list[0]]
    }
    slices.push(s)
  }
  return validateAssignment({ generation, servers, slices })
})

const strip = (a) => JSON.parse(JSON.stringify(a))

describe('map diffs', () => {
  test('applying diff(a, b) to a gives b exactly (property)', () => {
    fc.assert(fc.property(assignmentArb(7), assignmentArb(9), (a, b) => {
      const d = diffMaps(a, b)
      expect(isDiff(d)).toBe(true)
      expect(d.base).toBe(7)
      const out = applyDiff(a, strip(d)) // as it travels: JSON
      expect(strip(out)).toEqual(strip(b))
      validateAssignment(out)
    }), { numRuns: 500 })
  })

  test('from any base generation, the diff to the newest and the chain of diffs both give the full map (property)', () => {
    fc.assert(fc.property(fc.array(fc.nat(), { minLength: 2, maxLength: 6 }).chain((xs) => fc.tuple(...xs.map((_, i) => assignmentArb(10 + i)))), (maps) => {
      const newest = maps[maps.length - 1]
      for (let base = 0; base < maps.length - 1; base++) {
        expect(strip(applyDiff(maps[base], strip(diffMaps(maps[base], newest))))).toEqual(strip(newest))
        let held = maps[base]
        for (let g = base + 1; g < maps.length; g++) held = applyDiff(held, strip(diffMaps(maps[g - 1], maps[g])))
        expect(strip(held)).toEqual(strip(newest))
      }
    }), { numRuns: 200 })
  })

  test('a one-slice move is a diff of one slice and no server changes', () => {
    const servers = { a: { url: 'http://127.0.0.1:1' }, b: { url: 'http://127.0.0.1:2' } }
    const slices = []
    const n = 1000
    for (let k = 0; k < n; k++) slices.push({ start: Math.floor(k * KEYSPACE_SIZE / n), end: Math.floor((k + 1) * KEYSPACE_SIZE / n), servers: [k % 2 ? 'a' : 'b'] })
    const a = { generation: 1, servers, slices }
    const b = { generation: 2, servers, slices: slices.map((s, k) => (k === 500 ? { ...s, servers: ['a'] } : s)) }
    const d = diffMaps(a, b)
    expect(d.splices).toHaveLength(1)
    expect(d.splices[0].slices).toEqual([b.slices[500]])
    expect(d.servers).toEqual({ set: {}, remove: [] })
    expect(JSON.stringify(d).length).toBeLessThan(250)
    expect(JSON.stringify(a).length).toBeGreaterThan(40000)
  })

  test('a diff from another base is refused with CHOPPER_ERR_DIFF_BASE (409), naming the receiver generation', () => {
    const a = { generation: 3, servers: { a: { url: 'http://x:1' } }, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['a'] }] }
    const b = { ...a, generation: 4 }
    const d = diffMaps(a, b)
    const other = { ...a, generation: 2 }
    expect(() => applyDiff(other, d)).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_DIFF_BASE', status: 409, generation: 2 }))
    expect(() => applyDiff(null, d)).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_DIFF_BASE' }))
  })

  test('malformed diffs are refused as invalid, never half applied', () => {
    const a = { generation: 3, servers: { a: { url: 'http://x:1' } }, slices: [{ start: 0, end: 10, servers: ['a'] }, { start: 10, end: KEYSPACE_SIZE, servers: ['a'] }] }
    const bad = [
      { kind: 'diff', base: 3, generation: 4, servers: { set: {}, remove: [] }, splices: [{ start: 5, end: 10, slices: [] }] },
      { kind: 'diff', base: 3, generation: 4, servers: { set: {}, remove: [] }, splices: [{ start: 0, end: 7, slices: [] }] },
      { kind: 'diff', base: 3, generation: 4, servers: null, splices: [] },
      { kind: 'diff', base: 3, generation: 4, servers: { set: {}, remove: [] }, splices: 'x' },
      { kind: 'diff', base: 'x', generation: 4, servers: { set: {}, remove: [] }, splices: [] }
    ]
    for (const d of bad) expect(() => applyDiff(a, d)).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ASSIGNMENT' }))
    expect(a.slices).toHaveLength(2)
  })
})

describe('chains of diffs', () => {
  const one = (g, owner) => ({ generation: g, servers: { a: { url: 'http://x:1' }, b: { url: 'http://x:2' } }, slices: [{ start: 0, end: 100, servers: [owner] }, { start: 100, end: KEYSPACE_SIZE, servers: ['a'] }] })

  test('a chain of per-generation steps applies in turn to the full map', () => {
    const maps = [one(1, 'a'), one(2, 'b'), one(3, 'a'), one(4, 'b')]
    const steps = [1, 2, 3].map((i) => diffMaps(maps[i - 1], maps[i]))
    const chain = { kind: 'diff', base: 1, generation: 4, steps }
    expect(strip(applyDiff(maps[0], strip(chain)))).toEqual(strip(maps[3]))
  })

  test('a chain with a gap, a wrong end or a nested chain is refused', () => {
    const maps = [one(1, 'a'), one(2, 'b'), one(3, 'a')]
    const d12 = diffMaps(maps[0], maps[1])
    const d23 = diffMaps(maps[1], maps[2])
    for (const bad of [
      { kind: 'diff', base: 1, generation: 3, steps: [d23] },
      { kind: 'diff', base: 1, generation: 4, steps: [d12, d23] },
      { kind: 'diff', base: 1, generation: 3, steps: [] },
      { kind: 'diff', base: 1, generation: 3, steps: [{ ...d12, steps: [d12] }, d23] }
    ]) expect(() => applyDiff(maps[0], bad)).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ASSIGNMENT' }))
  })
})
