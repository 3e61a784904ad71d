'use strict'

/**
 * Large typed arrays that a round borrows and gives back, so the next round
 * reuses them instead of allocating new ones.
 *
 * Why: at 10,000 servers x 100 slices a round allocates about 120 MB of
 * columns. That memory lives outside V8's heap, and each round's 120 MB
 * set off a full garbage collection, which had to mark the million slice
 * objects of the live assignment: 200 to 400 ms of a 1.6 s round
 * (docs/algorithm.md, "Performance"). Reused, the arrays cost a fill and no
 * collection.
 *
 * Only `withScratch` lends: outside it, `take` allocates as `new Type(n)`
 * does, so the phases work the same when they are called on their own. An
 * array taken inside must not outlive the call: `withScratch` gives it back
 * when `fn` returns, and the next round overwrites it. The result must copy
 * what it keeps (chopper.js copies its `loads`).
 *
 * Small arrays (under 65,536 elements) are allocated as usual: they
 * are cheap, and pooling them would keep many more buffers. The pool keeps
 * only what the last round used, so it holds at most one round's worth.
 */

let minLength = 1 << 16 // shorter arrays are allocated as usual
let lending = null // the pool while a round runs

class Pool {
  constructor () {
    this.free = new Map() // Type -> typed arrays at full length, not lent
    this.lent = new Map() // Type -> typed arrays lent in this round
  }

  take (Type, n, value) {
    const free = this.free.get(Type)
    let best = -1
    if (free) {
      // the smallest that fits, and not over twice the length asked (a much longer one would wait for its own size)
      for (let k = 0; k < free.length; k++) {
        const len = free[k].length
        if (len >= n && len <= 2 * n && (best < 0 || len < free[best].length)) best = k
      }
    }
    let whole
    if (best >= 0) {
      whole = free[best]
      free[best] = free[free.length - 1]
      free.pop()
    } else {
      whole = new Type(n)
    }
    let lent = this.lent.get(Type)
    if (!lent) this.lent.set(Type, (lent = []))
    lent.push(whole)
    const view = whole.length === n ? whole : whole.subarray(0, n)
    if (value !== 0 || best >= 0) view.fill(value)
    return view
  }

  /** Everything lent becomes free; what this round did not use is dropped. */
  giveBack () {
    this.free = this.lent
    this.lent = new Map()
  }
}

const pool = new Pool()

/**
 * A typed array of length `n` filled with `value`: lent from the pool inside
 * `withScratch`, new outside it (or when it is small).
 * @template T
 * @param {new (n: number) => T} Type Float64Array, Int32Array, Uint8Array, ...
 * @param {number} n
 * @param {number} [value] 0 unless given
 * @returns {T}
 */
function take (Type, n, value = 0) {
  if (lending === null || n < minLength) return value === 0 ? new Type(n) : new Type(n).fill(value)
  return lending.take(Type, n, value)
}

/**
 * Run `fn` with the pool lending; everything it took is given back when it
 * returns or throws. A call inside another shares the outer call's loan,
 * given back when the outer call returns.
 * @template R
 * @param {() => R} fn
 * @returns {R}
 */
function withScratch (fn) {
  if (lending !== null) return fn()
  lending = pool
  try {
    return fn()
  } finally {
    lending = null
    pool.giveBack()
  }
}

/** A lent copy of `a` (typed): the pool's, as take()'s arrays are. */
function copyOf (a) {
  const out = take(a.constructor, a.length)
  out.set(a)
  return out
}

/** A copy of `a` (typed) that the pool does not own. */
function own (a) {
  const out = new a.constructor(a.length)
  out.set(a)
  return out
}

/**
 * Pool arrays of at least `n` elements from now on (tests lower it to put
 * small rounds through the pool). Returns the length it replaces.
 * @param {number} n
 */
function lendFrom (n) {
  const was = minLength
  minLength = n
  return was
}

module.exports = { take, withScratch, own, copyOf, lendFrom }
