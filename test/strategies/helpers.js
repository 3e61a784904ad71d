'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')

/** One sixteenth of the keyspace: hand-worked examples are written in these units. */
const U = KEYSPACE_SIZE / 16

/**
 * Working slices (`{ start, end, servers, load }`, as the phases take them)
 * from `[units, owner, load]` triples that must add up to 16 units.
 */
function working (spec) {
  let start = 0
  const out = spec.map(([units, owner, load]) => {
    const s = { start, end: start + units * U, servers: [owner], load }
    start = s.end
    return s
  })
  if (start !== KEYSPACE_SIZE) throw new Error(`spec covers ${start / U} units, not 16`)
  return out
}

/** An assignment plus aligned loads from the same triples; `extra` adds servers without slices. */
function build (spec, extra = [], generation = 7) {
  const slices = working(spec)
  const servers = {}
  for (const id of [...slices.map((s) => s.servers[0]), ...extra]) servers[id] = { url: `http://127.0.0.1:1/${id}` }
  return {
    assignment: { generation, slices: slices.map(({ start, end, servers }) => ({ start, end, servers })), servers },
    loads: slices.map((s) => s.load)
  }
}

/** Compact view of working slices or assignment slices for assertions: [units, owner(, load)]. */
function view (slices, loads) {
  return slices.map((s, i) => {
    const row = [(s.end - s.start) / U, s.servers[0]]
    const load = loads ? loads[i] : s.load
    if (load !== undefined) row.push(load)
    return row
  })
}

/** Deterministic 32-bit PRNG (mulberry32) for fuzz-style tests. */
function prng (seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6D2B79F5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Recursively freeze so that any mutation by the code under test throws (strict mode). */
function deepFreeze (o) {
  if (o && typeof o === 'object' && !ArrayBuffer.isView(o)) {
    Object.freeze(o)
    for (const v of Object.values(o)) deepFreeze(v)
  }
  return o
}

module.exports = { U, working, build, view, prng, deepFreeze }
