'use strict'

const fs = require('node:fs')
const path = require('node:path')
const crypto = require('node:crypto')

/**
 * Signed control calls (core/cluster-auth.js): the fuzzer's side. With a
 * cluster token configured, a request is signed when it is sent (a
 * signature made when fast-check generated it could be stale by the time a
 * shrink replays it), unless it carries an `auth` fault, which says how to
 * spoil its signature:
 *
 *   none, partial             no signature headers, or only some    -> 401
 *   garbled, truncated,       a signature of the right form but     -> 403
 *   bad-timestamp, bad-nonce  wrong, cut short, or the other two
 *                             headers malformed
 *   wrong-token               signed with another cluster's token    -> 403
 *   skewed                    a timestamp outside the ±30 s window   -> 403
 *   tampered                  signed over another path or body       -> 403
 *   replay                    signed once, sent twice: the second    -> 403
 *                             (bodies that pass the signature but not validation)
 */

const AUTH_FILE = path.join(__dirname, '..', 'core', 'cluster-auth.js')
const FAULTS = ['none', 'partial', 'garbled', 'truncated', 'bad-timestamp', 'bad-nonce', 'wrong-token', 'skewed', 'tampered', 'replay']
const UNAUTHENTICATED = new Set(['none', 'partial'])
const MAX_SKEW_MS = 30000 // RequestVerifier's default window
const HEADER_NAMES = ['x-chopper-timestamp', 'x-chopper-nonce', 'x-chopper-signature']

/**
 * core/cluster-auth.js when it exists and signs requests; else null (the
 * signature cases are then skipped, and the run says so).
 */
function loadClusterAuth () {
  if (!fs.existsSync(AUTH_FILE)) return null
  const mod = require(AUTH_FILE)
  return typeof mod.signRequest === 'function' ? mod : null
}

/** The status an auth fault must get. */
function expectedStatus (fault) {
  return UNAUTHENTICATED.has(fault) ? 401 : 403
}

/**
 * A function turning a generated request into what goes on the wire: one
 * request, or two for a replay (the second expecting 403).
 * @param {{ token: string, signs: (req) => boolean, contextOf?: (req) => string|undefined }} options
 *   signs: whether the target verifies this request (control routes, kv fences)
 *   contextOf: extra signed context (kv-cache fences bind their headers)
 * @returns {(req) => object[]}
 */
function createSigner ({ token, signs, contextOf = () => undefined }) {
  const auth = loadClusterAuth()
  if (!auth) throw new Error('core/cluster-auth.js (signRequest) is not there: cannot sign')
  const other = crypto.randomBytes(24).toString('base64url') // another cluster's token
  const bodyOf = (req) => (req.body === undefined ? undefined : (Buffer.isBuffer(req.body) ? req.body : Buffer.from(req.body, 'utf8')))
  const strip = (headers) => Object.fromEntries(Object.entries(headers || {}).filter(([k]) => !HEADER_NAMES.includes(k.toLowerCase())))
  const sign = (req, extra = {}) => auth.signRequest({ token, method: req.method, path: req.path, body: bodyOf(req), context: contextOf(req), ...extra })

  return function prepare (req) {
    const fault = req.auth
    if (fault === undefined) return [signs(req) ? { ...req, headers: { ...strip(req.headers), ...sign(req) } } : req]
    const base = strip(req.headers)
    const expect = [expectedStatus(fault)]
    const wire = (h) => ({ ...req, headers: { ...base, ...h }, expectStatus: expect })
    const good = sign(req)
    switch (fault) {
      case 'none': return [wire({})]
      case 'partial': {
        const keep = HEADER_NAMES.filter((_, i) => (req.authSeed >> i) & 1).slice(0, 2)
        return [wire(Object.fromEntries(keep.map((k) => [k, good[k]])))]
      }
      case 'garbled': return [wire({ ...good, 'x-chopper-signature': crypto.randomBytes(32).toString('base64url') })]
      case 'truncated': return [wire({ ...good, 'x-chopper-signature': good['x-chopper-signature'].slice(0, (req.authSeed || 0) % 43) })]
      case 'bad-timestamp': return [wire({ ...good, 'x-chopper-timestamp': ['', '-1', 'abc', '1e12', String(2 ** 53), ' 1'][(req.authSeed || 0) % 6] })]
      case 'bad-nonce': return [wire({ ...good, 'x-chopper-nonce': ['', 'short', 'has space in it', 'a'.repeat(65), 'pad=ding==', '*/*/*/*/*'][(req.authSeed || 0) % 6] })]
      case 'wrong-token': return [wire(auth.signRequest({ token: other, method: req.method, path: req.path, body: bodyOf(req), context: contextOf(req) }))]
      case 'skewed': {
        const ahead = (req.authSeed || 0) % 2 === 0 ? 1 : -1
        return [wire(sign(req, { now: Date.now() + ahead * (MAX_SKEW_MS + 1000 + ((req.authSeed || 0) % 100000)) }))]
      }
      case 'tampered': {
        const signedAs = (req.authSeed || 0) % 2 === 0
          ? { ...req, path: req.path + (req.path.includes('?') ? '&' : '?') + 'x=1' }
          : { ...req, body: Buffer.concat([bodyOf(req) || Buffer.alloc(0), Buffer.from(' ')]) }
        return [wire(sign(signedAs))]
      }
      case 'replay': {
        // The first is a signed request refused by validation (any 4xx); the same bytes again must be a replay.
        const first = { ...req, headers: { ...base, ...good } }
        delete first.auth
        return [first, { ...first, expectStatus: [403], replayOf: true }]
      }
      default: throw new Error(`unknown auth fault ${fault}`)
    }
  }
}

module.exports = { loadClusterAuth, createSigner, expectedStatus, FAULTS, MAX_SKEW_MS }
