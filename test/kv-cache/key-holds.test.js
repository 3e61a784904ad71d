'use strict'

const { KeyHolds } = require('../../apps/kv-cache/key-holds')

describe('KeyHolds', () => {
  beforeEach(() => jest.useFakeTimers())
  afterEach(() => jest.useRealTimers())

  test('holds of several writes nest: the key is held until the last is lifted', () => {
    const h = new KeyHolds({ lapseMs: 1000 })
    h.add('k', 'w1')
    h.add('k', 'w2')
    expect(h.held('k')).toBe(true)
    expect(h.remove('k', 'w1')).toBe(true)
    expect(h.held('k')).toBe(true)
    expect(h.remove('k', 'w1')).toBe(false) // already lifted
    expect(h.remove('k', 'w2')).toBe(true)
    expect(h.held('k')).toBe(false)
    expect(h.size).toBe(0)
  })

  test('heldExcept: whether a write other than the one named holds the key', () => {
    const h = new KeyHolds({ lapseMs: 1000 })
    expect(h.heldExcept('k', 'w1')).toBe(false)
    h.add('k', 'w1')
    expect(h.heldExcept('k', 'w1')).toBe(false)
    expect(h.heldExcept('k', 'w2')).toBe(true)
    h.add('k', 'w2')
    expect(h.heldExcept('k', 'w1')).toBe(true)
    h.remove('k', 'w2')
    expect(h.heldExcept('k', 'w1')).toBe(false)
  })

  test('a hold nobody lifts lapses after lapseMs and is reported once; a lifted one never lapses', () => {
    const lapsed = []
    const h = new KeyHolds({ lapseMs: 1000, onLapse: (key, id) => lapsed.push([key, id]) })
    h.add('a', 'w1')
    h.add('b', 'w2')
    h.remove('b', 'w2')
    jest.advanceTimersByTime(999)
    expect(h.held('a')).toBe(true)
    jest.advanceTimersByTime(1)
    expect(h.held('a')).toBe(false)
    expect(lapsed).toEqual([['a', 'w1']])
    jest.advanceTimersByTime(5000)
    expect(lapsed).toEqual([['a', 'w1']])
  })

  test('a retried hold restarts its lapse', () => {
    const h = new KeyHolds({ lapseMs: 1000 })
    h.add('k', 'w1')
    jest.advanceTimersByTime(800)
    h.add('k', 'w1')
    jest.advanceTimersByTime(800)
    expect(h.held('k')).toBe(true)
    jest.advanceTimersByTime(200)
    expect(h.held('k')).toBe(false)
  })

  test('clear lifts every hold without reporting lapses', () => {
    const lapsed = []
    const h = new KeyHolds({ lapseMs: 1000, onLapse: () => lapsed.push(1) })
    h.add('a', 'w1')
    h.add('b', 'w2')
    h.clear()
    jest.advanceTimersByTime(2000)
    expect([h.size, lapsed.length]).toEqual([0, 0])
  })

  test('lapseMs is validated', () => {
    expect(() => new KeyHolds({ lapseMs: 0 })).toThrow(/invalid lapseMs/)
  })
})

describe('KeyHolds.waitLifted', () => {
  const { KeyHolds } = require('../../apps/kv-cache/key-holds')
  test('resolves true when the last hold is lifted, false at the timeout, at once when not held', async () => {
    const h = new KeyHolds({ lapseMs: 60000 })
    expect(await h.waitLifted('k', 10)).toBe(true)
    h.add('k', 'w1')
    h.add('k', 'w2')
    const lifted = h.waitLifted('k', 5000)
    h.remove('k', 'w1')
    h.remove('k', 'w2')
    expect(await lifted).toBe(true)
    h.add('k', 'w3')
    expect(await h.waitLifted('k', 5)).toBe(false)
    expect(h.waiters.size).toBe(0)
    h.clear()
  })
})
