'use strict'

const { sliceKey } = require('../core/keyspace')
const { MissingKeyError, PayloadTooLargeError, statusOf, toHttpBody } = require('../core/errors')
const { keyFromRawRequest } = require('../core/request-key')
const { isRead } = require('../core/key-router')
const { performance } = require('node:perf_hooks')
const { PassThrough } = require('node:stream')
const { HOP_BY_HOP, abortUpstream, dropNamed } = require('../core/forwarder')
const { connectionOptions } = require('../core/http-syntax')

/**
 * The request's headers as a flat [name, value, ...] list for undici, from
 * `rawHeaders` (no object copy), hop-by-hop ones and those the Connection
 * header names (RFC 9110 7.6.1) dropped, the forwarding headers and the
 * routing generation added.
 */
function forwardHeaders (req, generation) {
  const raw = req.rawHeaders
  const out = []
  let xff
  let host
  let connection = null
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase()
    if (HOP_BY_HOP.has(lower) || lower === 'expect') { // Node's server already answered any 100-continue
      if (lower === 'host') host = raw[i + 1]
      else if (lower === 'connection') connection = connection === null ? raw[i + 1] : connection + ',' + raw[i + 1]
      continue
    }
    if (lower === 'x-forwarded-for') {
      xff = xff ? `${xff}, ${raw[i + 1]}` : raw[i + 1]
      continue
    }
    out.push(raw[i], raw[i + 1])
  }
  // Most requests say at most `keep-alive` or `close`: nothing more to drop.
  const named = connectionOptions(connection)
  if (named !== null) dropNamed(out, 0, named)
  const peer = req.socket.remoteAddress
  out.push('x-forwarded-for', xff ? `${xff}, ${peer}` : peer)
  if (host) out.push('x-forwarded-host', host)
  out.push('x-chopper-generation', String(generation))
  return out
}

/** A body still to read from `req` (frontend/fast-http.js hands over requests whose body it has read whole: `bufferedBody`). */
function hasBody (req) {
  if (req.bodyless === true || req.bufferedBody != null) return false
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] || 0) > 0
}

/** The body frontend/fast-http.js read whole (a Buffer), or null. */
function bufferedBodyOf (req) {
  return req.bufferedBody != null ? req.bufferedBody : null
}

/** Read a request body of known length up to `limit` bytes, so a 421 can be retried. */
async function bufferBody (req, limit) {
  const chunks = []
  let size = 0
  for await (const chunk of req) {
    size += chunk.length
    if (size > limit) throw new PayloadTooLargeError(`request body exceeds ${limit} bytes`)
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}

/**
 * One request on the front end's data port, as core/key-router.js routes it
 * (its "exchange"): the answer goes to `res`, a failure to `onFail`.
 */
class ServerExchange {
  constructor (req, res, appKey, size, onFail) {
    this.req = req
    this.sink = res
    this.method = req.method
    this.path = req.url
    this.appKey = appKey
    this.key = appKey === undefined ? 0 : sliceKey(appKey)
    this.size = size
    this.read = isRead(req.method)
    this.body = bufferedBodyOf(req)
    this.replayable = true
    this.upstream = null
    this.failed = false
    this.started = performance.now()
    this.onFail = onFail
  }

  headersFor (generation) {
    return forwardHeaders(this.req, generation)
  }

  fail (err) {
    this.onFail(this, err)
  }
}

/**
 * The front end's data path, a plain `(req, res)` handler (no Express on
 * the hot path: docs/frontend-performance.md) around the shared router
 * (core/key-router.js: replica choice, hold and retry, idempotency rules).
 * `req` and `res` are Node's, or for a request without a body or with a
 * small one (read whole) the lighter pair of frontend/fast-http.js. What is
 * the front end's own: the key from the request (`?key=` or X-Chopper-Key),
 * the forwarded headers, reading a body (buffered up to `bufferLimit` so it
 * can be replayed, streamed past that), the JSON error answer, and metrics.
 *
 * @returns {(req, res) => void}
 */
function createProxyHandler ({ router, metrics, keyFrom = keyFromRawRequest, bufferLimit, logger }) {
  // Label lookups are hashed per call in prom-client: keep the children.
  const byCode = new Map()
  const requestsFor = (code) => {
    let c = byCode.get(code)
    if (!c) {
      c = metrics.requests.labels(String(code))
      byCode.set(code, c)
    }
    return c
  }

  function fail (ex, err) {
    const res = ex.sink
    const body = toHttpBody(err)
    const status = statusOf(err)
    metrics.errors.inc({ code: body.error.code })
    if (status >= 500) logger.warn({ err, path: ex.path }, 'request failed')
    if (res.headersSent) return res.destroy()
    ex.failed = true
    const text = JSON.stringify(body)
    res.writeHead(status, ['content-type', 'application/json; charset=utf-8', 'content-length', String(Buffer.byteLength(text))])
    res.end(text)
  }

  /** Read the body first: whole when its length is known and small enough, else streamed (not replayable). */
  async function withBody (ex) {
    const req = ex.req
    const length = Number(req.headers['content-length'])
    if (Number.isFinite(length) && length <= bufferLimit) {
      ex.body = await bufferBody(req, bufferLimit)
    } else {
      // Through a pass-through: undici destroys the body it was given when
      // the answer comes first, and a destroyed `req` could no longer be
      // drained (see the 'close' handler below).
      ex.body = req.pipe(new PassThrough())
      ex.replayable = false
    }
    router.route(ex)
  }

  return function proxy (req, res) {
    const appKey = keyFrom(req)
    const ex = new ServerExchange(req, res, appKey, router.replicas.sizeFor(req), fail)
    res.once('close', () => {
      abortUpstream(res, ex.upstream)
      // A streamed body the app server answered before reading to its end:
      // discard the rest, or the client's keep-alive connection stalls (its
      // next request waits for a read nobody makes, until a timeout resets it).
      if (!req.complete) {
        req.unpipe()
        req.resume()
      }
      if (ex.failed || !res.headersSent) return // errors are counted by code in fail()
      requestsFor(res.statusCode).inc()
      metrics.duration.observe((performance.now() - ex.started) / 1e3)
    })
    if (appKey === undefined) return fail(ex, new MissingKeyError('missing key: pass ?key=K or an X-Chopper-Key header'))
    if (hasBody(req)) {
      withBody(ex).catch((err) => fail(ex, err))
      return
    }
    router.route(ex)
  }
}

module.exports = { createProxyHandler, HOP_BY_HOP }
