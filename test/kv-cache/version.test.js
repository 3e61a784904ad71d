'use strict'

const { HybridClock, checkGeneration, makeVersion, generationOf, clockOf, GENERATION_SCALE } = require('../../apps/kv-cache/version')

describe('HybridClock', () => {
  test('follows the wall clock in microseconds and never repeats or goes back', () => {
    let ms = 1000
    const clock = new HybridClock({ now: () => ms })
    expect(clock.tick()).toBe(1000000n)
    expect(clock.tick()).toBe(1000001n) // same millisecond: last + 1
    ms = 900 // the wall clock stepped back
    expect(clock.tick()).toBe(1000002n)
    ms = 2000
    expect(clock.tick()).toBe(2000000n)
  })

  test('observing a version from the store puts the next tick above its clock part', () => {
    const clock = new HybridClock({ now: () => 1000 })
    clock.observe(makeVersion(7, 5000000n))
    expect(clock.tick()).toBe(5000001n)
    clock.observe(makeVersion(9, 10n)) // lower clock part (any generation): no effect
    expect(clock.tick()).toBe(5000002n)
  })
})

describe('versions', () => {
  test('any version of a higher generation is above every version of a lower one', () => {
    const now = BigInt(Date.now()) * 1000n
    expect(makeVersion(5, now)).toBeGreaterThan(makeVersion(3, GENERATION_SCALE - 1n))
    expect(makeVersion(1, 0n)).toBeGreaterThan(makeVersion(0, now))
    // Microseconds stay below the scale for centuries, so the parts never mix.
    expect(now).toBeLessThan(GENERATION_SCALE)
  })

  test('the generation and the clock part come back out', () => {
    const v = makeVersion(Number.MAX_SAFE_INTEGER, 1234567n)
    expect(v.toString()).toHaveLength(32) // within DynamoDB's 38 digits
    expect(generationOf(v)).toBe(Number.MAX_SAFE_INTEGER)
    expect(clockOf(v)).toBe(1234567n)
  })

  test('a generation must be a non-negative safe integer, and the error says so', () => {
    expect(checkGeneration(0)).toBe(0)
    for (const bad of [-1, 1.5, '3', NaN, null, undefined, 2 ** 53]) {
      expect(() => checkGeneration(bad)).toThrow(expect.objectContaining({
        code: 'CHOPPER_ERR_INVALID_ARG',
        message: expect.stringMatching(/^invalid generation: expected a non-negative integer, got /)
      }))
    }
  })
})
