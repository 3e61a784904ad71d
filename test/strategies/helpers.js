'use strict'

const { createRng } = require('../../loadgen/prng')
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

/** Recursively freeze so that any mutation by the code under test throws (strict mode). */
function deepFreeze (o) {
  if (o && typeof o === 'object' && !ArrayBuffer.isView(o)) {
    Object.freeze(o)
    for (const v of Object.values(o)) deepFreeze(v)
  }
  return o
}

/** Deterministic PRNG in [0, 1) for fuzz-style tests (the project's seeded generator). */
const prng = (seed) => createRng(seed).next

module.exports = { U, working, build, view, prng, deepFreeze }
