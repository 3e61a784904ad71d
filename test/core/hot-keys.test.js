'use strict'

const fc = require('fast-check')
const { vote, mergeVotes, validHot, hotKeysOf } = require('../../core/hot-keys')

/** Run the per-slice vote over `keys` (one slice) and return its summary. */
function summarize (keys) {
  const k = new Float64Array(1).fill(-1)
  const v = new Float64Array(1)
  for (const key of keys) vote(k, v, 0, key)
  return v[0] > 0 ? { key: k[0], votes: v[0] } : null
}

const countOf = (keys, key) => keys.filter((x) => x === key).length

describe('hot keys: the per-slice majority vote', () => {
  test('a key with more than half of the requests is the candidate, whatever the order', () => {
    expect(summarize([7, 7, 3, 7, 9, 7])).toEqual({ key: 7, votes: 2 })
    expect(summarize([3, 9, 7, 7, 7])).toEqual({ key: 7, votes: 3 })
    expect(summarize([3, 9])).toBeNull() // no majority: they cancel
    expect(summarize([])).toBeNull()
  })

  test('property: a majority key is the candidate, and votes never exceed the candidate\'s true count', () => {
    fc.assert(fc.property(fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 200 }), (keys) => {
      const s = summarize(keys)
      if (s) expect(s.votes).toBeLessThanOrEqual(countOf(keys, s.key))
      for (let key = 0; key <= 4; key++) {
        if (countOf(keys, key) * 2 > keys.length) expect(s && s.key).toBe(key)
      }
    }), { numRuns: 500 })
  })

  test('property: merged summaries of a stream\'s parts keep both guarantees', () => {
    const parts = fc.array(fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 60 }), { minLength: 1, maxLength: 5 })
    fc.assert(fc.property(parts, (ps) => {
      const merged = ps.map(summarize).reduce((a, b) => mergeVotes(a, b), null)
      const all = ps.flat()
      if (merged) expect(merged.votes).toBeLessThanOrEqual(countOf(all, merged.key))
      for (let key = 0; key <= 3; key++) {
        if (countOf(all, key) * 2 > all.length) expect(merged && merged.key).toBe(key)
      }
    }), { numRuns: 500 })
  })

  test('mergeVotes: same key adds, different keys cancel, none is none', () => {
    expect(mergeVotes({ key: 1, votes: 3 }, { key: 1, votes: 2 })).toEqual({ key: 1, votes: 5 })
    expect(mergeVotes({ key: 1, votes: 3 }, { key: 2, votes: 5 })).toEqual({ key: 2, votes: 2 })
    expect(mergeVotes({ key: 1, votes: 3 }, { key: 2, votes: 3 })).toBeNull()
    expect(mergeVotes(null, { key: 2, votes: 1 })).toEqual({ key: 2, votes: 1 })
    expect(mergeVotes({ key: 2, votes: 1 }, undefined)).toEqual({ key: 2, votes: 1 })
    expect(mergeVotes(null, null)).toBeNull()
  })

  test('validHot: a key inside the entry\'s range, with positive votes', () => {
    expect(validHot({ start: 10, end: 20, hot: { key: 10, votes: 1 } })).toBe(true)
    expect(validHot({ start: 10, end: 20, hot: { key: 20, votes: 1 } })).toBe(false)
    expect(validHot({ start: 10, end: 20, hot: { key: 12.5, votes: 1 } })).toBe(false)
    expect(validHot({ start: 10, end: 20, hot: { key: 12, votes: 0 } })).toBe(false)
    expect(validHot({ start: 10, end: 20, hot: { key: 12, votes: Infinity } })).toBe(false)
    expect(validHot({ start: 10, end: 20 })).toBe(false)
  })
})

describe('hotKeysOf: report entries onto the slices of an assignment', () => {
  const a = { generation: 1, slices: [{ start: 0, end: 100, servers: ['a'] }, { start: 100, end: 150, servers: ['a'] }, { start: 150, end: 400, servers: ['a'] }], servers: { a: { url: 'http://127.0.0.1:1' } } }

  test('each slice gets the merged vote of the entries whose key it holds, as a share of its load', () => {
    const entries = [
      // an older, wider range (two slices now): its key lands in the one that holds it
      { start: 0, end: 150, count: 40, hot: { key: 120, votes: 20 } },
      // two servers of a replicated slice: votes for one key add
      { start: 150, end: 400, count: 30, hot: { key: 160, votes: 10 } },
      { start: 150, end: 400, count: 30, hot: { key: 160, votes: 14 } },
      { start: 0, end: 100, count: 5, hot: { key: 500, votes: 5 } } // outside its range: ignored
    ]
    const loads = [30, 40, 120]
    const counts = [20, 20, 60]
    expect(hotKeysOf(a, entries, loads, counts)).toEqual([null, { key: 120, load: 40 }, { key: 160, load: 120 * 24 / 60 }])
  })

  test('different keys cancel; a slice without requests has no hot key', () => {
    const entries = [
      { start: 0, end: 100, count: 10, hot: { key: 5, votes: 4 } },
      { start: 0, end: 100, count: 10, hot: { key: 6, votes: 4 } },
      { start: 100, end: 150, count: 10, hot: { key: 101, votes: 4 } }
    ]
    expect(hotKeysOf(a, entries, [20, 0, 0], [20, 0, 0])).toEqual([null, null, null])
  })
})
