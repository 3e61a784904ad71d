'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { splitPhase } = require('../../controller/strategies/split')
const { U, working, view } = require('./helpers')

const limits = { maxSlices: 65536, minSliceLength: 1 }
const raw = (...ranges) => ranges.map(([start, end, owner, load]) => ({ start, end, servers: [owner], load }))

describe('split phase (paper 5.2.4)', () => {
  test('splits a slice above the mean slice load at its midpoint; halves keep the owner and half the load', () => {
    const r = splitPhase(working([[8, 'a', 100], [8, 'b', 10]]), limits) // mean 55
    expect(view(r.slices)).toEqual([[4, 'a', 50], [4, 'a', 50], [8, 'b', 10]])
    expect(r.ops).toEqual([{ op: 'split', start: 0, mid: 4 * U, end: 8 * U, server: 'a', load: 100 }])
  })

  test('odd lengths: mid = start + floor(length / 2)', () => {
    const r = splitPhase(raw([0, 5, 'a', 100], [5, KEYSPACE_SIZE, 'b', 1]), limits)
    expect(r.slices.map((s) => [s.start, s.end])).toEqual([[0, 2], [2, 5], [5, KEYSPACE_SIZE]])
  })

  test('a slice of length 1 cannot be split', () => {
    const r = splitPhase(raw([0, 1, 'a', 100], [1, KEYSPACE_SIZE, 'b', 1]), limits)
    expect(r.slices).toHaveLength(2)
    expect(r.ops).toEqual([])
  })

  test('a load equal to the mean is not above it', () => {
    expect(splitPhase(working([[8, 'a', 10], [8, 'b', 10]]), limits).ops).toEqual([])
  })

  test('maxSlices caps the total; the hottest candidates are split first', () => {
    const spec = [[4, 'a', 30], [4, 'a', 40], [4, 'b', 50], [4, 'b', 0]] // mean 30: candidates 40 and 50
    expect(splitPhase(working(spec), { ...limits }).ops.map((o) => o.load)).toEqual([40, 50])
    expect(splitPhase(working(spec), { ...limits, maxSlices: 5 }).ops.map((o) => o.load)).toEqual([50])
    expect(splitPhase(working(spec), { ...limits, maxSlices: 4 }).ops).toEqual([])
  })

  test('minSliceLength: both halves must be at least that long', () => {
    const seven = raw([0, 7, 'a', 100], [7, KEYSPACE_SIZE, 'b', 1])
    expect(splitPhase(seven, { ...limits, minSliceLength: 4 }).ops).toEqual([])
    expect(splitPhase(seven, { ...limits, minSliceLength: 3 }).ops).toHaveLength(1)
  })

  test('keeps the whole server list (replicas) on both halves, as copies', () => {
    const input = [{ start: 0, end: 8 * U, servers: ['a', 'b'], load: 100 }, { start: 8 * U, end: KEYSPACE_SIZE, servers: ['b'], load: 1 }]
    const r = splitPhase(input, limits)
    expect(r.slices[0].servers).toEqual(['a', 'b'])
    expect(r.slices[1].servers).toEqual(['a', 'b'])
    expect(r.slices[0].servers).not.toBe(input[0].servers)
  })

  describe('noise (chopper splitNoise): only a load above the mean by more than its sampling noise splits', () => {
    test('a load just above the mean is within its noise: not split; with noise 0 it is', () => {
      const spec = [[8, 'a', 12], [8, 'b', 8]] // mean 10; 12 - 10 = 2 < sqrt(12) = 3.5
      expect(splitPhase(working(spec), { ...limits, noise: 1 }).ops).toEqual([])
      expect(splitPhase(working(spec), { ...limits, noise: 0 }).ops.map((o) => o.load)).toEqual([12])
    })

    test('a load far above the mean still splits', () => {
      const spec = [[8, 'a', 100], [8, 'b', 10]] // mean 55; 45 > sqrt(100) = 10
      expect(splitPhase(working(spec), { ...limits, noise: 1 }).ops.map((o) => o.load)).toEqual([100])
      expect(splitPhase(working(spec), { ...limits, noise: 5 }).ops).toEqual([]) // 45 < 5 x 10
    })

    test('unit: a load that stands for fewer requests is noisier', () => {
      // 100 load units at 25 per request are 4 requests: noise sqrt(100 x 25) = 50 > 45
      expect(splitPhase(working([[8, 'a', 100], [8, 'b', 10]]), { ...limits, noise: 1, unit: 25 }).ops).toEqual([])
    })
  })

  describe('hot-key cuts (chopper hotKeyShare): a slice whose hottest key carried enough of its load is cut around it', () => {
    const hot = (slices, i, key, load) => { slices[i].hot = { key, load }; return slices }
    const spans = (r) => r.slices.map((s) => [s.start, s.end, s.servers[0], s.load])

    test('three pieces: the key alone in the middle with the load it carried, the rest by width', () => {
      const input = hot(raw([0, 1000, 'a', 100], [1000, KEYSPACE_SIZE, 'b', 1]), 0, 400, 80)
      const r = splitPhase(input, { ...limits, hotShare: 0.5 })
      expect(spans(r)).toEqual([[0, 400, 'a', 20 * 400 / 999], [400, 401, 'a', 80], [401, 1000, 'a', 20 * 599 / 999], [1000, KEYSPACE_SIZE, 'b', 1]])
      expect(r.ops).toEqual([{ op: 'split', start: 0, mid: 400, end: 1000, hotKey: 400, server: 'a', load: 100 }])
    })

    test('a key at either end of its slice makes two pieces', () => {
      const first = splitPhase(hot(raw([0, 1000, 'a', 100], [1000, KEYSPACE_SIZE, 'b', 1]), 0, 0, 90), { ...limits, hotShare: 0.5 })
      expect(spans(first).slice(0, 2)).toEqual([[0, 1, 'a', 90], [1, 1000, 'a', 10]])
      const last = splitPhase(hot(raw([0, 1000, 'a', 100], [1000, KEYSPACE_SIZE, 'b', 1]), 0, 999, 90), { ...limits, hotShare: 0.5 })
      expect(spans(last).slice(0, 2)).toEqual([[0, 999, 'a', 10], [999, 1000, 'a', 90]])
    })

    test('a key below the share, no share, or a minSliceLength above 1: the midpoint, as before', () => {
      const input = () => hot(raw([0, 1000, 'a', 100], [1000, KEYSPACE_SIZE, 'b', 1]), 0, 400, 40)
      const mid = [[0, 500, 'a', 50], [500, 1000, 'a', 50], [1000, KEYSPACE_SIZE, 'b', 1]]
      expect(spans(splitPhase(input(), { ...limits, hotShare: 0.5 }))).toEqual(mid)
      expect(spans(splitPhase(input(), { ...limits, hotShare: 0.4 }))[1]).toEqual([400, 401, 'a', 40])
      expect(spans(splitPhase(input(), { ...limits, hotShare: 0 }))).toEqual(mid)
      expect(spans(splitPhase(input(), { ...limits, hotShare: 0.1, minSliceLength: 2 }))).toEqual(mid)
    })

    test('a one-key slice is never split again, however hot', () => {
      const r = splitPhase(hot(raw([0, 400, 'a', 1], [400, 401, 'a', 100], [401, KEYSPACE_SIZE, 'b', 1]), 1, 400, 100), { ...limits, hotShare: 0.5 })
      expect(r.ops).toEqual([])
    })

    test('replicas: every piece keeps the slice\'s servers', () => {
      const input = [{ start: 0, end: 1000, servers: ['a', 'b'], load: 100, hot: { key: 10, load: 90 } }, { start: 1000, end: KEYSPACE_SIZE, servers: ['b'], load: 1 }]
      const r = splitPhase(input, { ...limits, hotShare: 0.5 })
      expect(r.slices.slice(0, 3).map((s) => s.servers)).toEqual([['a', 'b'], ['a', 'b'], ['a', 'b']])
    })

    test('maxSlices: a cut needs room for its pieces; without it the slice may still halve', () => {
      const input = () => hot(raw([0, 1000, 'a', 100], [1000, KEYSPACE_SIZE, 'b', 1]), 0, 400, 80)
      expect(splitPhase(input(), { ...limits, hotShare: 0.5, maxSlices: 4 }).slices).toHaveLength(4)
      expect(spans(splitPhase(input(), { ...limits, hotShare: 0.5, maxSlices: 3 }))).toEqual([[0, 500, 'a', 50], [500, 1000, 'a', 50], [1000, KEYSPACE_SIZE, 'b', 1]])
      expect(splitPhase(input(), { ...limits, hotShare: 0.5, maxSlices: 2 }).ops).toEqual([])
    })

    test('a midpoint split keeps the hot key with the half that holds it (a later round can cut it)', () => {
      const { splitColumns } = require('../../controller/strategies/split')
      const { indexServers, toColumns } = require('../../controller/strategies/columns')
      const slices = raw([0, 1000, 'a', 100], [1000, KEYSPACE_SIZE, 'b', 1])
      const index = indexServers(['a', 'b'])
      const c = toColumns(slices, index, undefined, [{ key: 700, load: 30 }, null])
      const r = splitColumns(c, index.ids, { maxSlices: 100, minSliceLength: 1, frozen: new Uint8Array(2), hotShare: 0.5 })
      expect(Array.from(r.cols.hot)).toEqual([-1, 700, -1])
      expect(Array.from(r.cols.hotLoad)).toEqual([0, 30, 0])
    })
  })
})
