'use strict'

const { sliceKey } = require('../core/keyspace')
const { keyFromParts } = require('../core/request-key')
const { isRead } = require('../core/key-router')
const { HOP_BY_HOP } = require('../core/forwarder')
const { InvalidArgumentError, PayloadTooLargeError } = require('../core/errors')

/**
 * One request through the client's Dispatcher, as core/key-router.js routes
 * it (its "exchange"; the front end's is frontend/proxy.js's): undici's
 * dispatch options made into a method, a path, the routing key (`?key=`
 * first, then X-Chopper-Key, as the front end reads it), the headers to
 * send and the body. The answer goes to `sink` (client/handler-sink.js).
 *
 * A body given whole (a string, a Buffer, a typed array) is replayable: a
 * 421 or a dead owner sends it again. A streamed one (a Readable or async
 * iterable, what fetch hands over) is read whole first when its
 * Content-Length is at most `bufferLimit` (`prepare()`), and otherwise sent
 * as it streams, once: it cannot be retried.
 */
class DispatchExchange {
  /**
   * @param {object} opts undici's dispatch options: { method, path, headers, body }
   * @param {import('./handler-sink').HandlerSink} sink
   * @param {{ sizeOf: (req) => number | null }} sizing the replica router's, when the policy uses sizes
   */
  constructor (opts, sink, sizeOf) {
    const method = typeof opts.method === 'string' ? opts.method.toUpperCase() : 'GET'
    const path = opts.path
    if (typeof path !== 'string' || path[0] !== '/') throw new InvalidArgumentError('invalid path: expected a string starting with /')
    if (opts.upgrade || method === 'CONNECT') throw new InvalidArgumentError('invalid request: the Chopper client routes requests by key, not CONNECT or protocol upgrades')
    const { headers, key, length } = flatHeaders(opts.headers)
    this.method = method
    this.path = path
    this.appKey = keyFromParts(path, key)
    this.key = this.appKey === undefined ? 0 : sliceKey(this.appKey)
    this.read = isRead(method)
    this.size = sizeOf === null ? 1 : sizeOf({ url: path, method })
    this.headers = headers
    this.length = length // the Content-Length given, or -1
    this.body = wholeBody(opts.body)
    this.replayable = true
    this.streamed = this.body === undefined // a stream or iterable, not read yet
    if (this.streamed) this.body = opts.body
    else if (this.body !== null && length === -1) headers.push('content-length', String(this.body.length)) // our upstream client frames a body by its Content-Length
    this.sink = sink
    this.upstream = null
  }

  /** Read a streamed body of known length up to `limit` whole; else send it as it streams, once. */
  async prepare (limit) {
    if (this.length !== -1 && this.length <= limit) {
      const chunks = []
      let size = 0
      for await (const chunk of this.body) {
        const b = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
        size += b.length
        if (size > limit) throw new PayloadTooLargeError(`request body exceeds ${limit} bytes`)
        chunks.push(b)
      }
      this.body = Buffer.concat(chunks)
    } else {
      this.replayable = false
    }
    this.streamed = false
  }

  headersFor (generation) {
    const out = this.headers.slice()
    out.push('x-chopper-generation', String(generation))
    return out
  }

  fail (err) {
    this.sink.destroy(err)
  }
}

/** A body given whole as a Buffer; null for none; undefined for a stream or iterable. */
function wholeBody (body) {
  if (body === null || body === undefined) return null
  if (typeof body === 'string') return Buffer.from(body)
  if (Buffer.isBuffer(body)) return body
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  if (body instanceof ArrayBuffer) return Buffer.from(body)
  if (typeof body[Symbol.asyncIterator] === 'function' || typeof body[Symbol.iterator] === 'function') return undefined
  throw new InvalidArgumentError('invalid body: expected a string, a Buffer, a typed array, a Readable or an async iterable')
}

/**
 * undici's header forms (an object, a flat [name, value, ...] array, an
 * array or iterable of pairs) as a flat list of strings without the
 * hop-by-hop headers and the ones Chopper sets; the X-Chopper-Key value and
 * the Content-Length (-1: none) on the side.
 */
function flatHeaders (given) {
  const headers = []
  let key
  let length = -1
  const add = (name, value) => {
    if (value === undefined || value === null) return
    const n = String(name)
    const lower = n.toLowerCase()
    if (HOP_BY_HOP.has(lower) || lower === 'expect') return
    if (Array.isArray(value)) {
      for (const v of value) add(n, v)
      return
    }
    const v = String(value)
    if (lower === 'x-chopper-key') key = v
    else if (lower === 'content-length') length = Number(v)
    headers.push(n, v)
  }
  if (given === null || given === undefined) return { headers, key, length }
  if (Array.isArray(given) && (given.length === 0 || !Array.isArray(given[0]))) {
    if (given.length % 2 !== 0) throw new InvalidArgumentError('invalid headers: a flat list needs name, value pairs')
    for (let i = 0; i < given.length; i += 2) add(given[i], given[i + 1])
  } else if (typeof given[Symbol.iterator] === 'function') {
    for (const [name, value] of given) add(name, value)
  } else if (typeof given === 'object') {
    for (const name of Object.keys(given)) add(name, given[name])
  } else {
    throw new InvalidArgumentError('invalid headers: expected an object, a flat array or pairs')
  }
  return { headers, key, length: Number.isSafeInteger(length) && length >= 0 ? length : -1 }
}

module.exports = { DispatchExchange, flatHeaders }
