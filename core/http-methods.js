'use strict'

/**
 * How Chopper classifies request methods, in one place.
 *
 * - Safe (RFC 9110 9.2.1: GET, HEAD, OPTIONS): changes no state. A front end
 *   replays a safe request whose connection broke after it was sent; any
 *   other method may have applied, and is answered 503
 *   CHOPPER_ERR_WRITE_INDETERMINATE instead (docs/ownership.md). A handoff
 *   that drains writes (`handoffDrain: 'writes'`) waits for every request
 *   that is not safe.
 * - Read (GET, HEAD): may be served by any replica of a replicated slice;
 *   everything else goes to the slice's primary (docs/replication.md). A
 *   client's read credential signs reads only (core/cluster-auth.js), and a
 *   front end answers reads of `/healthz` and `/metrics` itself.
 */

/** @param {string} method upper case, as Node parses it */
function isSafe (method) {
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS'
}

/** @param {string} method upper case, as Node parses it */
function isRead (method) {
  return method === 'GET' || method === 'HEAD'
}

module.exports = { isSafe, isRead }
