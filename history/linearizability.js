'use strict'

const { performance } = require('node:perf_hooks')
const { InvalidArgumentError } = require('../core/errors')
const { explainViolation } = require('./explain')
const { prepare, searchKey } = require('./register-search')
const { PUT, DELETE, GET, show } = require('./model')

/**
 * Linearizability checker for a key-value store seen as one read/write
 * register per key (Herlihy & Wing 1990). Keys are independent objects, so
 * the history is linearizable iff every key's sub-history is (P-compositionality,
 * Horn & Kroening 2015); each key is searched on its own with the Wing & Gong
 * algorithm as improved by Lowe (2017): a linked list of call/return entries,
 * depth-first search with backtracking, and a cache of (linearized set, state)
 * pairs already explored. Porcupine (anishathalye/porcupine) is the model;
 * register-search.js adds three exact pruning rules that keep the search
 * near-linear at high concurrency, and explain.js words the violations.
 *
 * Pure: no I/O, and the clock is read only when a time budget is set.
 */

/** Every option and its default, in one place. */
const defaults = Object.freeze({
  // Search steps per key before giving up with `unknown`. The simulated
  // histories in test/history need 1 to 3 steps per op (8 to 64 clients on one
  // key); 10 million steps is a few seconds of search.
  maxStepsPerKey: 10_000_000,
  timeBudgetMs: Infinity, // per key; Infinity = steps budget only (deterministic)
  maxSliceOps: 20, // operations quoted per violation
  now: () => performance.now() // clock for timeBudgetMs, injectable for tests
})

const checks = {
  maxStepsPerKey: (v) => (Number.isInteger(v) && v >= 1 ? null : 'an integer >= 1'),
  timeBudgetMs: (v) => (typeof v === 'number' && v > 0 ? null : 'a number > 0 (Infinity for none)'),
  maxSliceOps: (v) => (Number.isInteger(v) && v >= 3 ? null : 'an integer >= 3'),
  now: (v) => (typeof v === 'function' ? null : 'a function returning milliseconds')
}

function resolveOptions (options) {
  if (options === undefined || options === null) return { ...defaults }
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError('linearizability options must be an object')
  }
  const resolved = { ...defaults }
  for (const [name, value] of Object.entries(options)) {
    if (!Object.hasOwn(defaults, name)) {
      throw new InvalidArgumentError(`unknown linearizability option ${name} (valid options: ${Object.keys(defaults).join(', ')})`)
    }
    if (value !== undefined) resolved[name] = value
  }
  for (const [name, check] of Object.entries(checks)) {
    const expected = check(resolved[name])
    if (expected) throw new InvalidArgumentError(`invalid linearizability option ${name}: expected ${expected}, got ${show(resolved[name])}`)
  }
  return resolved
}

const KINDS = { put: PUT, delete: DELETE, get: GET }

/**
 * Validate the input and split it by key. Failed gets and definite failures
 * are dropped: they observed nothing and changed nothing. An indeterminate
 * write (ok: false) gets ret = Infinity: it may take effect at any point
 * after its call, including never (Porcupine's treatment of lost responses).
 * @returns {Map<string, object[]>} key → items { index, kind, value, valueId, call, ret }
 */
function partition (operations) {
  if (!Array.isArray(operations)) {
    throw new InvalidArgumentError('operations must be an array of { client, key, op, value, call, ret, ok }')
  }
  const byKey = new Map()
  for (let index = 0; index < operations.length; index++) {
    const o = operations[index]
    const where = `operations[${index}]`
    if (o === null || typeof o !== 'object') throw new InvalidArgumentError(`${where} must be an object, got ${show(o)}`)
    const { key, op, value, call, ret, ok } = o
    if (typeof key !== 'string') throw new InvalidArgumentError(`${where}.key must be a string, got ${show(key)}`)
    if (!Object.hasOwn(KINDS, op)) throw new InvalidArgumentError(`${where}.op must be 'get', 'put' or 'delete', got ${show(op)}`)
    if (ok !== true && ok !== false && ok !== 'failed') {
      throw new InvalidArgumentError(`${where}.ok must be true, false (outcome unknown) or 'failed' (certainly no effect), got ${show(ok)}`)
    }
    if (typeof call !== 'number' || !Number.isFinite(call)) throw new InvalidArgumentError(`${where}.call must be a finite number, got ${show(call)}`)
    if (ok === true && (typeof ret !== 'number' || !Number.isFinite(ret) || ret < call)) {
      throw new InvalidArgumentError(`${where}.ret must be a finite number >= call for a completed operation, got ${show(ret)}`)
    }
    if (op === 'put' && typeof value !== 'string') throw new InvalidArgumentError(`${where}.value must be a string for a put, got ${show(value)}`)
    if (op === 'get' && ok === true && value !== null && typeof value !== 'string') {
      throw new InvalidArgumentError(`${where}.value must be a string or null (not found) for a completed get, got ${show(value)}`)
    }
    if (ok === 'failed' || (ok === false && op === 'get')) continue
    let items = byKey.get(key)
    if (!items) byKey.set(key, (items = []))
    items.push({
      index,
      kind: KINDS[op],
      value: op === 'delete' ? null : value,
      valueId: -1, // set by prepare
      call,
      ret: ok === true ? ret : Infinity
    })
  }
  return byKey
}

/**
 * Check a history of KV operations for linearizability against a register per
 * key (initial value null = absent; put sets, delete clears, get returns the
 * current value). Written values should be unique per key (see README).
 *
 * @param {Array<{ client?: *, key: string, op: 'get'|'put'|'delete', value?: string|null,
 *   call: number, ret?: number, ok: true|false|'failed' }>} operations
 *   `ok: false` = outcome unknown (a write may take effect at any time after
 *   its call, or never; a get is dropped); `ok: 'failed'` = certainly no effect (dropped).
 * @param {object} [options] see `defaults`
 * @returns {{ ok: boolean, verdict: 'linearizable'|'violation'|'unknown', keys: number, ops: number,
 *   violations: Array<{ key: string, message: string, ops: object[] }>,
 *   unknown: Array<{ key: string, ops: number, steps: number, reason: string }>,
 *   warnings: string[] }}
 *   `ops` in a violation are copies of the offending input operations with their `index`.
 */
function checkLinearizability (operations, options) {
  const o = resolveOptions(options)
  const byKey = partition(operations)
  const violations = []
  const unknown = []
  const warnings = []
  for (const [key, all] of byKey) {
    const warning = duplicateWrites(key, all)
    if (warning) warnings.push(warning)
    const items = prepare(all)
    const r = searchKey(items, o)
    if (r.outcome === 'violation') {
      violations.push(explainViolation(key, all, r.stuck, operations, o.maxSliceOps))
    } else if (r.outcome === 'unknown') {
      unknown.push({ key, ops: items.length, steps: r.steps, reason: r.reason })
    }
  }
  const verdict = violations.length > 0 ? 'violation' : unknown.length > 0 ? 'unknown' : 'linearizable'
  return { ok: verdict === 'linearizable', verdict, keys: byKey.size, ops: operations.length, violations, unknown, warnings }
}

/** With repeated values, a read cannot say which write it saw: stale reads of them go unnoticed. */
function duplicateWrites (key, items) {
  const seen = new Set()
  const repeated = new Set()
  for (const it of items) {
    if (it.kind !== PUT) continue
    if (seen.has(it.value)) repeated.add(it.value)
    seen.add(it.value)
  }
  if (repeated.size === 0) return null
  const [first] = repeated
  return `key ${JSON.stringify(key)}: ${repeated.size} value(s) written more than once (e.g. ${JSON.stringify(first)}); ` +
    'a stale read of a repeated value cannot be told from a fresh one'
}

module.exports = { checkLinearizability, defaults }
