'use strict'

const { periodsToRecover, percentile, summary } = require('../../sim/metrics')

describe('sim metrics', () => {
  test('recovery: first period under 1.25 that stays there for 2 periods', () => {
    //            0    1    2    3     4    5    6    7
    const s = [1.1, 1.1, 2.0, 1.2, 1.3, 1.2, 1.24, 1.1]
    expect(periodsToRecover(s, 2)).toBe(3) // period 3 dips once; 5 and 6 both hold
    expect(periodsToRecover(s, 0)).toBe(0) // never left
    expect(periodsToRecover(s, 5)).toBe(0)
    expect(periodsToRecover(s, 2, 6)).toBeNull() // window ends before the hold is complete
    expect(periodsToRecover([2, 2, 1.25, 1.25], 0)).toBeNull() // 1.25 itself is not under the target
    expect(periodsToRecover([2, 1.1, 1.1], 0, undefined, { hold: 1, target: 1.5 })).toBe(1)
  })

  test('percentiles and summary', () => {
    expect(percentile([5, 1, 3, 2, 4], 0.5)).toBe(3)
    expect(percentile([], 0.5)).toBeNull()
    expect(summary([1, 2, 3, 4])).toEqual({ min: 1, p50: 2, p99: 4, max: 4, mean: 2.5 })
  })
})
