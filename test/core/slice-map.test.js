'use strict'

const { SliceMap } = require('../../core/slice-map')
const { KEYSPACE_SIZE, sliceKey, evenRanges } = require('../../core/keyspace')

const servers = { a: { url: 'http://127.0.0.1:1' }, b: { url: 'http://127.0.0.1:2' }, c: { url: 'http://127.0.0.1:3' } }

function assignmentOf (starts, owners) {
  const slices = starts.map((start, i) => ({ start, end: i + 1 < starts.length ? starts[i + 1] : KEYSPACE_SIZE, servers: [owners[i % owners.length]] }))
  return { generation: 1, slices, servers }
}

describe('sliceKey', () => {
  test('is farmhash fingerprint32 of the application key', () => {
    expect(sliceKey('abc')).toBe(795041479)
  })
  test('rejects a missing key with a typed error', () => {
    expect(() => sliceKey('')).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_MISSING_KEY', status: 400 }))
    expect(() => sliceKey(undefined)).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_MISSING_KEY' }))
  })
})

describe('evenRanges', () => {
  test('tiles the keyspace in n contiguous near-equal ranges', () => {
    const r = evenRanges(3)
    expect(r[0].start).toBe(0)
    expect(r[2].end).toBe(KEYSPACE_SIZE)
    for (let i = 1; i < 3; i++) expect(r[i].start).toBe(r[i - 1].end)
    const lens = r.map((x) => x.end - x.start)
    expect(Math.max(...lens) - Math.min(...lens)).toBeLessThanOrEqual(1)
  })
})

describe('SliceMap', () => {
  const starts = [0, 10, 1000, 2 ** 31, KEYSPACE_SIZE - 1]
  const map = new SliceMap(assignmentOf(starts, ['a', 'b', 'c']))

  test('finds the slice at 0 and at 2^32 - 1', () => {
    expect(map.indexOf(0)).toBe(0)
    expect(map.indexOf(KEYSPACE_SIZE - 1)).toBe(4)
  })

  test('each slice edge belongs to the slice it starts, the key before it to the previous one', () => {
    for (let i = 1; i < starts.length; i++) {
      expect(map.indexOf(starts[i])).toBe(i)
      expect(map.indexOf(starts[i] - 1)).toBe(i - 1)
    }
  })

  test('ownerOf and urlOf follow the assignment', () => {
    expect(map.ownerOf(5)).toBe('a')
    expect(map.ownerOf(10)).toBe('b')
    expect(map.ownerOf(2 ** 31)).toBe('a')
    expect(map.urlOf('c')).toBe('http://127.0.0.1:3')
  })

  test('agrees with a linear scan on a large random map', () => {
    let seed = 42
    const rand = () => { seed = (seed * 1664525 + 1013904223) >>> 0; return seed }
    const set = new Set([0])
    while (set.size < 5000) set.add(rand())
    const big = [...set].sort((x, y) => x - y)
    const m = new SliceMap(assignmentOf(big, ['a', 'b', 'c']))
    for (let t = 0; t < 2000; t++) {
      const key = rand()
      let expected = 0
      for (let i = 0; i < big.length; i++) if (big[i] <= key) expected = i
      expect(m.indexOf(key)).toBe(expected)
    }
  })

  test('a single slice covers everything', () => {
    const one = new SliceMap({ generation: 1, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['a'] }], servers })
    expect(one.ownerOf(0)).toBe('a')
    expect(one.ownerOf(KEYSPACE_SIZE - 1)).toBe('a')
  })
})
