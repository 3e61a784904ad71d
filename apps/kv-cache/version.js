'use strict'

const { InvalidArgumentError } = require('../../core/errors')

/**
 * Item versions: `generation * 10^16 + hlc`, as BigInt.
 *
 * The generation is the assignment generation under which the shard guard
 * admitted the write (req.chopperGeneration). A slice's new owner admits only
 * under a generation strictly higher than any the old owner admitted under,
 * so every write of the new owner carries a higher version than any write of
 * the old one, and DynamoDB's conditional put (`ver < :ver`) fences the old
 * owner's late writes out.
 *
 * Within one generation, versions are ordered by a hybrid clock in
 * microseconds. It starts from the wall clock, so a restarted process writes
 * above what its previous run wrote, and it never goes backwards within a
 * process even when the wall clock does. Microseconds stay below 10^16 until
 * the year 2286, so the clock part never spills into the generation part.
 *
 * Versions are passed to DynamoDB as N strings: numbers there have 38 digits
 * of precision and compare numerically (test/kv-cache/dynamo-store.test.js
 * checks dynalite does too), while a JS number would lose the low digits.
 */

const GENERATION_SCALE = 10n ** 16n

class HybridClock {
  /** @param {{ now?: () => number }} [options] now: wall clock in milliseconds */
  constructor ({ now = Date.now } = {}) {
    this.now = now
    this.last = 0n
  }

  /** A timestamp in microseconds above every one issued or observed before. */
  tick () {
    const wall = BigInt(Math.floor(this.now())) * 1000n
    this.last = wall > this.last ? wall : this.last + 1n
    return this.last
  }

  /** Take in the clock part of a version read from the store (the HLC receive rule). */
  observe (ver) {
    const t = clockOf(ver)
    if (t > this.last) this.last = t
  }
}

/** Throws InvalidArgumentError unless `generation` is a non-negative safe integer. */
function checkGeneration (generation) {
  if (!Number.isSafeInteger(generation) || generation < 0) {
    throw new InvalidArgumentError(`invalid generation: expected a non-negative integer, got ${String(generation)}`)
  }
  return generation
}

/** @returns {bigint} */
function makeVersion (generation, hlc) {
  return BigInt(checkGeneration(generation)) * GENERATION_SCALE + hlc
}

/** @param {bigint} ver @returns {number} */
function generationOf (ver) {
  return Number(ver / GENERATION_SCALE)
}

/** @param {bigint} ver @returns {bigint} */
function clockOf (ver) {
  return ver % GENERATION_SCALE
}

module.exports = { HybridClock, checkGeneration, makeVersion, generationOf, clockOf, GENERATION_SCALE }
