'use strict'

const { OwnershipEpochs } = require('../../apps/kv-cache/ownership-epochs')
const { KEYSPACE_SIZE } = require('../../core/keyspace')

const HALF = KEYSPACE_SIZE / 2

describe('OwnershipEpochs', () => {
  test('before any hook call every entry is trusted (standalone use)', () => {
    const e = new OwnershipEpochs()
    expect(e.trusts(0, 0)).toBe(true)
    expect(e.trusts(0, KEYSPACE_SIZE - 1)).toBe(true)
  })

  test('an entry cached before a range was lost is not trusted after it is regained', () => {
    const e = new OwnershipEpochs()
    e.acquire([{ start: 0, end: HALF }])
    const before = e.now() // tag of a write while we owned the range
    expect(e.trusts(before, 10)).toBe(true)
    e.release([{ start: 0, end: HALF }])
    e.acquire([{ start: 0, end: HALF }])
    expect(e.trusts(before, 10)).toBe(false)
    expect(e.trusts(e.now(), 10)).toBe(true) // written after regaining
  })

  test('a released range trusts nothing, even entries written after the release', () => {
    const e = new OwnershipEpochs()
    e.acquire([{ start: 0, end: KEYSPACE_SIZE }])
    e.release([{ start: 100, end: 200 }])
    expect(e.trusts(e.now(), 150)).toBe(false)
    expect(e.trusts(e.now(), 99)).toBe(true)
    expect(e.trusts(e.now(), 200)).toBe(true)
  })

  test('regaining one range leaves entries of ranges held throughout trusted', () => {
    const e = new OwnershipEpochs()
    e.acquire([{ start: 0, end: KEYSPACE_SIZE }])
    const tag = e.now()
    e.release([{ start: 1000, end: 2000 }])
    e.acquire([{ start: 1000, end: 2000 }])
    expect(e.trusts(tag, 1500)).toBe(false)
    expect(e.trusts(tag, 999)).toBe(true)
    expect(e.trusts(tag, 2000)).toBe(true)
  })

  test('invalidateAll distrusts every older entry everywhere, not newer ones', () => {
    const e = new OwnershipEpochs()
    e.acquire([{ start: 0, end: HALF }])
    const tag = e.now()
    e.invalidateAll()
    expect(e.trusts(tag, 5)).toBe(false)
    expect(e.trusts(tag, HALF + 5)).toBe(false)
    expect(e.trusts(e.now(), 5)).toBe(true)
  })

  test('segments stay bounded by the layout, not by the number of moves', () => {
    const e = new OwnershipEpochs()
    const r = [{ start: 1000, end: 2000 }]
    for (let i = 0; i < 1000; i++) {
      e.acquire(r)
      e.release(r)
    }
    expect(e.size).toBeLessThanOrEqual(3)
  })
})
