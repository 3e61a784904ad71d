'use strict'

const { KEYSPACE_SIZE, evenRanges } = require('./keyspace')
const { InvalidAssignmentError, StaleGenerationError, StaleEpochError, ImplausibleValueError, describeValue } = require('./errors')
const { normalize, overlap } = require('./ranges')
const { lastAtOrBelow } = require('./sorted-search')

/**
 * An assignment is plain JSON:
 *   { generation, slices: [{ start, end, servers: [id, ...], moving?, holders? }], servers: { id: { url } } }
 * Slices are half-open [start, end), sorted, and tile [0, 2^32) exactly.
 * `servers` lists every server holding the slice, primary first; outside a
 * handoff all of them admit it (replicated slices, docs/replication.md).
 * `moving: true` marks a slice in a fenced handoff (docs/ownership.md): routers
 * send it to `servers[0]`, its new owner, but nobody admits it until the
 * controller issues the next generation without the mark.
 */

const isUint = (v, max) => Number.isInteger(v) && v >= 0 && v <= max

/**
 * How far past both the current value and the wall clock (ms) a generation
 * or epoch may be. Controllers number both from the wall clock and issue far
 * fewer than one per millisecond, so a legitimate value is never ahead of the
 * clock by more than the clock skew between machines; a value beyond this
 * (a forged or corrupt push, 2^53 - 1) would make every later push look stale.
 */
const MAX_AHEAD_MS = 60 * 60 * 1000

/** Throw ImplausibleValueError when `value` is further ahead than MAX_AHEAD_MS. */
function checkPlausible (value, current, what, now = Date.now()) {
  if (value > Math.max(current, now) + MAX_AHEAD_MS) {
    throw new ImplausibleValueError(`implausible ${what} ${value}: more than ${MAX_AHEAD_MS} ms ahead of both the current one (${current}) and the clock`)
  }
}

/**
 * What is wrong with slice `i`, in validateAssignment's words (`value`: the
 * key expected, or the server id at fault). The messages are built here, out
 * of the loop, on purpose: built in the loop, they made its optimized code box
 * each slice's start and end (65 bytes of garbage a slice; at 100,000 slices
 * the loop took 3 times as long).
 */
function sliceFault (fault, i, s, value) {
  switch (fault) {
    case 'object': return `slices[${i}] must be an object`
    case 'start': return `slices[${i}].start must be an integer in [0, 2^32)`
    case 'end': return `slices[${i}].end must be an integer in (start, 2^32]`
    case 'gap': return `gap in the keyspace at ${value} (slices[${i}] starts at ${s.start})`
    case 'overlap': return `slices[${i}] overlaps the previous slice or is out of order (start ${s.start} < ${value})`
    case 'servers': return `slices[${i}].servers must be a non-empty array`
    case 'moving': return `slices[${i}].moving must be a boolean when present`
    case 'unknown server': return `slices[${i}] names unknown server ${describeValue(value)}`
    case 'server twice': return `slices[${i}] lists server ${describeValue(value)} twice`
    case 'holders': return `slices[${i}].holders is only allowed on a moving slice`
    case 'holders array': return `slices[${i}].holders must be a non-empty array when present`
    case 'unknown holder': return `slices[${i}].holders names ${describeValue(value)}, which is not in its servers`
    default: return `slices[${i}].holders lists ${describeValue(value)} twice` // 'holder twice'
  }
}

/**
 * validateAssignment's checks of all but the slices themselves: generation,
 * epoch, servers, and a non-empty slices array. For a caller that checks the
 * slices in a pass it makes anyway (the chopper round's read), and calls
 * validateAssignment for the message when one fails.
 * @param {object} a
 */
function validateAssignmentHead (a) {
  const fail = (msg) => { throw new InvalidAssignmentError('invalid assignment: ' + msg) }
  if (a === null || typeof a !== 'object' || Array.isArray(a)) fail('expected an object')
  if (!isUint(a.generation, Number.MAX_SAFE_INTEGER)) fail('generation must be a non-negative integer')
  if (a.epoch !== undefined && !isUint(a.epoch, Number.MAX_SAFE_INTEGER)) fail('epoch must be a non-negative integer when present')
  if (a.servers === null || typeof a.servers !== 'object' || Array.isArray(a.servers)) fail('servers must be an object of { id: { url } }')
  for (const [id, s] of Object.entries(a.servers)) {
    if (!id) fail('server ids must be non-empty')
    if (s === null || typeof s !== 'object' || typeof s.url !== 'string' || !/^https?:\/\/[\x21-\x7e]+$/.test(s.url)) {
      fail(`servers.${id}.url must be an http(s) URL`)
    }
  }
  if (!Array.isArray(a.slices) || a.slices.length === 0) fail('slices must be a non-empty array')
}

/**
 * Validate an assignment; throw InvalidAssignmentError naming the first fault.
 * With `previousGeneration`, a generation not above it throws StaleGenerationError.
 * @param {object} a
 * @param {{previousGeneration?: number}} [options]
 * @returns {object} the same assignment
 */
function validateAssignment (a, { previousGeneration } = {}) {
  validateAssignmentHead(a)
  const fail = (msg) => { throw new InvalidAssignmentError('invalid assignment: ' + msg) }
  let expectedStart = 0
  for (let i = 0; i < a.slices.length; i++) {
    const s = a.slices[i]
    if (s === null || typeof s !== 'object') fail(sliceFault('object', i, s))
    if (!isUint(s.start, KEYSPACE_SIZE - 1)) fail(sliceFault('start', i, s))
    if (!isUint(s.end, KEYSPACE_SIZE) || s.end <= s.start) fail(sliceFault('end', i, s))
    if (s.start > expectedStart) fail(sliceFault('gap', i, s, expectedStart))
    if (s.start < expectedStart) fail(sliceFault('overlap', i, s, expectedStart))
    if (!Array.isArray(s.servers) || s.servers.length === 0) fail(sliceFault('servers', i, s))
    if (s.moving !== undefined && typeof s.moving !== 'boolean') fail(sliceFault('moving', i, s))
    for (let j = 0; j < s.servers.length; j++) {
      const id = s.servers[j]
      if (typeof id !== 'string' || !Object.hasOwn(a.servers, id)) fail(sliceFault('unknown server', i, s, id))
      if (s.servers.indexOf(id) !== j) fail(sliceFault('server twice', i, s, id))
    }
    if (s.holders !== undefined) {
      if (s.moving !== true) fail(sliceFault('holders', i, s))
      if (!Array.isArray(s.holders) || s.holders.length === 0) fail(sliceFault('holders array', i, s))
      for (let j = 0; j < s.holders.length; j++) {
        const id = s.holders[j]
        if (!s.servers.includes(id)) fail(sliceFault('unknown holder', i, s, id))
        if (s.holders.indexOf(id) !== j) fail(sliceFault('holder twice', i, s, id))
      }
    }
    expectedStart = s.end
  }
  if (expectedStart !== KEYSPACE_SIZE) fail(`gap in the keyspace at the end: slices stop at ${expectedStart}`)
  if (previousGeneration !== undefined && a.generation <= previousGeneration) {
    throw new StaleGenerationError(`stale assignment: generation ${a.generation} is not above current ${previousGeneration}`)
  }
  return a
}

/**
 * Decide whether `next` may replace `current` (either may be null/undefined
 * for "none yet"). Returns false for a repeat of the current generation with
 * the same layout (pushes are retried, so repeats are normal), true for a
 * valid newer assignment, and throws InvalidAssignmentError or
 * StaleGenerationError otherwise.
 */
function acceptsUpdate (current, next, { now = Date.now() } = {}) {
  if (current && next && next.generation === current.generation && next.epoch === current.epoch && sameLayout(next, current)) return false
  validateAssignment(next)
  // The controller's epoch (docs/controller-ha.md): a deposed leader's pushes
  // carry a lower one. A push without an epoch counts as epoch 0.
  const currentEpoch = (current && current.epoch) || 0
  const nextEpoch = next.epoch || 0
  if (nextEpoch < currentEpoch) throw new StaleEpochError(`stale assignment: epoch ${nextEpoch} is below current ${currentEpoch} (a deposed controller?)`)
  checkPlausible(nextEpoch, currentEpoch, 'epoch', now)
  checkPlausible(next.generation, current ? current.generation : 0, 'generation', now)
  if (current && next.generation <= current.generation) {
    throw new StaleGenerationError(`stale assignment: generation ${next.generation} is not above current ${current.generation}`)
  }
  return true
}

/** The paper's initial assignment: server i owns one contiguous 1/n of the keyspace. */
function evenAssignment (servers, generation = 1) {
  const ids = Object.keys(servers).sort()
  if (ids.length === 0) throw new InvalidAssignmentError('an assignment needs at least one server')
  const slices = evenRanges(ids.length).map((r, i) => ({ start: r.start, end: r.end, servers: [ids[i]] }))
  return { generation, slices, servers: cloneServers(servers) }
}

/**
 * Slice `sl` cut into `parts` slices of (nearly) equal length, each with its
 * servers; fewer when it is shorter than `parts` keys.
 * @param {{start:number, end:number, servers:string[]}} sl
 * @param {number} parts
 */
function cutEvenly (sl, parts) {
  const len = sl.end - sl.start
  const n = Math.max(1, Math.min(parts, len))
  return Array.from({ length: n }, (_, j) => ({
    start: sl.start + Math.floor((j * len) / n),
    end: sl.start + Math.floor(((j + 1) * len) / n),
    servers: sl.servers.slice()
  }))
}

function cloneServers (servers) {
  const out = {}
  for (const id of Object.keys(servers).sort()) out[id] = { url: servers[id].url }
  return out
}

/** Deep copy (assignments are small JSON; strategies must not mutate their input). */
function cloneAssignment (a) {
  return {
    generation: a.generation,
    slices: a.slices.map(cloneSlice),
    servers: cloneServers(a.servers)
  }
}

function cloneSlice (s) {
  if (!s.moving) return { start: s.start, end: s.end, servers: s.servers.slice() }
  return s.holders
    ? { start: s.start, end: s.end, servers: s.servers.slice(), moving: true, holders: s.holders.slice() }
    : { start: s.start, end: s.end, servers: s.servers.slice(), moving: true }
}

/** Same slices, owners and servers, ignoring the generation. */
function sameLayout (a, b) {
  if (a.slices.length !== b.slices.length) return false
  for (let i = 0; i < a.slices.length; i++) {
    const x = a.slices[i]
    const y = b.slices[i]
    if (x.start !== y.start || x.end !== y.end || !x.moving !== !y.moving || x.servers.join('\0') !== y.servers.join('\0')) return false
    if ((x.holders || []).join('\0') !== (y.holders || []).join('\0')) return false
  }
  const ka = Object.keys(a.servers).sort()
  const kb = Object.keys(b.servers).sort()
  return ka.join('\0') === kb.join('\0') && ka.every((k) => a.servers[k].url === b.servers[k].url)
}

/**
 * Normalized key ranges `serverId` may admit: it is listed for the slice (at
 * any position: replicas admit too) and the slice is not moving, or it is one
 * of a moving slice's holders.
 */
function ownedRanges (a, serverId) {
  return normalize(a.slices.filter((s) => (s.moving ? s.holders !== undefined && s.holders.includes(serverId) : s.servers.includes(serverId))))
}

/** The layout without handoff marks (what strategies balance). */
function withoutMoving (a) {
  return { ...a, slices: a.slices.map((s) => (s.moving ? { start: s.start, end: s.end, servers: s.servers } : s)) }
}

/**
 * Key churn between two assignments (paper 5.2.1): the key-range length each
 * server gains, summed (a range that moves costs its length once; a new
 * replica costs it once more: its cache starts cold). With one server per
 * slice that is the range whose owner differs. Splits, merges, a new primary
 * among the same servers and dropped replicas cost nothing.
 */
function keyChurn (before, after) {
  let churn = 0
  let i = 0
  let j = 0
  while (i < before.slices.length && j < after.slices.length) {
    const x = before.slices[i]
    const y = after.slices[j]
    if (x.servers[0] !== y.servers[0] || y.servers.length > 1 || x.servers.length > 1) {
      let gained = 0
      for (const id of y.servers) if (!x.servers.includes(id)) gained++
      if (gained > 0) churn += gained * overlap(x, y)
    }
    if (x.end <= y.end) i++
    else j++
  }
  return churn
}

/**
 * Per-server load and keyspace share for an assignment and per-slice loads.
 * A replicated slice's load is split evenly over its servers (front ends
 * spread its requests), and each of them holds its keys.
 */
function serverLoads (a, loads) {
  const out = {}
  for (const id of Object.keys(a.servers)) out[id] = { load: 0, slices: 0, keys: 0 }
  a.slices.forEach((s, i) => {
    const share = (loads[i] || 0) / s.servers.length
    for (const id of s.servers) {
      const o = out[id]
      if (!o) continue
      o.load += share
      o.slices++
      o.keys += s.end - s.start
    }
  })
  return out
}

/** Imbalance as the paper defines it: max server load / mean server load (1 when idle). */
function imbalance (perServerLoad) {
  const values = Object.values(perServerLoad).map((v) => (typeof v === 'number' ? v : v.load))
  if (values.length === 0) return 1
  const total = values.reduce((x, y) => x + y, 0)
  if (total === 0) return 1
  return Math.max(...values) / (total / values.length)
}

const countOf = (r) => r.count

/**
 * Spread load reports `{start, end, count}` (which may describe slices of an
 * older generation) over the assignment's slices, in proportion to overlap.
 * @param {object} a
 * @param {object[]} reports
 * @param {(r) => number} [valueOf] what a report carries (default: its count)
 * @returns {Float64Array} load per slice of `a`
 */
function spreadLoads (a, reports, valueOf = countOf) {
  const loads = new Float64Array(a.slices.length)
  const starts = a.slices.map((s) => s.start)
  for (const r of reports) {
    const value = valueOf(r)
    if (!(value > 0) || !(r.end > r.start)) continue
    // first slice that may overlap r
    const lo = lastAtOrBelow(starts, r.start)
    const len = r.end - r.start
    for (let i = lo; i < a.slices.length && a.slices[i].start < r.end; i++) {
      const o = overlap(a.slices[i], r)
      if (o > 0) loads[i] += (value * o) / len
    }
  }
  return loads
}

module.exports = {
  cutEvenly,
  validateAssignment,
  validateAssignmentHead,
  acceptsUpdate,
  checkPlausible,
  MAX_AHEAD_MS,
  evenAssignment,
  cloneAssignment,
  sameLayout,
  ownedRanges,
  withoutMoving,
  keyChurn,
  serverLoads,
  imbalance,
  spreadLoads
}
