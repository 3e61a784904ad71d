'use strict'

const fc = require('fast-check')
const { lastAtOrBelow } = require('../../core/sorted-search')

describe('lastAtOrBelow', () => {
  test('finds the last element at or below the key, on plain and typed arrays', () => {
    for (const starts of [[0, 10, 20, 30], Uint32Array.from([0, 10, 20, 30])]) {
      expect(lastAtOrBelow(starts, 0)).toBe(0)
      expect(lastAtOrBelow(starts, 9)).toBe(0)
      expect(lastAtOrBelow(starts, 10)).toBe(1)
      expect(lastAtOrBelow(starts, 29)).toBe(2)
      expect(lastAtOrBelow(starts, 2 ** 32 - 1)).toBe(3)
    }
  })

  test('0 when every element is above the key; only the first n count', () => {
    expect(lastAtOrBelow([5, 6], 1)).toBe(0)
    expect(lastAtOrBelow([0, 10, 20, 30], 25, 2)).toBe(1)
  })

  test('agrees with a linear scan', () => {
    fc.assert(fc.property(fc.uniqueArray(fc.nat(1000), { minLength: 1 }), fc.nat(1100), (values, key) => {
      const sorted = values.sort((a, b) => a - b)
      let expected = 0
      for (let i = 0; i < sorted.length; i++) if (sorted[i] <= key) expected = i
      expect(lastAtOrBelow(sorted, key)).toBe(expected)
    }))
  })
})
