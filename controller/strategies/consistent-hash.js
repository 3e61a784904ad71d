'use strict'

const farmhash = require('farmhash')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { validateAssignment, evenAssignment, cloneAssignment } = require('../../core/assignment')
const { resolveOptions, expect, toLoads, checkServers, checkMembershipChange, resolveInputs } = require('./inputs')
const { addServersByLoop, removeServersByLoop } = require('./batch')

/**
 * The static baseline of the paper's evaluation (section 6): a consistent-hash
 * ring with virtual nodes, expressed as an ordinary assignment so front ends
 * and app servers need nothing special. It never reacts to load.
 *
 * Point i of server `id` is farmhash.fingerprint32(`${id}#${i}`); a slice key
 * k belongs to the first point clockwise with point >= k, wrapping past 2^32.
 * Two servers hashing to the same point: the lower id takes it.
 * With `vnodes: 0` the ring is replaced by the paper's own "consistent
 * hashing" setup: contiguous 1/n ranges in id order (adding or removing a
 * server then moves much more than 1/n of the keys).
 *
 * `inputs.unknownServers` (servers whose load is unknown this period) is
 * accepted and validated like chopper's, so the controller can call both
 * strategies alike, but the ring never consults it: the ring ignores loads,
 * and on addServer / removeServer the hash points alone decide who takes
 * which keys, including a server whose load is unknown.
 */

const NAME = 'consistent-hash'

/** Every option and its default, in one place. */
const defaults = Object.freeze({
  vnodes: 100 // points per server; 0 = contiguous 1/n ranges
})

const checks = { vnodes: expect.intAtLeast(0, 10000) }

const options = (o) => resolveOptions(NAME, defaults, checks, o)

/**
 * The ring as an assignment with adjacent same-owner ranges coalesced.
 * @param {Object<string, {url:string}>} servers
 * @param {number} vnodes
 * @param {number} generation
 */
function ringAssignment (servers, vnodes, generation) {
  if (vnodes === 0) return evenAssignment(servers, generation)
  const ids = Object.keys(servers).sort()
  const points = ringPoints(ids, vnodes)
  const slices = []
  let start = 0
  for (const { point, owner } of points) {
    // keys in (previous point, point] belong to the point
    const last = slices[slices.length - 1]
    if (last && last.servers[0] === owner) last.end = point + 1
    else slices.push({ start, end: point + 1, servers: [owner] })
    start = point + 1
  }
  // wrap: keys past the last point go to the first
  if (start < KEYSPACE_SIZE) {
    const last = slices[slices.length - 1]
    if (last && last.servers[0] === points[0].owner) last.end = KEYSPACE_SIZE
    else slices.push({ start, end: KEYSPACE_SIZE, servers: [points[0].owner] })
  }
  const out = { generation, slices, servers: {} }
  for (const id of ids) out.servers[id] = { url: servers[id].url }
  return out
}

/**
 * The ring: points sorted clockwise, each with its owner (a point that two
 * servers hash to goes to the lower id). Also used by bounded-consistent-hash.
 * @param {string[]} ids sorted server ids
 * @param {number} vnodes
 * @returns {{ point: number, owner: string }[]}
 */
function ringPoints (ids, vnodes) {
  const n = ids.length
  // point * n + idIndex < 2^32 * 2^21 stays exact in a double, so one numeric
  // sort orders by point, then by id (the tie-break)
  const entries = new Float64Array(n * vnodes)
  let e = 0
  for (let s = 0; s < n; s++) {
    for (let i = 0; i < vnodes; i++) entries[e++] = farmhash.fingerprint32(`${ids[s]}#${i}`) * n + s
  }
  entries.sort()
  const points = []
  for (const x of entries) {
    const point = Math.floor(x / n)
    if (points.length > 0 && points[points.length - 1].point === point) continue
    points.push({ point, owner: ids[x % n] })
  }
  return points
}

/**
 * The ring for `servers` (generation 1).
 * @param {Object<string, {url:string}>} servers
 * @param {object} [opts] { vnodes }
 */
function initial (servers, opts) {
  const o = options(opts)
  checkServers(servers)
  return ringAssignment(servers, o.vnodes, 1)
}

/**
 * Static: the assignment is returned unchanged (a copy), whatever the loads.
 * @param {object} assignment
 * @param {ArrayLike<number>} loads validated, unused
 * @param {object} [opts]
 * @param {{unknownServers?: string[]}} [inputs] validated, unused
 */
function rebalance (assignment, loads, opts, inputs) {
  options(opts)
  validateAssignment(assignment)
  toLoads(loads, assignment.slices.length)
  resolveInputs(assignment, inputs)
  return cloneAssignment(assignment)
}

/**
 * Rebuild the ring with one more server: only the keys its points capture move (~1/(n+1)).
 * `inputs` is validated; the ring does not consult it.
 */
function addServer (assignment, id, url, loads, opts, inputs) {
  const o = options(opts)
  checkMembershipChange('join', assignment, id, { url, loads })
  resolveInputs(assignment, inputs)
  const servers = { ...cloneAssignment(assignment).servers, [id]: { url } }
  return ringAssignment(servers, o.vnodes, assignment.generation)
}

/**
 * Rebuild the ring without a server: only its keys move, to the next points
 * clockwise, whether or not their owners' loads are known (`inputs` is
 * validated; the ring does not consult it).
 */
function removeServer (assignment, id, loads, opts, inputs) {
  const o = options(opts)
  checkMembershipChange('leave', assignment, id, { loads })
  resolveInputs(assignment, inputs)
  const servers = cloneAssignment(assignment).servers
  delete servers[id]
  return ringAssignment(servers, o.vnodes, assignment.generation)
}

module.exports = {
  name: NAME,
  defaults,
  initial,
  rebalance,
  addServer,
  removeServer,
  // batches: one call per server in turn (./batch.js); the slices change with each
  addServers: addServersByLoop(addServer),
  removeServers: removeServersByLoop(removeServer),
  ringAssignment,
  ringPoints
}
