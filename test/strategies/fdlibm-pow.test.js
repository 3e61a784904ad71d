'use strict'

const { createHash } = require('node:crypto')
const { createRng } = require('../../loadgen/prng')
const { pow } = require('../helpers/fdlibm-pow')

// The golden fixtures were recorded with Node 20's Math.pow. These 100,000
// seeded powers hash to what that Math.pow returned for them, on any line.
const NODE_20_HASH = '7c5cfed7fe92c27de312c2e927c5fff1c8d2e034520a6bc5a0cb722259efc98a'

function powersHash (f) {
  const rng = createRng(41)
  const h = createHash('sha256')
  for (let i = 0; i < 100000; i++) {
    const x = rng.next() * (i % 2 ? 1 : 1e6)
    const y = i % 3 === 0 ? 3 : (rng.next() - 0.5) * 20
    h.update(String(f(x, y)))
  }
  return h.digest('hex')
}

test('returns, bit for bit, what Node 20 Math.pow returned', () => {
  expect(powersHash(pow)).toBe(NODE_20_HASH)
})

test('special cases and the domain it refuses', () => {
  expect(pow(0, 3)).toBe(0)
  expect(pow(5, 0)).toBe(1)
  expect(pow(2, 10)).toBe(1024)
  expect(pow(9, 0.5)).toBe(3)
  expect(() => pow(-2, 3)).toThrow(RangeError)
  expect(() => pow(2, Infinity)).toThrow(RangeError)
})
