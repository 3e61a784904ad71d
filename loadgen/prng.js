'use strict'

/**
 * Seeded pseudo-random numbers for workload generation. Math.random is never
 * used: the same spec and seed must give the same request sequence on every
 * machine and Node version, so the generator is fixed here (xoshiro128**,
 * seeded through splitmix32, both 32-bit integer algorithms that are exact
 * in JavaScript with Math.imul and >>> 0).
 */

const TWO_POW_32 = 2 ** 32

/** FNV-1a over a string's UTF-16 code units: turns labels and string seeds into 32 bits. */
function hashString (s) {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}

/** One splitmix32 step: a well-mixed 32-bit output for a 32-bit input. */
function splitmix32 (x) {
  let z = (x + 0x9e3779b9) >>> 0
  z = Math.imul(z ^ (z >>> 16), 0x21f0aaad)
  z = Math.imul(z ^ (z >>> 15), 0x735a2d97)
  return (z ^ (z >>> 15)) >>> 0
}

/**
 * Derive an independent 32-bit seed from a base seed and labels, so that each
 * phase (and each purpose within it) gets its own stream: editing phase 2
 * leaves phase 1's sequence untouched.
 * @param {number|string} seed
 * @param {...(number|string)} labels
 */
function deriveSeed (seed, ...labels) {
  let s = typeof seed === 'string' ? hashString(seed) : seed >>> 0
  s = splitmix32(s)
  for (const label of labels) {
    const l = typeof label === 'string' ? hashString(label) : label >>> 0
    s = splitmix32(s ^ l)
  }
  return s
}

/**
 * xoshiro128** generator.
 * @param {number} seed 32-bit seed (use deriveSeed for labelled streams)
 * @returns {{ nextUint32: () => number, next: () => number, int: (n: number) => number }}
 *   `next()` is uniform in [0, 1) with 32 bits of resolution; `int(n)` is uniform in [0, n).
 */
function createRng (seed) {
  // State from splitmix32 so that nearby seeds give unrelated streams and the state is never all zero.
  let x = seed >>> 0
  let a = (x = splitmix32(x))
  let b = (x = splitmix32(x))
  let c = (x = splitmix32(x))
  let d = splitmix32(x)
  if ((a | b | c | d) === 0) a = 1

  function nextUint32 () {
    const r = Math.imul(rotl(Math.imul(b, 5), 7), 9) >>> 0
    const t = b << 9
    c ^= a
    d ^= b
    b ^= c
    a ^= d
    c ^= t
    d = rotl(d, 11)
    return r
  }

  return {
    nextUint32,
    next: () => nextUint32() / TWO_POW_32,
    // Two draws give 53 bits, so int(n) has no visible bias even for n near 2^32.
    int: (n) => Math.floor(((nextUint32() >>> 5) * 67108864 + (nextUint32() >>> 6)) / 9007199254740992 * n)
  }
}

function rotl (x, k) {
  return ((x << k) | (x >>> (32 - k))) >>> 0
}

module.exports = { createRng, deriveSeed, hashString }
