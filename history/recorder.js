'use strict'

const { performance } = require('node:perf_hooks')
const { InvalidArgumentError, PayloadTooLargeError } = require('../core/errors')
const { show } = require('./model')

/** Every option and its default, in one place. */
const defaults = Object.freeze({
  // About 200 bytes per record; a run longer than this should be checked in pieces.
  maxOperations: 100_000,
  // Reject a put of a value already written to the same key: the checker can
  // only tell which write a read saw when written values are unique.
  uniqueWrites: true,
  now: () => performance.now() // one monotonic clock for every call and ret
})

const OPS = new Set(['get', 'put', 'delete'])
const OUTCOMES = new Set([true, false, 'failed'])

/**
 * A value that no other write in the run uses: `client:seq`. The client name
 * comes first and the sequence number is an integer without a colon, so two
 * (client, seq) pairs never give the same string.
 * @param {string|number} client
 * @param {number} seq the client's own write counter (integer >= 0)
 * @returns {string}
 */
function uniqueValue (client, seq) {
  if (typeof client !== 'string' && typeof client !== 'number') throw new InvalidArgumentError(`client must be a string or number, got ${show(client)}`)
  if (!Number.isInteger(seq) || seq < 0) throw new InvalidArgumentError(`seq must be an integer >= 0, got ${show(seq)}`)
  return `${client}:${seq}`
}

/**
 * Records a client-side history for `checkLinearizability`: call `invoke`
 * just before sending a request and `complete` as soon as its outcome is
 * known, so that each [call, ret] interval contains the moment the server
 * acted. Timestamps come from one clock (performance.now by default).
 */
class HistoryRecorder {
  /**
   * @param {object} [options]
   * @param {number} [options.maxOperations] invoke throws beyond this many records
   * @param {boolean} [options.uniqueWrites] reject a put of a value already written to its key
   * @param {function(): number} [options.now] clock in milliseconds
   */
  constructor (options = {}) {
    if (options === null || typeof options !== 'object' || Array.isArray(options)) {
      throw new InvalidArgumentError('history recorder options must be an object')
    }
    for (const name of Object.keys(options)) {
      if (!Object.hasOwn(defaults, name)) {
        throw new InvalidArgumentError(`unknown history recorder option ${name} (valid options: ${Object.keys(defaults).join(', ')})`)
      }
    }
    const { maxOperations, uniqueWrites, now } = { ...defaults, ...options }
    if (!Number.isInteger(maxOperations) || maxOperations < 1) throw new InvalidArgumentError(`invalid maxOperations: expected an integer >= 1, got ${show(maxOperations)}`)
    if (typeof uniqueWrites !== 'boolean') throw new InvalidArgumentError(`invalid uniqueWrites: expected true or false, got ${show(uniqueWrites)}`)
    if (typeof now !== 'function') throw new InvalidArgumentError(`invalid now: expected a function returning milliseconds, got ${show(now)}`)
    this.maxOperations = maxOperations
    this.uniqueWrites = uniqueWrites
    this.now = now
    this.records = []
    this.pendingCount = 0
    this.written = new Map() // key → Set of values put (only with uniqueWrites)
    this.seqs = new Map() // client → next seq for nextValue
  }

  /** Number of operations recorded so far (pending ones included). */
  get size () {
    return this.records.length
  }

  /** Number of operations invoked and not yet completed. */
  get pending () {
    return this.pendingCount
  }

  /**
   * A fresh unique value for a put by `client` (uniqueValue with a per-client counter).
   * @param {string|number} client
   * @returns {string}
   */
  nextValue (client) {
    const seq = this.seqs.get(client) || 0
    this.seqs.set(client, seq + 1)
    return uniqueValue(client, seq)
  }

  /**
   * Record the start of an operation.
   * @param {{ client: string|number, key: string, op: 'get'|'put'|'delete', value?: string }} operation
   *   `value` is required for a put and ignored otherwise
   * @returns {number} handle for `complete`
   */
  invoke ({ client, key, op, value } = {}) {
    if (typeof client !== 'string' && typeof client !== 'number') throw new InvalidArgumentError(`client must be a string or number, got ${show(client)}`)
    if (typeof key !== 'string') throw new InvalidArgumentError(`key must be a string, got ${show(key)}`)
    if (!OPS.has(op)) throw new InvalidArgumentError(`op must be 'get', 'put' or 'delete', got ${show(op)}`)
    if (op === 'put' && typeof value !== 'string') throw new InvalidArgumentError(`value must be a string for a put, got ${show(value)}`)
    if (this.records.length >= this.maxOperations) {
      throw new PayloadTooLargeError(`history is full: maxOperations is ${this.maxOperations}; raise it or record a shorter run`)
    }
    if (op === 'put' && this.uniqueWrites) {
      let values = this.written.get(key)
      if (!values) this.written.set(key, (values = new Set()))
      if (values.has(value)) {
        throw new InvalidArgumentError(`value ${JSON.stringify(value)} was already written to key ${JSON.stringify(key)}; ` +
          'the checker needs unique written values (use nextValue or uniqueValue)')
      }
      values.add(value)
    }
    // ret stays null and ok false until completed: an unfinished write's outcome is unknown.
    this.records.push({ client, key, op, value: op === 'put' ? value : null, call: this.now(), ret: null, ok: false, done: false })
    this.pendingCount++
    return this.records.length - 1
  }

  /**
   * Record the outcome of an operation.
   * @param {number} handle from `invoke`
   * @param {{ ok: true|false|'failed', value?: string|null }} outcome `ok: false` = unknown
   *   (timed out, connection lost); `'failed'` = certainly no effect (e.g. rejected
   *   before reaching the store); for a completed get, `value` is what it
   *   returned (null = not found)
   */
  complete (handle, { ok, value } = {}) {
    const r = Number.isInteger(handle) ? this.records[handle] : undefined
    if (r === undefined) throw new InvalidArgumentError(`unknown history handle ${show(handle)}`)
    if (r.done) throw new InvalidArgumentError(`history handle ${handle} was already completed`)
    if (!OUTCOMES.has(ok)) throw new InvalidArgumentError(`ok must be true, false (outcome unknown) or 'failed' (no effect), got ${show(ok)}`)
    if (r.op === 'get' && ok === true) {
      if (value !== null && typeof value !== 'string') throw new InvalidArgumentError(`value of a completed get must be a string or null (not found), got ${show(value)}`)
      r.value = value
    }
    r.ret = this.now()
    r.ok = ok
    r.done = true
    this.pendingCount--
  }

  /**
   * The history in the checker's format, as fresh objects. Operations still
   * pending are included with ok: false, since a write in flight may yet land.
   * @returns {Array<{ client: string|number, key: string, op: string, value: string|null,
   *   call: number, ret: number|null, ok: true|false|'failed' }>}
   */
  operations () {
    return this.records.map(({ client, key, op, value, call, ret, ok }) => ({ client, key, op, value, call, ret, ok }))
  }
}

module.exports = { HistoryRecorder, uniqueValue, defaults }
