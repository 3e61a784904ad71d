'use strict'

const farmhash = require('farmhash')
const { MissingKeyError, InvalidArgumentError, describeValue } = require('./errors')

/** Size of the slice-key space: slice keys are unsigned 32-bit integers. */
const KEYSPACE_SIZE = 2 ** 32

/**
 * Map an application key to its 32-bit slice key (paper 3.1: FarmHash's
 * platform-independent fingerprint32, so every front end and server agrees).
 * @param {string} appKey
 * @returns {number} integer in [0, 2^32)
 */
function sliceKey (appKey) {
  if (typeof appKey !== 'string' || appKey.length === 0) {
    throw new MissingKeyError('a non-empty application key is required')
  }
  return farmhash.fingerprint32(appKey)
}

/**
 * Cut the keyspace into `n` contiguous, near-equal ranges (the paper's initial
 * assignment: each server owns one contiguous 1/n of the keyspace).
 * @param {number} n
 * @returns {{start:number,end:number}[]}
 */
function evenRanges (n) {
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`invalid n: expected an integer >= 1, got ${describeValue(n)}`)
  const ranges = []
  for (let i = 0; i < n; i++) {
    ranges.push({ start: Math.floor((i * KEYSPACE_SIZE) / n), end: Math.floor(((i + 1) * KEYSPACE_SIZE) / n) })
  }
  return ranges
}

module.exports = { KEYSPACE_SIZE, sliceKey, evenRanges }
