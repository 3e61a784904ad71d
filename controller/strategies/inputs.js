'use strict'

const { InvalidArgumentError } = require('../../core/errors')
const { validateAssignment } = require('../../core/assignment')

/**
 * Argument checks shared by every strategy. Strategies validate everything
 * before doing any work, and each error names the option or argument and what
 * was expected (house style).
 */

const URL_RE = /^https?:\/\/\S+$/

/**
 * Merge `options` over the strategy's frozen `defaults` and validate each value.
 * Unknown option names are rejected so that a typo (`moveRatios`) cannot
 * silently fall back to a default.
 * @param {string} strategy strategy name, for messages
 * @param {object} defaults every option with its default
 * @param {Object<string, function(*): (string|null)>} checks per option: returns what was expected, or null when valid
 * @param {object} [options]
 * @returns {object} a new, complete options object
 */
function resolveOptions (strategy, defaults, checks, options) {
  if (options === undefined || options === null) return { ...defaults }
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError(`${strategy} options must be an object`)
  }
  const resolved = { ...defaults }
  for (const [key, value] of Object.entries(options)) {
    if (!Object.hasOwn(defaults, key)) {
      throw new InvalidArgumentError(`unknown ${strategy} option ${key} (valid options: ${Object.keys(defaults).join(', ')})`)
    }
    if (value !== undefined) resolved[key] = value
  }
  for (const [key, check] of Object.entries(checks)) {
    const expected = check(resolved[key])
    if (expected) {
      throw new InvalidArgumentError(`invalid ${strategy} option ${key}: expected ${expected}, got ${show(resolved[key])}`)
    }
  }
  return resolved
}

function show (v) {
  if (typeof v === 'string') return JSON.stringify(v)
  if (typeof v === 'number' || typeof v === 'boolean' || v === null || v === undefined) return String(v)
  return Array.isArray(v) ? 'an array' : typeof v
}

/** Option checkers: each returns a description of what was expected, or null. */
const expect = {
  fraction: (v) => (typeof v === 'number' && v >= 0 && v <= 1 ? null : 'a number in [0, 1] (fraction of the keyspace)'),
  boolean: (v) => (typeof v === 'boolean' ? null : 'true or false'),
  ratio: (v) => (typeof v === 'number' && Number.isFinite(v) && v >= 1 ? null : 'a finite number >= 1'),
  ratioOrOff: (v) => (v === 0 || (typeof v === 'number' && Number.isFinite(v) && v >= 1) ? null : '0 (off) or a finite number >= 1'),
  intAtLeast: (min, max = 2 ** 32) => (v) => (Number.isInteger(v) && v >= min && v <= max ? null : `an integer in [${min}, ${max}]`),
  positive: (v) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? null : 'a finite number > 0'),
  nonNegative: (v) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? null : 'a finite number >= 0'),
  fractionBelowOne: (v) => (typeof v === 'number' && v >= 0 && v < 1 ? null : 'a number in [0, 1)')
}

/**
 * Per-slice loads as a fresh Float64Array aligned with the assignment's slices.
 * @param {ArrayLike<number>|null|undefined} loads
 * @param {number} n number of slices
 * @param {{required?: boolean}} [opts] when not required, a missing value means all zero
 * @returns {Float64Array}
 */
function toLoads (loads, n, { required = true } = {}) {
  if (loads === undefined || loads === null) {
    if (required) throw new InvalidArgumentError('loads is required: an array of per-slice request counts')
    return new Float64Array(n)
  }
  const arrayLike = Array.isArray(loads) || (ArrayBuffer.isView(loads) && !(loads instanceof DataView))
  if (!arrayLike) throw new InvalidArgumentError('loads must be an array or typed array of per-slice request counts')
  if (loads.length !== n) {
    throw new InvalidArgumentError(`loads must have one entry per slice: expected length ${n}, got ${loads.length}`)
  }
  const out = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    const v = loads[i]
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
      throw new InvalidArgumentError(`loads[${i}] must be a finite number >= 0, got ${show(v)}`)
    }
    out[i] = v
  }
  return out
}

/** A server id: a non-empty string. */
function checkServerId (id, what = 'server id') {
  if (typeof id !== 'string' || id.length === 0) throw new InvalidArgumentError(`${what} must be a non-empty string, got ${show(id)}`)
}

/** A server base URL, as core/assignment.js validateAssignment accepts it. */
function checkUrl (url, what = 'url') {
  if (typeof url !== 'string' || !URL_RE.test(url)) throw new InvalidArgumentError(`${what} must be an http(s) URL, got ${show(url)}`)
}

/** `servers` for `initial`: a non-empty object of `{ id: { url } }`. */
function checkServers (servers) {
  if (servers === null || typeof servers !== 'object' || Array.isArray(servers)) {
    throw new InvalidArgumentError('servers must be an object of { id: { url } }')
  }
  const ids = Object.keys(servers)
  if (ids.length === 0) throw new InvalidArgumentError('servers must name at least one server')
  for (const id of ids) {
    checkServerId(id)
    const s = servers[id]
    if (s === null || typeof s !== 'object') throw new InvalidArgumentError(`servers.${id} must be an object { url }`)
    checkUrl(s.url, `servers.${id}.url`)
  }
}

/**
 * Arguments of a strategy's addServer / removeServer, checked in one order for
 * every strategy. Returns the loads (zeros when not given).
 * @param {'join'|'leave'} change
 */
function checkMembershipChange (change, assignment, id, { url, loads }) {
  validateAssignment(assignment)
  checkServerId(id)
  if (change === 'join') checkUrl(url)
  const load = toLoads(loads, assignment.slices.length, { required: false })
  const present = Object.hasOwn(assignment.servers, id)
  if (change === 'join' && present) throw new InvalidArgumentError(`server ${id} is already in the assignment`)
  if (change === 'leave') {
    if (!present) throw new InvalidArgumentError(`server ${id} is not in the assignment`)
    if (Object.keys(assignment.servers).length === 1) throw new InvalidArgumentError(`cannot remove server ${id}: it is the last server`)
  }
  return load
}

/** Every field of a strategy's `inputs` argument (facts about the period, not tuning). */
const INPUT_FIELDS = ['unknownServers', 'requests', 'hotKeys']

/**
 * A strategy's optional `inputs` argument: facts the controller knows about
 * this period, as opposed to options, which tune the algorithm. Validated
 * against the (already validated) assignment.
 *  - `unknownServers`: ids of servers whose load collection failed this
 *    period, so their slices' loads are stale guesses. Each must be in
 *    `assignment.servers`, once.
 *  - `requests`: how many requests the period's loads were measured over. Loads
 *    may be costs (busy ms), so the request count is the only way a strategy
 *    can tell how much sampling noise they carry. null when not given (then a
 *    strategy that needs it takes the loads to be request counts).
 *  - `hotKeys`: per slice (aligned with `assignment.slices`), its hottest key
 *    as the app servers' majority votes saw it, `{ key, load }` (a slice key
 *    inside the slice, and the load it carried at least, at most the slice's),
 *    or null (core/hot-keys.js). null when not given.
 * Unknown field names are rejected, as for options.
 * @param {object} assignment a valid assignment
 * @param {{unknownServers?: string[], requests?: number, hotKeys?: ({key:number, load:number}|null)[]}|null|undefined} inputs
 * @param {ArrayLike<number>} [loads] the round's loads (hotKeys' loads are checked against them)
 * @returns {{ unknownServers: Set<string>, requests: number|null, hotKeys: ({key:number, load:number}|null)[]|null }}
 *   a new object; the caller's arrays are not kept
 */
function resolveInputs (assignment, inputs, loads) {
  const unknownServers = new Set()
  if (inputs === undefined || inputs === null) return { unknownServers, requests: null, hotKeys: null }
  if (typeof inputs !== 'object' || Array.isArray(inputs)) {
    throw new InvalidArgumentError(`inputs must be an object { unknownServers, requests, hotKeys }, got ${show(inputs)}`)
  }
  for (const key of Object.keys(inputs)) {
    if (!INPUT_FIELDS.includes(key)) {
      throw new InvalidArgumentError(`unknown inputs field ${key} (valid fields: ${INPUT_FIELDS.join(', ')})`)
    }
  }
  const requests = inputs.requests === undefined ? null : inputs.requests
  if (requests !== null && !(typeof requests === 'number' && Number.isFinite(requests) && requests >= 0)) {
    throw new InvalidArgumentError(`invalid inputs.requests: expected a finite number >= 0, got ${show(requests)}`)
  }
  const hotKeys = resolveHotKeys(assignment, inputs.hotKeys, loads)
  const ids = inputs.unknownServers
  if (ids === undefined) return { unknownServers, requests, hotKeys }
  if (!Array.isArray(ids)) {
    throw new InvalidArgumentError(`invalid inputs.unknownServers: expected an array of server ids, got ${show(ids)}`)
  }
  ids.forEach((id, i) => {
    checkServerId(id, `inputs.unknownServers[${i}]`)
    if (!Object.hasOwn(assignment.servers, id)) {
      throw new InvalidArgumentError(`inputs.unknownServers[${i}]: server ${id} is not in the assignment`)
    }
    if (unknownServers.has(id)) throw new InvalidArgumentError(`inputs.unknownServers lists server ${id} twice`)
    unknownServers.add(id)
  })
  return { unknownServers, requests, hotKeys }
}

/** `inputs.hotKeys`, checked: one entry per slice, each null or `{ key, load }` inside its slice and its load. */
function resolveHotKeys (assignment, hotKeys, loads) {
  if (hotKeys === undefined || hotKeys === null) return null
  const n = assignment.slices.length
  if (!Array.isArray(hotKeys) || hotKeys.length !== n) {
    throw new InvalidArgumentError(`invalid inputs.hotKeys: expected an array with one entry per slice (${n}), got ${show(hotKeys)}${Array.isArray(hotKeys) ? ` of length ${hotKeys.length}` : ''}`)
  }
  return hotKeys.map((h, i) => {
    if (h === null || h === undefined) return null
    const s = assignment.slices[i]
    if (typeof h !== 'object' || !Number.isInteger(h.key) || h.key < s.start || h.key >= s.end) {
      throw new InvalidArgumentError(`invalid inputs.hotKeys[${i}]: expected null or { key, load } with key an integer in the slice [${s.start}, ${s.end}), got ${show(h && h.key)}`)
    }
    const max = loads ? loads[i] : Infinity
    if (typeof h.load !== 'number' || !Number.isFinite(h.load) || h.load < 0 || h.load > max * (1 + 1e-9)) {
      throw new InvalidArgumentError(`invalid inputs.hotKeys[${i}].load: expected a finite number in [0, the slice's load ${max}], got ${show(h.load)}`)
    }
    return { key: h.key, load: Math.min(h.load, max) }
  })
}

module.exports = { resolveOptions, expect, toLoads, checkServerId, checkUrl, checkServers, checkMembershipChange, resolveInputs }
