'use strict'

/**
 * One error table for the whole project (fastify's lib/errors.js pattern).
 * Every error carries a stable `code`; the ones that reach HTTP carry `status`.
 * HTTP bodies are always `{ error: { code, message } }` (see toHttpBody).
 */
const TABLE = {
  InvalidArgumentError: ['CHOPPER_ERR_INVALID_ARG', 400],
  InvalidAssignmentError: ['CHOPPER_ERR_INVALID_ASSIGNMENT', 400],
  StaleGenerationError: ['CHOPPER_ERR_STALE_GENERATION', 409],
  MissingKeyError: ['CHOPPER_ERR_MISSING_KEY', 400],
  MalformedBodyError: ['CHOPPER_ERR_MALFORMED_BODY', 400],
  // a request head the data port refuses itself (frontend/fast-http.js): two Hosts (RFC 9112 3.2)
  MalformedRequestError: ['CHOPPER_ERR_MALFORMED_REQUEST', 400],
  NotFoundError: ['CHOPPER_ERR_NOT_FOUND', 404],
  MethodNotAllowedError: ['CHOPPER_ERR_METHOD_NOT_ALLOWED', 405],
  PayloadTooLargeError: ['CHOPPER_ERR_PAYLOAD_TOO_LARGE', 413],
  NotOwnerError: ['CHOPPER_ERR_NOT_OWNER', 421],
  LeaseExpiredError: ['CHOPPER_ERR_LEASE_EXPIRED', 421],
  FencedWriteError: ['CHOPPER_ERR_FENCED_WRITE', 421],
  NotPrimaryError: ['CHOPPER_ERR_NOT_PRIMARY', 421],
  NoAssignmentError: ['CHOPPER_ERR_NO_ASSIGNMENT', 503],
  UnknownServerError: ['CHOPPER_ERR_UNKNOWN_SERVER', 404],
  LastServerError: ['CHOPPER_ERR_LAST_SERVER', 409],
  UpstreamUnreachableError: ['CHOPPER_ERR_UPSTREAM_UNREACHABLE', 502],
  UpstreamUnavailableError: ['CHOPPER_ERR_UPSTREAM_UNAVAILABLE', 503],
  UpstreamTimeoutError: ['CHOPPER_ERR_UPSTREAM_TIMEOUT', 504],
  // an app server's answer the front end's HTTP/1.1 client cannot read (core/upstream-h1.js)
  UpstreamProtocolError: ['CHOPPER_ERR_UPSTREAM_PROTOCOL', 502],
  StoreUnavailableError: ['CHOPPER_ERR_STORE_UNAVAILABLE', 503],
  ReplicaUnavailableError: ['CHOPPER_ERR_REPLICA_UNAVAILABLE', 503],
  WriteIndeterminateError: ['CHOPPER_ERR_WRITE_INDETERMINATE', 503],
  // kv-cache: a replica asked this server for a key a write of this server holds
  // there, but another server's write holds it here too (apps/kv-cache/kv-reader.js).
  KeyHeldError: ['CHOPPER_ERR_KEY_HELD', 409],
  TooManyClientsError: ['CHOPPER_ERR_TOO_MANY_CLIENTS', 503],
  TimeoutError: ['CHOPPER_ERR_TIMEOUT', 504],
  // a member of the cluster answered a control-plane call with an error (core/json-client.js: err.response)
  PeerStatusError: ['CHOPPER_ERR_PEER_STATUS', 502],
  NotLeaderError: ['CHOPPER_ERR_NOT_LEADER', 503],
  StaleEpochError: ['CHOPPER_ERR_STALE_EPOCH', 409],
  // a map diff (core/map-diff.js) whose base is not the receiver's generation: the sender sends the full map
  DiffBaseError: ['CHOPPER_ERR_DIFF_BASE', 409],
  ImplausibleValueError: ['CHOPPER_ERR_IMPLAUSIBLE', 400],
  DeposedError: ['CHOPPER_ERR_DEPOSED', 503],
  // The authenticated control plane (core/cluster-auth.js, docs/security.md).
  UnauthenticatedError: ['CHOPPER_ERR_UNAUTHENTICATED', 401],
  ForbiddenError: ['CHOPPER_ERR_FORBIDDEN', 403],
  ReplayCacheFullError: ['CHOPPER_ERR_REPLAY_CACHE_FULL', 503],
  MemberConflictError: ['CHOPPER_ERR_ID_IN_USE', 409],
  // a lease stream (core/lease-stream-protocol.js) broke: a bad frame, or closed with renewals in flight
  LeaseStreamError: ['CHOPPER_ERR_LEASE_STREAM', 502],
  // @chopper/client (client/): a request after close()
  ClientClosedError: ['CHOPPER_ERR_CLIENT_CLOSED', 503],
  InternalError: ['CHOPPER_ERR_INTERNAL', 500]
}

class ChopperError extends Error {
  constructor (message, options) {
    super(message, options)
    this.name = 'ChopperError'
    this.code = 'CHOPPER_ERR'
    this.status = 500
  }
}

const errors = { ChopperError }
for (const [name, [code, status]] of Object.entries(TABLE)) {
  errors[name] = class extends ChopperError {
    constructor (message, options) {
      super(message, options)
      this.name = name
      this.code = code
      this.status = status
    }
  }
  Object.defineProperty(errors[name], 'name', { value: name })
}

/** Status for any error: ours carry it, body-parser's carry `status`/`statusCode`. */
function statusOf (err) {
  const s = err && (err.status || err.statusCode)
  return Number.isInteger(s) && s >= 400 && s < 600 ? s : 500
}

/** JSON body for an error; 5xx messages from foreign errors are not leaked. */
function toHttpBody (err) {
  const status = statusOf(err)
  if (err instanceof ChopperError) return { error: { code: err.code, message: err.message } }
  if (status === 413) return { error: { code: TABLE.PayloadTooLargeError[0], message: err.message } }
  if (status === 400) return { error: { code: TABLE.MalformedBodyError[0], message: err.message } }
  if (status < 500) return { error: { code: 'CHOPPER_ERR_HTTP_' + status, message: err.message } }
  return { error: { code: TABLE.InternalError[0], message: 'internal error' } }
}

/**
 * A value as an error message shows it: a string quoted (cut at `max`
 * characters), a number, boolean or null as itself, anything else by its
 * kind. Never walks into the value: a request can nest JSON deeper than
 * JSON.stringify's stack allows.
 */
function describeValue (v, max = 100) {
  if (typeof v === 'string') return JSON.stringify(v.length > max ? v.slice(0, max) + '…' : v)
  if (v === null || typeof v === 'number' || typeof v === 'boolean') return String(v)
  if (Array.isArray(v)) return 'an array'
  return v === undefined ? 'nothing' : 'an object'
}

module.exports = { ...errors, ERROR_TABLE: TABLE, statusOf, toHttpBody, describeValue }
