'use strict'

const crypto = require('node:crypto')
const { InvalidArgumentError } = require('./errors')

/**
 * Signing a control call (docs/security.md): an HMAC-SHA256 of its method,
 * path with query, a timestamp, a one-time nonce and its body's SHA-256,
 * keyed by a token. The members sign with the cluster token; a client
 * (client/) signs its map reads with the read credential derived from it.
 * The receiver's side is core/cluster-auth.js. No dependencies beyond Node:
 * the client package ships this file.
 */

const HEADERS = Object.freeze({
  timestamp: 'x-chopper-timestamp',
  nonce: 'x-chopper-nonce',
  signature: 'x-chopper-signature'
})
// 'read': signed with the read credential, not the cluster token (GET and HEAD only)
const CREDENTIAL_HEADER = 'x-chopper-credential'
const MIN_TOKEN_LENGTH = 16
const EMPTY = Buffer.alloc(0)
const READ_PREFIX = 'chopper-read.'

/**
 * A cluster token option: undefined (unauthenticated) or a string of at
 * least 16 characters. The message names the option, never the value.
 * @returns {string|undefined}
 */
function validateToken (token, name = 'clusterToken') {
  if (token === undefined) return undefined
  if (typeof token !== 'string' || token.length < MIN_TOKEN_LENGTH) {
    throw new InvalidArgumentError(`invalid ${name}: expected a string of at least ${MIN_TOKEN_LENGTH} characters (the shared cluster secret, CHOPPER_CLUSTER_TOKEN)`)
  }
  return token
}

function bodyBytes (body) {
  if (body === undefined || body === null) return EMPTY
  if (Buffer.isBuffer(body)) return body
  if (typeof body === 'string') return Buffer.from(body, 'utf8')
  throw new InvalidArgumentError('invalid body: expected a string, a Buffer or undefined')
}

/**
 * The signed string. `context` (optional) binds more of the request than its
 * method, path and body, e.g. headers the receiver acts on; both sides must
 * compute it alike. Without one the string is the five lines only.
 */
function mac (token, method, path, timestamp, nonce, body, context) {
  const bodyHash = crypto.createHash('sha256').update(bodyBytes(body)).digest('hex')
  const h = crypto.createHmac('sha256', token)
  h.update(`${String(method).toUpperCase()}\n${path}\n${timestamp}\n${nonce}\n${bodyHash}`)
  if (context) h.update(`\n${context}`)
  return h.digest()
}

/**
 * Sign one request.
 * @param {{ token: string, method: string, path: string, body?: string|Buffer, now?: number, nonce?: string, context?: string }} request
 *   path: the path with its query, exactly as sent; body: its exact bytes
 * @returns {{ 'x-chopper-timestamp': string, 'x-chopper-nonce': string, 'x-chopper-signature': string }}
 */
function signRequest ({ token, method, path, body, now = Date.now(), nonce = crypto.randomBytes(12).toString('base64url'), context }) {
  if (validateToken(token, 'token') === undefined) throw new InvalidArgumentError('invalid token: expected the cluster token')
  const timestamp = String(Math.floor(now))
  return {
    [HEADERS.timestamp]: timestamp,
    [HEADERS.nonce]: nonce,
    [HEADERS.signature]: mac(token, method, path, timestamp, nonce, body, context).toString('base64url')
  }
}

/**
 * The read credential of a cluster (docs/security.md, "Clients"): derived
 * one way from the cluster token, so whoever holds it can read the map
 * (GET /v1/assignment) but cannot compute the token, and so cannot sign a
 * control call (register, renew, push, drain, move): the controller and the
 * members take it on GET and HEAD only. `chopper-read.` + 43 base64url
 * characters.
 * @param {string} clusterToken
 * @returns {string}
 */
function readCredential (clusterToken) {
  if (validateToken(clusterToken) === undefined) throw new InvalidArgumentError('invalid clusterToken: a read credential derives from the cluster token')
  return READ_PREFIX + crypto.createHmac('sha256', clusterToken).update('chopper read credential v1').digest('base64url')
}

/**
 * A readCredential() option: undefined or `chopper-read.` + 43 base64url characters.
 * @returns {string|undefined}
 */
function validateReadCredential (value, name = 'readCredential') {
  if (value === undefined) return undefined
  if (typeof value !== 'string' || !/^chopper-read\.[A-Za-z0-9_-]{43}$/.test(value)) {
    throw new InvalidArgumentError(`invalid ${name}: expected a read credential (chopper-read. and 43 base64url characters: readCredential(clusterToken) from @chopper/client)`)
  }
  return value
}

/**
 * Sign a map read with the read credential: signRequest's headers and
 * X-Chopper-Credential: read, which tells the receiver which key to check.
 */
function signRead ({ credential, method = 'GET', path, now, nonce }) {
  return { ...signRequest({ token: credential, method, path, now, nonce }), [CREDENTIAL_HEADER]: 'read' }
}

module.exports = { HEADERS, CREDENTIAL_HEADER, MIN_TOKEN_LENGTH, validateToken, bodyBytes, mac, signRequest, readCredential, validateReadCredential, signRead }
