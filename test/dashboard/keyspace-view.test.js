'use strict'

const { keyspaceColumn, movedBuckets, replicaCounts } = require('../../controller/dashboard/keyspace-view')
const { evenAssignment } = require('../../core/assignment')
const { KEYSPACE_SIZE } = require('../../core/keyspace')

const servers = { 'app-1': { url: 'http://a:1' }, 'app-2': { url: 'http://b:1' }, 'app-3': { url: 'http://c:1' } }
const B = KEYSPACE_SIZE / 256 // one bucket of the default grid

function deepFreeze (o) {
  if (o && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o)
    for (const v of Object.values(o)) deepFreeze(v)
  }
  return o
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0)

describe('keyspaceColumn', () => {
  test('spreads each slice\'s load over its buckets and keeps the total', () => {
    const a = deepFreeze(evenAssignment(servers))
    const col = keyspaceColumn(a, deepFreeze([300, 0, 30]))
    expect(col.load).toHaveLength(256)
    expect(col.servers).toEqual(['app-1', 'app-2', 'app-3'])
    // Each bucket is rounded to 3 decimals: at most 0.0005 off, 256 times.
    expect(Math.abs(sum(col.load) - 330)).toBeLessThanOrEqual(256 * 0.0005)
    // app-1 owns [0, 1/3): about 85.3 buckets, so about 3.52 per whole bucket.
    expect(col.load[0]).toBeCloseTo((300 * B) / a.slices[0].end, 2)
    expect(col.load[120]).toBe(0) // app-2 had no load
    expect(col.load[255]).toBeGreaterThan(0)
    expect(col.owner[0]).toBe(0)
    expect(col.owner[128]).toBe(1)
    expect(col.owner[255]).toBe(2)
    expect(col.moved).toEqual([])
  })

  test('a narrow hot slice lands in the one bucket that holds it', () => {
    const a = deepFreeze({
      generation: 1,
      servers,
      slices: [
        { start: 0, end: 10 * B + 5, servers: ['app-1'] },
        { start: 10 * B + 5, end: 10 * B + 6, servers: ['app-2'] }, // one key
        { start: 10 * B + 6, end: KEYSPACE_SIZE, servers: ['app-1'] }
      ]
    })
    const col = keyspaceColumn(a, [0, 1000, 0])
    expect(col.load[10]).toBe(1000)
    expect(sum(col.load)).toBe(1000)
    // The bucket's owner is whoever covers most of it, not the hot one-key slice.
    expect(col.servers[col.owner[10]]).toBe('app-1')
  })

  test('the owner of a bucket shared by several slices covers most of it, summed per server', () => {
    const q = B / 4
    const a = deepFreeze({
      generation: 1,
      servers,
      slices: [
        { start: 0, end: q, servers: ['app-2'] },
        { start: q, end: 2 * q, servers: ['app-3'] },
        { start: 2 * q, end: 3 * q, servers: ['app-2'] }, // app-2: half the bucket in two pieces
        { start: 3 * q, end: KEYSPACE_SIZE, servers: ['app-3'] } // app-3: a quarter of bucket 0, then the rest
      ]
    })
    const col = keyspaceColumn(a, [1, 1, 1, 0])
    expect(col.servers[col.owner[0]]).toBe('app-2')
    expect(col.load[0]).toBe(3)
    expect(col.servers[col.owner[1]]).toBe('app-3')
    // Ties go to the lower index, whatever the slice order.
    const tie = { generation: 1, servers, slices: [{ start: 0, end: B / 2, servers: ['app-3'] }, { start: B / 2, end: KEYSPACE_SIZE, servers: ['app-1'] }] }
    expect(keyspaceColumn(tie, [0, 0]).owner[0]).toBe(0)
  })

  test('moved lists the buckets whose owner changed since the previous column, by server id', () => {
    const before = evenAssignment({ 'app-1': servers['app-1'], 'app-2': servers['app-2'] })
    const prev = keyspaceColumn(before, [0, 0])
    // app-3 joins and takes the second half's upper quarter; app-2 keeps index 1 in both columns.
    const after = {
      generation: 2,
      servers,
      slices: [before.slices[0], { start: 2 ** 31, end: 3 * 2 ** 30, servers: ['app-2'] }, { start: 3 * 2 ** 30, end: KEYSPACE_SIZE, servers: ['app-3'] }]
    }
    const col = keyspaceColumn(after, [0, 0, 0], { previous: prev })
    expect(col.moved).toEqual(Array.from({ length: 64 }, (_, i) => 192 + i))
    // Renumbering alone is not a move: app-1 leaves, app-2 becomes index 0.
    const renumbered = { generation: 3, servers, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['app-2'] }] }
    const c2 = keyspaceColumn(renumbered, [0], { previous: keyspaceColumn({ generation: 1, servers, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['app-2'] }] }, [0]) })
    expect(c2.moved).toEqual([])
    expect(movedBuckets(null, col)).toEqual([])
  })

  test('other grid sizes, and bad input', () => {
    const a = evenAssignment(servers)
    const col = keyspaceColumn(a, [3, 3, 3], { buckets: 3 })
    expect(col.owner).toEqual([0, 1, 2])
    expect(col.load.map((v) => Math.round(v))).toEqual([3, 3, 3])
    expect(() => keyspaceColumn(a, [1, 2])).toThrow(/one entry per slice/)
    expect(() => keyspaceColumn(a, [1, 2, 3], { buckets: 0 })).toThrow(/buckets/)
  })
})

describe('replicaCounts', () => {
  test('counts the slices that name a server beyond the primary', () => {
    const a = deepFreeze({
      generation: 1,
      servers,
      slices: [
        { start: 0, end: 100, servers: ['app-1', 'app-2'] },
        { start: 100, end: 200, servers: ['app-2', 'app-1', 'app-3'] },
        { start: 200, end: KEYSPACE_SIZE, servers: ['app-3'] }
      ]
    })
    expect(replicaCounts(a)).toEqual({ 'app-1': 1, 'app-2': 1, 'app-3': 1 })
    expect(replicaCounts(evenAssignment(servers))).toEqual({ 'app-1': 0, 'app-2': 0, 'app-3': 0 })
  })
})
