'use strict'

const { sliceKey } = require('../core/keyspace')
const {
  MissingKeyError, NoAssignmentError, UpstreamUnreachableError, UpstreamUnavailableError,
  UpstreamTimeoutError, PayloadTooLargeError, InvalidArgumentError, WriteIndeterminateError, statusOf, toHttpBody
} = require('../core/errors')
const { keyFromRawRequest } = require('../core/request-key')
const { performance } = require('node:perf_hooks')
const { PassThrough } = require('node:stream')
const { HOP_BY_HOP, abortUpstream } = require('./forwarders')
const { DEFER } = require('./replica-router')

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])
// undici refused the request itself (a header it does not accept): the client's fault, 400.
const CLIENT_FAULT_CODES = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED'])
// Nothing reached the app server: any replayable request may be sent elsewhere.
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH'])
// A request may have reached the app server before its connection broke: only
// reads are sent again then. A PUT or DELETE is idempotent in RFC 9110's sense
// (9.2.2), but not against other clients' writes: replayed after another
// client's write of the key was answered, a PUT that had already taken effect
// takes effect a second time and undoes that write (the chaos run's history
// checker caught one, 2026-11-26). A write whose connection broke is answered
// 503 CHOPPER_ERR_WRITE_INDETERMINATE instead: it may or may not have applied.
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS'])
// A key can meet several handoffs in a row (a hot slice moved twice): retry a
// few times, always within the hold deadline.
const MAX_RETRIES = 4

function retryableAfter (err, method) {
  return NOT_SENT_CODES.has(err.code) || SAFE.has(method)
}

/** Reads may go to any replica that admits the slice; writes go to the primary (docs/replication.md). */
function isRead (method) {
  return method === 'GET' || method === 'HEAD'
}

/**
 * The request's headers as a flat [name, value, ...] list for undici, from
 * `rawHeaders` (no object copy), hop-by-hop ones dropped, the forwarding
 * headers and the routing generation added.
 */
function forwardHeaders (req, generation) {
  const raw = req.rawHeaders
  const out = []
  let xff
  let host
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase()
    if (HOP_BY_HOP.has(lower) || lower === 'expect') { // Node's server already answered any 100-continue
      if (lower === 'host') host = raw[i + 1]
      continue
    }
    if (lower === 'x-forwarded-for') {
      xff = xff ? `${xff}, ${raw[i + 1]}` : raw[i + 1]
      continue
    }
    out.push(raw[i], raw[i + 1])
  }
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
 * The front end's data path, a plain `(req, res)` handler (no Express on
 * the hot path: docs/frontend-performance.md): key -> fingerprint32 -> binary
 * search -> forward. `req` and `res` are Node's, or for a request without a
 * body or with a small one (read whole) the lighter pair of frontend/fast-http.js.
 *
 * The server: `router` (frontend/replica-router.js) picks it. Reads of a
 * slice that several servers admit choose among them with the replica-choice
 * policy; writes go to the primary (or the first holder while the primary
 * does not admit the slice yet); a slice nobody admits goes to its primary,
 * which holds the request until the grant.
 *
 * On 421 (our map is stale, the slice is being handed off, or the owner's
 * lease ran out) or an unreachable owner (killed, or gone after a drain), wait
 * up to `holdMs` for a newer map (a push wakes us; we also pull) and retry on
 * the server it names, when the request can be replayed (no body, or a body
 * small enough to have been buffered) and, after a broken connection (not a
 * refused one), only when it is a read: a write whose connection broke after
 * it was sent may have applied, and is answered 503
 * CHOPPER_ERR_WRITE_INDETERMINATE. A read of a replicated slice retries on
 * another replica without waiting. So a request that meets a handoff or a dead
 * server is delayed, not failed, unless it is a write the dead server may
 * have applied.
 *
 * @returns {(req, res) => void}
 */
function createProxyHandler ({ table, router, forwarder, metrics, keyFrom = keyFromRawRequest, bufferLimit, holdMs = 3000, logger }) {
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

  function fail (req, res, state, err) {
    const body = toHttpBody(err)
    const status = statusOf(err)
    metrics.errors.inc({ code: body.error.code })
    if (status >= 500) logger.warn({ err: { code: err.code, message: err.message }, path: req.url }, 'request failed')
    if (res.headersSent) return res.destroy()
    state.failed = true
    const text = JSON.stringify(body)
    res.writeHead(status, ['content-type', 'application/json; charset=utf-8', 'content-length', String(Buffer.byteLength(text))])
    res.end(text)
  }

  const attemptAsync = (origin, request, res, extra, state, slot, size) => new Promise((resolve, reject) => {
    state.upstream = forwarder.attempt(origin, request, res, extra, (err, outcome) => (err ? reject(err) : resolve(outcome)), router, slot, size)
  })

  /**
   * The general path: no map yet, a body to buffer, or a first attempt that
   * met a 421 or a transport error (`first`: its result). Retries and holds.
   */
  async function forward (req, res, state, appKey, key, size, first) {
    if (!table.map) await table.refresh()
    if (!table.map) throw new NoAssignmentError('no slice assignment yet: the controller has not pushed one')

    let body = bufferedBodyOf(req)
    let replayable = true
    if (first === undefined && hasBody(req)) {
      const length = Number(req.headers['content-length'])
      if (Number.isFinite(length) && length <= bufferLimit) {
        body = await bufferBody(req, bufferLimit)
      } else {
        // Streamed through; cannot be replayed. Through a pass-through: undici
        // destroys the body it was given when the answer comes first, and a
        // destroyed `req` could no longer be drained (see proxy() below).
        body = req.pipe(new PassThrough())
        replayable = false
      }
    }

    const read = isRead(req.method)
    let tried // servers that failed this request (421, unreachable): a read takes another replica while there is one
    let deadline = 0
    for (let attempt = 0; ; attempt++) {
      let owner, origin, generation, outcome
      try {
        if (attempt === 0 && first !== undefined) {
          ({ owner, origin, generation } = first)
          if (first.err) throw first.err
          outcome = first.outcome
        } else {
          const slot = await router.place(table, key, read, size, tried)
          const map = table.map
          owner = router.ids[slot]
          origin = map.urlOf(owner)
          generation = map.generation
          outcome = await attemptAsync(origin, { method: req.method, path: req.url, headers: forwardHeaders(req, generation), body }, res,
            ['x-served-by', owner, 'x-chopper-generation', String(generation)], state, slot, size)
        }
      } catch (err) {
        if (CLIENT_FAULT_CODES.has(err.code)) throw new InvalidArgumentError(`request cannot be forwarded: ${err.message}`, { cause: err })
        metrics.upstreamErrors.inc({ server: owner, code: err.code || 'UNKNOWN' })
        if (TIMEOUT_CODES.has(err.code)) throw new UpstreamTimeoutError(`app server ${owner} did not answer in time`, { cause: err })
        if (NOT_SENT_CODES.has(err.code) && owner !== undefined) router.suspect(owner) // refused: other replicas take its reads for a while
        if (attempt === 0 && replayable && !NOT_SENT_CODES.has(err.code) && SAFE.has(req.method)) {
          // A broken connection, not a refused one: most often a keep-alive
          // socket the server had just closed. Try once more (the same owner,
          // or for a read of a replicated slice, whichever replica the policy picks).
          deadline = Date.now() + holdMs
          metrics.retries.inc({ reason: 'connection' })
          continue
        }
        if (attempt < MAX_RETRIES && replayable && retryableAfter(err, req.method)) {
          // A fresh hold from here: the controller moves a dead server's slices
          // only once its lease lapsed, whatever this request already waited.
          deadline = Math.max(deadline, Date.now() + holdMs)
          tried = tried ? [...tried, owner] : [owner]
          // Any newer map will not do: wait for one that routes the key
          // elsewhere (a read of a replicated slice may have another replica already).
          let next = table.map
          while (next && !router.routesElsewhere(next, key, read, tried) && Date.now() < deadline) {
            next = await table.waitNewer(next.generation, { timeoutMs: deadline - Date.now() })
          }
          if (next && router.routesElsewhere(next, key, read, tried)) {
            metrics.retries.inc({ reason: 'unreachable' })
            continue
          }
        }
        if (owner !== undefined && !SAFE.has(req.method) && !NOT_SENT_CODES.has(err.code)) {
          logger.warn({ server: owner, origin, method: req.method, err: { code: err.code, message: err.message } }, 'connection broke after a write was sent: its outcome is unknown')
          throw new WriteIndeterminateError(`the connection to app server ${owner} broke after the ${req.method} was sent (${err.code || err.message}): it may or may not have been applied; read the key to find out`, { cause: err })
        }
        logger.warn({ server: owner, origin, err: { code: err.code, message: err.message } }, 'app server unreachable')
        throw new UpstreamUnreachableError(`app server ${owner} at ${origin} is unreachable (${err.code || err.message})`, { cause: err })
      }
      if (outcome === null) return // committed: the answer streams to the client (counted when it closes)
      metrics.misdirected.inc()
      if (attempt >= MAX_RETRIES || !replayable) {
        throw new UpstreamUnavailableError(`slice ownership for key ${JSON.stringify(appKey)} is moving; retry the request`)
      }
      if (attempt === 0) deadline = Date.now() + holdMs
      tried = tried ? [...tried, owner] : [owner]
      if (read && router.routesElsewhere(table.map, key, read, tried)) {
        // One replica is behind or no longer holds the slice; another that
        // our map names may serve the read now, without waiting for a map.
        metrics.retries.inc({ reason: 'misdirected' })
        continue
      }
      // The server told us we are behind, or that it cannot admit the key yet:
      // a newer map decides; wait for it (bounded), then try whoever it names.
      await table.refresh()
      if (table.generation <= generation) await table.waitNewer(generation, { timeoutMs: deadline - Date.now() })
      if (table.generation <= generation && attempt > 0) {
        throw new UpstreamUnavailableError(`slice ownership for key ${JSON.stringify(appKey)} is moving; retry the request`)
      }
      metrics.retries.inc({ reason: 'misdirected' })
    }
  }

  // The headers every answer gets, per map and owner: built once, shared read-only.
  let extraFor = null
  let extraMap = null
  function responseHeadersFor (map, owner) {
    if (extraMap !== map) {
      extraMap = map
      extraFor = new Map()
    }
    let h = extraFor.get(owner)
    if (!h) {
      h = ['x-served-by', owner, 'x-chopper-generation', String(map.generation)]
      extraFor.set(owner, h)
    }
    return h
  }

  return function proxy (req, res) {
    // Per-request state in a closure, not properties added to `res`: new
    // properties on Node's own response objects cost more in its http code.
    const state = { started: performance.now(), upstream: null, failed: false }
    res.once('close', () => {
      abortUpstream(res, state.upstream)
      // A streamed body the app server answered before reading to its end:
      // discard the rest, or the client's keep-alive connection stalls (its
      // next request waits for a read nobody makes, until a timeout resets it).
      if (!req.complete) {
        req.unpipe()
        req.resume()
      }
      if (state.failed || !res.headersSent) return // errors are counted by code in fail()
      requestsFor(res.statusCode).inc()
      metrics.duration.observe((performance.now() - state.started) / 1e3)
    })
    const appKey = keyFrom(req)
    if (appKey === undefined) return fail(req, res, state, new MissingKeyError('missing key: pass ?key=K or an X-Chopper-Key header'))
    const key = sliceKey(appKey)
    const size = router.sizeFor(req)
    const map = table.map
    if (map === null || hasBody(req)) {
      forward(req, res, state, appKey, key, size).catch((err) => fail(req, res, state, err))
      return
    }
    const slot = router.pick(map, map.indexOf(key), isRead(req.method), size)
    if (slot === DEFER) { // LC*: every replica runs a long job; wait on the slow path
      forward(req, res, state, appKey, key, size).catch((err) => fail(req, res, state, err))
      return
    }
    // The common case, with no promise: one attempt on the server the map names.
    const owner = router.ids[slot]
    const origin = map.urlOf(owner)
    const generation = map.generation
    state.upstream = forwarder.attempt(origin, { method: req.method, path: req.url, headers: forwardHeaders(req, generation), body: bufferedBodyOf(req) }, res,
      responseHeadersFor(map, owner), (err, outcome) => {
        if (!err && outcome === null) return
        forward(req, res, state, appKey, key, size, { err, outcome, owner, origin, generation }).catch((e) => fail(req, res, state, e))
      }, router, slot, size)
  }
}

module.exports = { createProxyHandler, HOP_BY_HOP }
