'use strict'

const crypto = require('node:crypto')
const express = require('express')
const { InvalidArgumentError, UnauthenticatedError, ForbiddenError, ReplayCacheFullError } = require('./errors')
const { isRead } = require('./http-methods')
const { HEADERS, CREDENTIAL_HEADER, MIN_TOKEN_LENGTH, validateToken, bodyBytes, mac, signRequest, readCredential } = require('./request-signing')

/**
 * The authenticated control plane (docs/security.md), the receiver's side
 * (signing: core/request-signing.js): every control call
 * carries an HMAC-SHA256 of its method, path with query, a timestamp, a
 * one-time nonce and its body's SHA-256, keyed by the cluster token
 * (CHOPPER_CLUSTER_TOKEN). A receiver accepts a call only when the signature
 * matches, the timestamp is within ±maxSkewMs of its own clock, and the nonce
 * is new within that window: a captured call cannot be replayed, nor be
 * altered in its path or body.
 */

const MAP_HEADER = 'x-chopper-map-signature'
const MAP_SIGNATURE = /^(\d{1,15})\.([A-Za-z0-9_-]{43})$/
const TIMESTAMP = /^\d{1,15}$/
const NONCE = /^[A-Za-z0-9_-]{8,64}$/
const SIGNATURE = /^[A-Za-z0-9_-]{43}$/ // 32 bytes, base64url without padding

/**
 * A map push signed once for every target (docs/security.md, "Signed maps"):
 * `X-Chopper-Map-Signature: <ms>.<HMAC(token, "map", ms, SHA-256(body))>`.
 * It carries no nonce: a replayed map or diff is harmless, as members refuse
 * any generation not above theirs and any diff not from theirs, and the
 * timestamp bounds a replay to the clock window. `bodyHash` (hex SHA-256 of
 * the body) lets the pusher hash a body once and re-sign it as time passes.
 * @returns {string} the header value
 */
function signMap ({ token, bodyHash, now = Date.now() }) {
  const ts = String(Math.floor(now))
  return `${ts}.${mapMac(token, ts, bodyHash).toString('base64url')}`
}

/** The MAC of a signed map: over its timestamp and its body's hash, not the request. */
function mapMac (token, timestamp, bodyHash) {
  return crypto.createHmac('sha256', token).update(`map\n${timestamp}\n${bodyHash}`).digest()
}

/** Hex SHA-256 of a body, as signMap takes it. */
function hashBody (body) {
  return crypto.createHash('sha256').update(bodyBytes(body)).digest('hex')
}

/**
 * The receiver's side: checks signatures, the clock window and nonces.
 * One verifier per listener: its nonce cache is what refuses replays there.
 */
class RequestVerifier {
  #token // never on the object's enumerable state (a logged verifier must not leak it)

  /**
   * @param {{ token: string, maxSkewMs?: number, maxNonces?: number, now?: () => number }} options
   *   now: wall-clock ms (the timestamps are the senders' wall clocks)
   */
  constructor ({ token, maxSkewMs = 30000, maxNonces = 100000, now = Date.now } = {}) {
    if (validateToken(token, 'token') === undefined) throw new InvalidArgumentError('invalid token: expected the cluster token')
    if (!Number.isInteger(maxSkewMs) || maxSkewMs < 1) throw new InvalidArgumentError('invalid maxSkewMs: expected an integer >= 1')
    if (!Number.isInteger(maxNonces) || maxNonces < 1) throw new InvalidArgumentError('invalid maxNonces: expected an integer >= 1')
    if (typeof now !== 'function') throw new InvalidArgumentError('invalid now: expected a function returning ms')
    this.#token = token
    this.maxSkewMs = maxSkewMs
    this.maxNonces = maxNonces
    this.now = now
    // nonce -> the time (ms, receiver clock) after which its timestamp is out
    // of the window, so the nonce need not be remembered any more. Insertion
    // order is roughly expiry order (timestamps vary by the senders' skew).
    this.nonces = new Map()
    this.stats = { accepted: 0, unauthenticated: 0, forbidden: 0, replayed: 0, full: 0 }
  }

  /**
   * Throws UnauthenticatedError (401) when the signature headers are missing,
   * ForbiddenError (403) when the signature is wrong, the timestamp outside
   * the window or the nonce already seen, ReplayCacheFullError (503) when too
   * many signed requests arrived within one window to remember their nonces.
   * @param {{ method: string, path: string, headers: object, rawBody?: Buffer, context?: string }} request
   *   path: the path with its query as received (Express: req.originalUrl)
   */
  verify ({ method, path, headers, rawBody, context }) {
    const timestamp = headers[HEADERS.timestamp]
    const nonce = headers[HEADERS.nonce]
    const signature = headers[HEADERS.signature]
    if (timestamp === undefined || nonce === undefined || signature === undefined) {
      this.stats.unauthenticated++
      throw new UnauthenticatedError('unauthenticated control call: sign it with the cluster token (X-Chopper-Timestamp, X-Chopper-Nonce, X-Chopper-Signature)')
    }
    const forbid = (message) => {
      this.stats.forbidden++
      return new ForbiddenError(message)
    }
    if (typeof timestamp !== 'string' || !TIMESTAMP.test(timestamp)) throw forbid('malformed X-Chopper-Timestamp: expected ms since the epoch')
    if (typeof nonce !== 'string' || !NONCE.test(nonce)) throw forbid('malformed X-Chopper-Nonce: expected 8 to 64 base64url characters')
    if (typeof signature !== 'string' || !SIGNATURE.test(signature)) throw forbid('malformed X-Chopper-Signature: expected an HMAC-SHA256 in base64url')
    const now = this.now()
    const ts = Number(timestamp)
    if (Math.abs(now - ts) > this.maxSkewMs) {
      throw forbid(`stale or future timestamp: ${Math.round((now - ts) / 1000)} s from this clock, outside ±${this.maxSkewMs / 1000} s (replayed, or clocks out of sync)`)
    }
    const expected = mac(this.#token, method, path, timestamp, nonce, rawBody, context)
    if (!crypto.timingSafeEqual(expected, Buffer.from(signature, 'base64url'))) {
      throw forbid('bad signature: not signed with this cluster\'s token, or the method, path or body changed on the way')
    }
    // Only signed requests reach the cache, so an outsider cannot fill it.
    if (this.nonces.has(nonce)) {
      this.stats.replayed++
      throw forbid('replayed request: this nonce was already used within the window')
    }
    this.#remember(nonce, ts + this.maxSkewMs, now)
    this.stats.accepted++
  }

  /**
   * Check a signed map push (signMap): the signature matches the body and its
   * timestamp is within the clock window. No nonce: see signMap.
   * @param {{ headers: object, rawBody?: Buffer }} request
   */
  verifyMap ({ headers, rawBody }) {
    const forbid = (message) => {
      this.stats.forbidden++
      return new ForbiddenError(message)
    }
    const value = headers[MAP_HEADER]
    const m = typeof value === 'string' ? MAP_SIGNATURE.exec(value) : null
    if (!m) throw forbid('malformed X-Chopper-Map-Signature: expected <ms>.<HMAC-SHA256 in base64url>')
    const now = this.now()
    if (Math.abs(now - Number(m[1])) > this.maxSkewMs) {
      throw forbid(`stale or future map signature: ${Math.round((now - Number(m[1])) / 1000)} s from this clock, outside ±${this.maxSkewMs / 1000} s`)
    }
    if (!crypto.timingSafeEqual(mapMac(this.#token, m[1], hashBody(rawBody)), Buffer.from(m[2], 'base64url'))) {
      throw forbid('bad map signature: not signed with this cluster\'s token, or the body changed on the way')
    }
    this.stats.accepted++
  }

  #remember (nonce, expiresAt, now) {
    // Cheap pruning from the front; a full sweep only when the cache is full.
    for (const [n, t] of this.nonces) {
      if (t >= now) break
      this.nonces.delete(n)
    }
    if (this.nonces.size >= this.maxNonces) {
      for (const [n, t] of this.nonces) if (t < now) this.nonces.delete(n)
      if (this.nonces.size >= this.maxNonces) {
        this.stats.full++
        throw new ReplayCacheFullError(`more than ${this.maxNonces} signed requests within ${this.maxSkewMs / 1000} s: refused rather than forget a nonce; retry`)
      }
    }
    this.nonces.set(nonce, expiresAt)
  }
}

/**
 * Express middleware verifying each request with `verifier` (after the body
 * parser: see jsonWithRawBody); a pass-through when `verifier` is null (no
 * cluster token configured). With `maps`, a map-signed push (signMap) is
 * taken too. With `reads` (readVerifier), a GET or HEAD signed with the read
 * credential (X-Chopper-Credential: read) is taken too; any other call
 * claiming it is refused, 403. Errors go to the app's JSON error handler.
 */
function verifyMiddleware (verifier, { maps = false, reads = null } = {}) {
  if (!verifier) return function unauthenticated (req, res, next) { next() }
  return function verifySignature (req, res, next) {
    try {
      if (req.headers[CREDENTIAL_HEADER] !== undefined) {
        if (!reads || req.headers[CREDENTIAL_HEADER] !== 'read' || !isRead(req.method)) {
          verifier.stats.forbidden++
          throw new ForbiddenError('a read credential signs map reads (GET) only: this call takes the cluster token')
        }
        reads.verify({ method: req.method, path: req.originalUrl, headers: req.headers, rawBody: req.rawBody })
      } else if (maps && req.headers[MAP_HEADER] !== undefined) {
        // A map push may be signed once for all targets instead (signMap).
        verifier.verifyMap({ headers: req.headers, rawBody: req.rawBody })
      } else {
        verifier.verify({ method: req.method, path: req.originalUrl, headers: req.headers, rawBody: req.rawBody })
      }
      next()
    } catch (err) {
      next(err)
    }
  }
}

/**
 * The verifier of calls signed with the cluster's read credential
 * (core/request-signing.js readCredential), or null without a token.
 * @param {string|undefined} clusterToken
 */
function readVerifier (clusterToken) {
  return clusterToken === undefined ? null : new RequestVerifier({ token: readCredential(clusterToken) })
}

/**
 * express.json() that also keeps the exact bytes it parsed in `req.rawBody`,
 * which is what the signature covers (re-serializing req.body would not give
 * the same bytes). A body the parser does not read (not JSON) counts as empty.
 */
function jsonWithRawBody (limit) {
  return express.json({ limit, verify: (req, res, buf) => { req.rawBody = buf } })
}

/**
 * The one warning a component logs when it runs without a token.
 * @param {import('pino').Logger} logger
 */
function warnUnauthenticated (logger) {
  logger.warn('control plane unauthenticated: set clusterToken / CHOPPER_CLUSTER_TOKEN')
}

module.exports = { signRequest, signMap, hashBody, RequestVerifier, verifyMiddleware, jsonWithRawBody, validateToken, warnUnauthenticated, readVerifier, HEADERS, MAP_HEADER, MIN_TOKEN_LENGTH }
