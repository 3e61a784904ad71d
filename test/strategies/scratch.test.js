'use strict'

const { take, withScratch, own, lendFrom } = require('../../controller/strategies/scratch')

describe('scratch: typed arrays lent to a round', () => {
  let was
  beforeAll(() => { was = lendFrom(8) })
  afterAll(() => { lendFrom(was) })

  test('outside withScratch every take is a new array, filled as asked', () => {
    const a = take(Int32Array, 16)
    const b = take(Int32Array, 16, -1)
    expect(a).not.toBe(b)
    expect(a.buffer).not.toBe(b.buffer)
    expect([...a]).toEqual(new Array(16).fill(0))
    expect([...b]).toEqual(new Array(16).fill(-1))
  })

  test('a round reuses what the last one gave back, filled afresh', () => {
    let first
    withScratch(() => {
      first = take(Float64Array, 100)
      first.fill(7)
    })
    withScratch(() => {
      const again = take(Float64Array, 60, -1) // fits in the 100 (not over twice its length)
      expect(again.buffer).toBe(first.buffer)
      expect(again.length).toBe(60)
      expect([...again]).toEqual(new Array(60).fill(-1))
      const zeros = take(Float64Array, 100) // the only free one is lent: a new one
      expect(zeros.buffer).not.toBe(first.buffer)
      expect([...zeros]).toEqual(new Array(100).fill(0))
    })
  })

  test('an array over twice the length asked is not lent for it', () => {
    let big
    withScratch(() => { big = take(Uint8Array, 100) })
    withScratch(() => { expect(take(Uint8Array, 40).buffer).not.toBe(big.buffer) })
  })

  test('arrays of another type, or short ones, are never shared', () => {
    let a
    withScratch(() => { a = take(Int32Array, 32) })
    withScratch(() => {
      expect(take(Uint32Array, 32).buffer).not.toBe(a.buffer)
      const short = take(Int32Array, 4) // below lendFrom(8): allocated as usual
      expect(short.buffer).not.toBe(a.buffer)
    })
  })

  test('what a throwing round took is given back', () => {
    let lost
    expect(() => withScratch(() => { lost = take(Int32Array, 50); throw new Error('boom') })).toThrow('boom')
    withScratch(() => { expect(take(Int32Array, 50).buffer).toBe(lost.buffer) })
  })

  test('a call inside another shares its loan until the outer returns', () => {
    let inner
    withScratch(() => {
      withScratch(() => { inner = take(Int32Array, 20) })
      expect(take(Int32Array, 20).buffer).not.toBe(inner.buffer) // still lent
    })
  })

  test('own copies out of the pool', () => {
    let kept
    withScratch(() => {
      const a = take(Float64Array, 10)
      a.fill(3)
      kept = own(a)
    })
    withScratch(() => { take(Float64Array, 10).fill(9) })
    expect(kept).toBeInstanceOf(Float64Array)
    expect([...kept]).toEqual(new Array(10).fill(3))
  })
})
