'use strict'

const { sliceKey } = require('../core/keyspace')
const {
  MissingKeyError, NoAssignmentError, UpstreamUnreachableError, UpstreamUnavailableError,
  UpstreamTimeoutError, PayloadTooLargeError
} = require('../core/errors')
const { defaultKeyFrom } = require('../core/request-key')

// RFC 9110 7.6.1 connection-specific headers are never forwarded.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host'])
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])
// Nothing reached the app server: any replayable request may be sent elsewhere.
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH'])
// A request may have reached the app server before its connection broke: only
// methods that may be repeated are retried (RFC 9110 9.2.2).
const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS'])
// A key can meet several handoffs in a row (a hot slice moved twice): retry a
// few times, always within the hold deadline.
const MAX_RETRIES = 4

function retryableAfter (err, method) {
  return NOT_SENT_CODES.has(err.code) || IDEMPOTENT.has(method)
}

function forwardHeaders (req, generation) {
  const out = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (!HOP_BY_HOP.has(name)) out[name] = value
  }
  out['x-forwarded-for'] = req.headers['x-forwarded-for'] ? `${req.headers['x-forwarded-for']}, ${req.socket.remoteAddress}` : req.socket.remoteAddress
  if (req.headers.host) out['x-forwarded-host'] = req.headers.host
  out['x-chopper-generation'] = String(generation)
  return out
}

function hasBody (req) {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] || 0) > 0
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
 * The front end's data path: key -> fingerprint32 -> binary search -> forward.
 * On 421 (our map is stale, the slice is being handed off, or the owner's
 * lease ran out) or an unreachable owner (killed, or gone after a drain), wait
 * up to `holdMs` for a newer map (a push wakes us; we also pull) and retry on
 * the owner it names, when the request can be replayed (no body, or a body
 * small enough to have been buffered) and, after a broken connection, only
 * when its method is idempotent. So a request that meets a handoff or a dead
 * server is delayed, not failed.
 */
function createProxyHandler ({ table, forwarder, metrics, keyFrom = defaultKeyFrom, bufferLimit, holdMs = 3000, logger }) {
  return async function proxy (req, res) {
    const started = process.hrtime.bigint()
    const appKey = keyFrom(req)
    if (appKey === undefined) throw new MissingKeyError('missing key: pass ?key=K or an X-Chopper-Key header')
    const key = sliceKey(appKey)
    if (!table.map) await table.refresh()
    if (!table.map) throw new NoAssignmentError('no slice assignment yet: the controller has not pushed one')

    let body
    let replayable = true
    if (hasBody(req)) {
      const length = Number(req.headers['content-length'])
      if (Number.isFinite(length) && length <= bufferLimit) {
        body = await bufferBody(req, bufferLimit)
      } else {
        body = req // streamed through; cannot be replayed
        replayable = false
      }
    }

    let upstream
    let owner
    let deadline = 0
    for (let attempt = 0; ; attempt++) {
      const map = table.map
      owner = map.ownerOf(key)
      const origin = map.urlOf(owner)
      const generation = map.generation
      try {
        upstream = await forwarder.request(origin, { method: req.method, path: req.originalUrl, headers: forwardHeaders(req, generation), body })
      } catch (err) {
        metrics.upstreamErrors.inc({ server: owner, code: err.code || 'UNKNOWN' })
        if (TIMEOUT_CODES.has(err.code)) throw new UpstreamTimeoutError(`app server ${owner} did not answer in time`, { cause: err })
        if (attempt === 0 && replayable && !NOT_SENT_CODES.has(err.code) && IDEMPOTENT.has(req.method)) {
          // A broken connection, not a refused one: most often a keep-alive
          // socket the server had just closed. Try the same owner once more.
          deadline = Date.now() + holdMs
          metrics.retries.inc({ reason: 'connection' })
          continue
        }
        if (attempt < MAX_RETRIES && replayable && retryableAfter(err, req.method)) {
          // The owner may be dead or gone: wait for a map that routes elsewhere
          // (the controller moves a silent server's slices once its lease ran out).
          // A fresh hold from here: the controller moves a dead server's slices
          // only once its lease lapsed, whatever this request already waited.
          deadline = Math.max(deadline, Date.now() + holdMs)
          // Any newer map will not do: wait for one that routes the key elsewhere.
          let next = table.map
          while (next && next.ownerOf(key) === owner && Date.now() < deadline) {
            next = await table.waitNewer(next.generation, { timeoutMs: deadline - Date.now() })
          }
          if (next && next.ownerOf(key) !== owner) {
            metrics.retries.inc({ reason: 'unreachable' })
            continue
          }
        }
        logger.warn({ server: owner, origin, err: { code: err.code, message: err.message } }, 'app server unreachable')
        throw new UpstreamUnreachableError(`app server ${owner} at ${origin} is unreachable (${err.code || err.message})`, { cause: err })
      }
      if (upstream.statusCode !== 421) break
      upstream.body.resume()
      metrics.misdirected.inc()
      if (attempt >= MAX_RETRIES || !replayable) {
        throw new UpstreamUnavailableError(`slice ownership for key ${JSON.stringify(appKey)} is moving; retry the request`)
      }
      if (attempt === 0) deadline = Date.now() + holdMs
      // The server told us we are behind, or that it cannot admit the key yet:
      // a newer map decides; wait for it (bounded), then try whoever it names.
      await table.refresh()
      if (table.generation <= generation) await table.waitNewer(generation, { timeoutMs: deadline - Date.now() })
      if (table.generation <= generation && attempt > 0) {
        throw new UpstreamUnavailableError(`slice ownership for key ${JSON.stringify(appKey)} is moving; retry the request`)
      }
      metrics.retries.inc({ reason: 'misdirected' })
    }

    res.status(upstream.statusCode)
    for (const [name, value] of Object.entries(upstream.headers)) {
      if (!HOP_BY_HOP.has(name) && value !== undefined) res.setHeader(name, value)
    }
    res.setHeader('X-Served-By', owner)
    res.setHeader('X-Chopper-Generation', String(table.generation))
    // Plain pipe, not stream.pipeline: pipeline allocates an AbortSignal (and a
    // DOMException) per call, which showed up at ~5% of a front end's CPU profile.
    const { body: upstreamBody, statusCode } = upstream
    upstreamBody.once('error', (err) => {
      logger.warn({ server: owner, err: { code: err.code, message: err.message } }, 'upstream body failed mid-stream')
      res.destroy(err)
    })
    res.once('close', () => {
      if (!res.writableFinished) upstreamBody.destroy()
      metrics.requests.inc({ code: String(statusCode) })
      metrics.duration.observe(Number(process.hrtime.bigint() - started) / 1e9)
    })
    upstreamBody.pipe(res)
  }
}

module.exports = { createProxyHandler, HOP_BY_HOP }
