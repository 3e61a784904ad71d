'use strict'

const { InvalidArgumentError } = require('../../core/errors')
const { validateAssignment, spreadLoads, cloneAssignment } = require('../../core/assignment')
const { toLoads, checkServerId, checkUrl, resolveInputs } = require('./inputs')

/**
 * Membership changes in batches: `addServers(assignment, joins, loads, opts,
 * inputs)` and `removeServers(assignment, ids, loads, opts, inputs)`, the
 * result of `addServer` / `removeServer` called once per server in the
 * given order, each on the previous call's result.
 *
 * Why: the controller lays out a batch of joins (or leaves) and commits once.
 * One call per server validates and copies the whole assignment every time:
 * at 5,000 servers x 4 slices, 1,000 joins one by one took about 30 s, and as
 * many leaves about 50 s. A strategy whose changes keep the slices (chopper)
 * does the batch in one pass; the others loop here.
 *
 * Between calls of the loop, `loads` (aligned with the input's slices) are
 * spread over the new slices by overlap when a call changed them
 * (core/assignment.js spreadLoads, as the controller spreads its reports),
 * `inputs.unknownServers` keeps only servers still in the assignment, and
 * `inputs.hotKeys` (per slice of the input; no membership change uses them)
 * are checked by the first call only.
 */

/**
 * Check a batch of joins against the assignment, and the inputs as
 * addServer checks them; an error names the join by its position.
 * @param {object} assignment
 * @param {Array<{id:string, url:string}>} joins
 * @param {ArrayLike<number>} [loads]
 * @param {object} [inputs]
 * @returns {{ load: Float64Array, unknownServers: Set<string> }} the loads (zeros when not given)
 */
function checkJoins (assignment, joins, loads, inputs) {
  validateAssignment(assignment)
  if (!Array.isArray(joins)) throw new InvalidArgumentError('joins must be an array of { id, url }')
  const load = toLoads(loads, assignment.slices.length, { required: false })
  const seen = new Set()
  joins.forEach((join, k) => {
    if (join === null || typeof join !== 'object') throw new InvalidArgumentError(`joins[${k}] must be an object { id, url }`)
    checkServerId(join.id, `joins[${k}].id`)
    checkUrl(join.url, `joins[${k}].url`)
    if (Object.hasOwn(assignment.servers, join.id) || seen.has(join.id)) throw new InvalidArgumentError(`server ${join.id} is already in the assignment`)
    seen.add(join.id)
  })
  return { load, unknownServers: resolveInputs(assignment, inputs).unknownServers }
}

/**
 * Check a batch of leaves against the assignment, as checkJoins does.
 * @param {object} assignment
 * @param {string[]} ids
 * @param {ArrayLike<number>} [loads]
 * @param {object} [inputs]
 * @returns {{ load: Float64Array, unknownServers: Set<string> }}
 */
function checkLeaves (assignment, ids, loads, inputs) {
  validateAssignment(assignment)
  if (!Array.isArray(ids)) throw new InvalidArgumentError('ids must be an array of server ids')
  const load = toLoads(loads, assignment.slices.length, { required: false })
  const gone = new Set()
  let left = Object.keys(assignment.servers).length
  ids.forEach((id, k) => {
    checkServerId(id, `ids[${k}]`)
    if (!Object.hasOwn(assignment.servers, id) || gone.has(id)) throw new InvalidArgumentError(`server ${id} is not in the assignment`)
    if (left === 1) throw new InvalidArgumentError(`cannot remove server ${id}: it is the last server`)
    gone.add(id)
    left--
  })
  return { load, unknownServers: resolveInputs(assignment, inputs).unknownServers }
}

/** `load` (per slice of `from`) for the slices of `to`: the same array when the slices are the same. */
function carryLoads (from, to, load) {
  const same = from.slices.length === to.slices.length && from.slices.every((s, i) => s.start === to.slices[i].start && s.end === to.slices[i].end)
  if (same) return load
  return spreadLoads(to, from.slices.map((s, i) => ({ start: s.start, end: s.end, count: load[i] })))
}

/** The inputs for a later call: unknown servers still in the assignment, the period's requests. */
function laterInputs (inputs, assignment) {
  if (inputs === undefined || inputs === null) return inputs
  const out = {}
  if (inputs.unknownServers !== undefined) out.unknownServers = inputs.unknownServers.filter((id) => Object.hasOwn(assignment.servers, id))
  if (inputs.requests !== undefined) out.requests = inputs.requests
  return out
}

/**
 * `addServers` for a strategy that has only `addServer`: a loop (see above).
 * @param {Function} addServer the strategy's (assignment, id, url, loads, opts, inputs) => assignment
 */
function addServersByLoop (addServer) {
  return function addServers (assignment, joins, loads, opts, inputs) {
    let { load } = checkJoins(assignment, joins, loads, inputs)
    let a = cloneAssignment(assignment) // a new object even for an empty batch
    joins.forEach(({ id, url }, k) => {
      const next = addServer(a, id, url, load, opts, k === 0 ? inputs : laterInputs(inputs, a))
      load = carryLoads(a, next, load)
      a = next
    })
    return a
  }
}

/**
 * `removeServers` for a strategy that has only `removeServer`: a loop (see above).
 * @param {Function} removeServer the strategy's (assignment, id, loads, opts, inputs) => assignment
 */
function removeServersByLoop (removeServer) {
  return function removeServers (assignment, ids, loads, opts, inputs) {
    let { load } = checkLeaves(assignment, ids, loads, inputs)
    let a = cloneAssignment(assignment)
    ids.forEach((id, k) => {
      const next = removeServer(a, id, load, opts, k === 0 ? inputs : laterInputs(inputs, a))
      load = carryLoads(a, next, load)
      a = next
    })
    return a
  }
}

module.exports = { checkJoins, checkLeaves, addServersByLoop, removeServersByLoop }
