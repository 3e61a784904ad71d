'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const {
  validateAssignment, evenAssignment, cloneAssignment, keyChurn, serverLoads, imbalance
} = require('../../core/assignment')
const { resolveOptions, expect, toLoads, checkServers, resolveInputs } = require('./inputs')
const chopper = require('./chopper')
const { mergePhase } = require('./merge')
const { splitPhase } = require('./split')
const { weightedMovePhase } = require('./weighted-move')

/**
 * Slicer's round (OSDI '16, 4.4.2): merge cold adjacent slices, pick moves by
 * weight, split hot slices. Merge and split are chopper's phases (merge.js,
 * split.js, used as they are); the move phase is weighted-move.js. It is a
 * strategy of its own rather than a chopper option so that chopper.js stays
 * untouched and each strategy keeps one set of defaults. Membership changes
 * are chopper's (addServer adds an empty server, removeServer hands the
 * leaving slices out least-loaded first), as in Slicer, which reassigns a
 * departed task's keys before balancing.
 */

const NAME = 'slicer-weighted'

/** Every option and its default, in one place (docs/algorithm.md). */
const defaults = Object.freeze({
  mergeChurnLimit: 0.01, // Slicer 4.4.2: merges may churn 1% of the keyspace per round
  moveChurnLimit: 0.09, // Slicer 4.4.2: moves use the rest of its 10% per-round budget
  minWeight: 1, // ours: a move must remove at least its churned keyspace fraction of imbalance (in mean loads)
  maxSlices: 65536, // as chopper
  minSliceLength: 1 // as chopper
})

const checks = {
  mergeChurnLimit: expect.fraction,
  moveChurnLimit: expect.fraction,
  minWeight: (v) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? null : 'a finite number >= 0 (imbalance reduction per keyspace fraction moved)'),
  maxSlices: expect.intAtLeast(1),
  minSliceLength: expect.intAtLeast(1, KEYSPACE_SIZE / 2)
}

const options = (o) => resolveOptions(NAME, defaults, checks, o)

/** Contiguous 1/n ranges in id order, generation 1 (as chopper). */
function initial (servers, opts) {
  options(opts)
  checkServers(servers)
  return evenAssignment(servers, 1)
}

function knownImbalance (a, load, frozen) {
  const perServer = serverLoads(a, load)
  for (const id of frozen) delete perServer[id]
  return imbalance(perServer)
}

/**
 * One round with its bookkeeping, shaped like chopperRound's result.
 * @returns {{ assignment: object, loads: Float64Array, churn: {merge:number, move:number, total:number},
 *   ops: object[], imbalance: {before:number, after:number}, moveStop: string|null, frozen: string[] }}
 */
function slicerRound (assignment, loads, opts, inputs) {
  const o = options(opts)
  validateAssignment(assignment)
  const load = toLoads(loads, assignment.slices.length)
  const { unknownServers: frozen } = resolveInputs(assignment, inputs)
  const base = cloneAssignment(assignment)
  const ids = Object.keys(base.servers)
  const frozenIds = ids.filter((id) => frozen.has(id))
  const before = knownImbalance(base, load, frozen)
  let total = 0
  base.slices.forEach((s, i) => { if (!frozen.has(s.servers[0])) total += load[i] })
  if (total === 0) {
    return { assignment: base, loads: load, churn: { merge: 0, move: 0, total: 0 }, ops: [], imbalance: { before, after: before }, moveStop: null, frozen: frozenIds }
  }
  const working = base.slices.map((s, i) => ({ start: s.start, end: s.end, servers: s.servers, load: load[i] }))
  const merged = mergePhase(working, ids, o.mergeChurnLimit * KEYSPACE_SIZE, frozen)
  const moved = weightedMovePhase(merged.slices, ids, { churnLimit: o.moveChurnLimit * KEYSPACE_SIZE, minWeight: o.minWeight, frozen })
  const split = splitPhase(moved.slices, { maxSlices: o.maxSlices, minSliceLength: o.minSliceLength, frozen })
  const next = {
    generation: base.generation,
    slices: split.slices.map((s) => ({ start: s.start, end: s.end, servers: s.servers })),
    servers: base.servers
  }
  const nextLoads = Float64Array.from(split.slices, (s) => s.load)
  return {
    assignment: next,
    loads: nextLoads,
    churn: { merge: merged.churn, move: moved.churn, total: keyChurn(assignment, next) },
    ops: [...merged.ops, ...moved.ops, ...split.ops],
    imbalance: { before, after: knownImbalance(next, nextLoads, frozen) },
    moveStop: moved.stop,
    frozen: frozenIds
  }
}

/** One balancing round (merge, weighted move, split). Same generation as the input. */
function rebalance (assignment, loads, opts, inputs) {
  return slicerRound(assignment, loads, opts, inputs).assignment
}

/** Chopper's addServer: the new server joins with no slices and is the next round's coolest. */
function addServer (assignment, id, url, loads, opts, inputs) {
  options(opts)
  return chopper.addServer(assignment, id, url, loads, undefined, inputs)
}

/** Chopper's removeServer: leaving slices hottest first, each to the least-loaded known server. */
function removeServer (assignment, id, loads, opts, inputs) {
  options(opts)
  return chopper.removeServer(assignment, id, loads, undefined, inputs)
}

/** Chopper's addServers: addServer for each join, in one pass. */
function addServers (assignment, joins, loads, opts, inputs) {
  options(opts)
  return chopper.addServers(assignment, joins, loads, undefined, inputs)
}

/** Chopper's removeServers: removeServer for each id in turn, in one pass. */
function removeServers (assignment, ids, loads, opts, inputs) {
  options(opts)
  return chopper.removeServers(assignment, ids, loads, undefined, inputs)
}

module.exports = { name: NAME, defaults, initial, rebalance, addServer, removeServer, addServers, removeServers, slicerRound }
