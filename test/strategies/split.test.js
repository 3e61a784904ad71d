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
})
