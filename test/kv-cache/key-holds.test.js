'use strict'

const { KeyHolds } = require('../../apps/kv-cache/key-holds')

/** Let promise callbacks run (a lapse awaits its onLapse). */
const flush = async () => { for (let i = 0; i < 5; i++) await Promise.resolve() }

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

  test('newest: the meta of the last hold added on a key, until it is lifted', () => {
    const h = new KeyHolds({ lapseMs: 1000 })
    expect(h.newest('k')).toBeUndefined()
    h.add('k', 'w1', { from: 'A' })
    h.add('k', 'w2', { from: 'B' })
    h.add('k', 'w1', { from: 'A' }) // a retried hold keeps its place
    expect(h.newest('k')).toEqual({ from: 'B' })
    h.remove('k', 'w2')
    expect(h.newest('k')).toEqual({ from: 'A' })
    h.remove('k', 'w1')
    expect(h.newest('k')).toBeUndefined()
  })

  test('a hold nobody lifts lapses after lapseMs and is reported once, with its meta; a lifted one never lapses', async () => {
    const lapsed = []
    const h = new KeyHolds({ lapseMs: 1000, onLapse: (key, id, meta) => lapsed.push([key, id, meta]) })
    h.add('a', 'w1', 'slice-a')
    h.add('b', 'w2')
    h.remove('b', 'w2')
    jest.advanceTimersByTime(999)
    await flush()
    expect(h.held('a')).toBe(true)
    jest.advanceTimersByTime(1)
    await flush()
    expect(h.held('a')).toBe(false)
    expect(lapsed).toEqual([['a', 'w1', 'slice-a']])
    jest.advanceTimersByTime(5000)
    await flush()
    expect(lapsed).toEqual([['a', 'w1', 'slice-a']])
  })

  test('a lapse lifts the hold only once onLapse settled (failed or not); a release or a retried hold meanwhile wins', async () => {
    const pending = []
    const h = new KeyHolds({ lapseMs: 1000, onLapse: () => new Promise((resolve, reject) => pending.push({ resolve, reject })) })
    h.add('k', 'w1')
    jest.advanceTimersByTime(1000)
    await flush()
    expect(pending.length).toBe(1)
    expect(h.held('k')).toBe(true) // what was cached under the hold is being dropped
    pending[0].reject(new Error('cache down'))
    await flush()
    expect(h.held('k')).toBe(false)
    // released while lapsing: lifted once, by the release
    h.add('k', 'w2')
    jest.advanceTimersByTime(1000)
    await flush()
    expect(h.remove('k', 'w2')).toBe(true)
    expect(h.held('k')).toBe(false)
    pending[1].resolve()
    await flush()
    expect(h.held('k')).toBe(false)
    // retried while lapsing: the retry's own lapse counts
    h.add('k', 'w3')
    jest.advanceTimersByTime(1000)
    await flush()
    h.add('k', 'w3')
    pending[2].resolve()
    await flush()
    expect(h.held('k')).toBe(true)
    jest.advanceTimersByTime(1000)
    await flush()
    pending[3].resolve()
    await flush()
    expect(h.held('k')).toBe(false)
  })

  test('a retried hold restarts its lapse', async () => {
    const h = new KeyHolds({ lapseMs: 1000 })
    h.add('k', 'w1')
    jest.advanceTimersByTime(800)
    h.add('k', 'w1')
    jest.advanceTimersByTime(800)
    await flush()
    expect(h.held('k')).toBe(true)
    jest.advanceTimersByTime(200)
    await flush()
    expect(h.held('k')).toBe(false)
  })

  test('age: how long the youngest hold on a key has stood (a retried hold from its retry), -1 when not held', () => {
    const h = new KeyHolds({ lapseMs: 10000 })
    expect(h.age('k')).toBe(-1)
    h.add('k', 'w1')
    jest.advanceTimersByTime(300)
    expect(h.age('k')).toBe(300)
    h.add('k', 'w2')
    jest.advanceTimersByTime(100)
    expect(h.age('k')).toBe(100) // w2's: the youngest
    h.remove('k', 'w2')
    expect(h.age('k')).toBe(400) // w1's again
    h.add('k', 'w1') // retried
    expect(h.age('k')).toBe(0)
    h.remove('k', 'w1')
    expect(h.age('k')).toBe(-1)
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

  test('waits only for the holds standing when it began: a newer hold does not extend it; a retried hold is still the same one', async () => {
    const h = new KeyHolds({ lapseMs: 60000 })
    h.add('k', 'w1')
    let done = null
    h.waitLifted('k', 5000).then((v) => { done = v })
    h.add('k', 'w2') // a later write's hold, before w1's release
    h.add('k', 'w1') // w1 retried: still the hold waited for
    h.remove('k', 'w1')
    await Promise.resolve()
    expect(done).toBe(true) // w1 is lifted; w2 still holds the key
    expect(h.held('k')).toBe(true)
    expect(h.waiters.size).toBe(0)
    // one that began under w2 waits for it
    const second = h.waitLifted('k', 5000)
    h.add('k', 'w3')
    h.remove('k', 'w2')
    expect(await second).toBe(true)
    expect(h.held('k')).toBe(true)
    h.clear()
  })

  test('a hold that lapses counts as lifted for its waiters', async () => {
    jest.useFakeTimers()
    try {
      const h = new KeyHolds({ lapseMs: 1000 })
      h.add('k', 'w1')
      let done = null
      h.waitLifted('k', 5000).then((v) => { done = v })
      jest.advanceTimersByTime(1000)
      for (let i = 0; i < 5; i++) await Promise.resolve()
      expect(done).toBe(true)
      expect(h.held('k')).toBe(false)
    } finally {
      jest.useRealTimers()
    }
  })
})
