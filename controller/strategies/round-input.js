'use strict'

const { validateAssignment, validateAssignmentHead } = require('../../core/assignment')
const { indexServers, toColumns, toColumnsWithSets } = require('./columns')
const { toLoads } = require('./inputs')
const { take } = require('./scratch')

// The chopper round's input (./chopper.js): the assignment checked and read
// into columns in one pass, and which slices a frozen server holds.

/**
 * The round's input, validated as validateAssignment does, and read into
 * columns. The phases work on columns (./columns.js), not objects: at a
 * million slices, allocating objects per phase was most of the round's
 * time. With replication, the input's replica lists too (read in the same
 * pass): for the imbalance before the round (spread like serverLoads spreads
 * them) and for the replication phase, which decides the round's sets
 * afresh; and that pass checks the slices, so they are read once, not once
 * more to validate them. Faults are named in validateAssignment's order:
 * the assignment's before the loads'.
 */
function readInput (assignment, loads, replicate) {
  if (!replicate) {
    validateAssignment(assignment)
    const load = toLoads(loads, assignment.slices.length)
    const index = indexServers(Object.keys(assignment.servers))
    return { load, index, read: { cols: toColumns(assignment.slices, index, load) } }
  }
  validateAssignmentHead(assignment)
  let load
  try {
    load = toLoads(loads, assignment.slices.length)
  } catch (err) {
    validateAssignment(assignment)
    throw err
  }
  const index = indexServers(Object.keys(assignment.servers))
  let read = toColumnsWithSets(assignment.slices, index, load, true)
  if (read === null) {
    validateAssignment(assignment) // throws, naming the fault
    read = toColumnsWithSets(assignment.slices, index, load) // valid, but not a plain slice: one with holders
  }
  return { load, index, read }
}

/** Per input slice, 1 when one of its servers is frozen (its load is a stale guess): hot-key cuts leave it. */
function staleSlices (c, slices, index, frozen) {
  const out = take(Uint8Array, c.n)
  for (let i = 0; i < c.n; i++) {
    for (const id of slices[c.src[i]].servers) if (frozen[index.indexOf.get(id)]) out[i] = 1
  }
  return out
}

module.exports = { readInput, staleSlices }
