'use strict'

const crypto = require('node:crypto')
const { LeaseStreamError } = require('./errors')

/**
 * The lease stream's wire format (docs/control-plane.md, "Lease streams").
 *
 * A member opens it with one signed HTTP/1.1 request,
 * `GET /v1/servers/:id/lease-stream` with `Upgrade: chopper-lease/1`; the
 * controller answers `101 Switching Protocols` and a nonce of its own. From
 * then on each side writes frames, one per line: the JSON of a message, and
 * with a cluster token a tab and its MAC. JSON text holds no raw tab or
 * newline, so a line is a frame.
 *
 * The MAC is HMAC-SHA256 under a key of this connection alone,
 * HMAC(token, "lease-stream", id, the request's nonce, the controller's
 * nonce), over a direction byte ("m" member to controller, "c" back) and the
 * JSON. The upgrade is verified as any signed call (clock window, nonce never
 * seen), so a captured stream cannot be replayed on another connection; the
 * member's `seq` must rise, and the member takes an answer only for a seq it
 * is waiting on, so no frame is taken twice within one.
 *
 * Messages, member to controller:
 *  - `{ seq, register: { url, controlUrl, generation } }` a registration, as
 *    `POST /v1/servers` with the stream's id; only from a member whose
 *    upgrade named the feature `register` (the controller then opens a stream
 *    for an id it does not know yet, which a renewal there answers 404);
 *  - `{ seq, generation, drainedGeneration }` a renewal;
 *  - `{ seq, re, load }` (or `{ seq, re, error }`) the answer to load request `re`.
 * Controller to member:
 *  - `{ seq, lease, assignment? | diff? }` (or `{ seq, status, error, leader? }`) the answer to registration or renewal `seq`;
 *  - `{ req, load: { instance?, seq? } }` a load request (`req` rises), acknowledging
 *    the last report used, as `GET /v1/load?instance=&seq=` does; only to a
 *    member whose upgrade named the feature (`X-Chopper-Stream-Features: load`);
 *  - `{ req, push: { bytes, gzip, generation, base? }, sig? }` and then `bytes`
 *    raw bytes: a map or diff push, as `PUT <controlUrl>/v1/assignment` with
 *    that body (gzipped when `gzip`), `X-Chopper-Map-Signature: sig` and the
 *    generation (and a diff's base) in `X-Chopper-Generation` (`-Base`) would be; answered
 *    `{ seq, re, accepted, generation, drainedGeneration }` or
 *    `{ seq, re, status, error, generation? }`. Only to a member that named
 *    the feature `push`. The body is signed once for every member (signMap),
 *    not under the connection's key: one hash of a large map serves all.
 */

const PROTOCOL = 'chopper-lease/1'
const STREAM_NONCE_HEADER = 'x-chopper-stream-nonce'
// What a member does over its stream besides renewals: "register", "load" (its load reports), "push" (takes map pushes).
const FEATURES_HEADER = 'x-chopper-stream-features'
const MAX_FRAME = 64 * 1024 // a member's frame is ~60 bytes; an answer carries at most routes' INLINE_MAP_BYTES
const MAX_BODY = 64 * 1024 * 1024 // a pushed map, as the control port's body limit
const TAB = 9
const NL = 10
const NONCE = /^[A-Za-z0-9_-]{16,64}$/

/**
 * The per-connection MAC key, as a KeyObject (each frame's HMAC then skips
 * importing it); null without a token.
 * @returns {crypto.KeyObject|null}
 */
function streamKey (token, id, memberNonce, controllerNonce) {
  if (token === undefined) return null
  return crypto.createSecretKey(crypto.createHmac('sha256', token).update(`lease-stream\n${id}\n${memberNonce}\n${controllerNonce}`).digest())
}

/** The frame's MAC in base64url, as it goes on the wire: no Buffer of its own. */
function frameMac (key, direction, json) {
  const hmac = crypto.createHmac('sha256', key)
  return (typeof json === 'string' ? hmac.update(direction + json) : hmac.update(direction).update(json)).digest('base64url')
}

/** Whether strings `a` and `b` (MACs, base64url) are equal, in time that does not depend on where they differ. */
function sameMac (a, b) {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return diff === 0
}

/**
 * One frame: `json` (a string or Buffer of JSON) and, with a key, its MAC.
 * A string gives a string (written without a Buffer of its own: the common
 * answer, a lease alone), a Buffer a Buffer (an answer carrying a map).
 * @param {crypto.KeyObject|null} key
 * @param {'m'|'c'} direction
 * @returns {string|Buffer}
 */
function encodeFrame (key, direction, json) {
  const tail = key ? `\t${frameMac(key, direction, json)}\n` : '\n'
  return typeof json === 'string' ? json + tail : Buffer.concat([json, Buffer.from(tail)])
}

/**
 * Splits a byte stream into frames and checks their MACs. `push(chunk)`
 * returns the messages the chunk completed, parsed; it throws
 * LeaseStreamError on an oversized, unparsable or unauthenticated frame,
 * after which the connection is not to be trusted (the caller closes it).
 *
 * With `bodies`, a message naming `push.bytes` is followed by that many raw
 * bytes (a map push, core/lease-stream-protocol.js), returned as `msg.body`;
 * they are not under the frame's MAC but under the map's own signature.
 */
class FrameReader {
  /** @param {{ key: crypto.KeyObject|null, direction: 'm'|'c', bodies?: boolean }} options the direction of the frames read */
  constructor ({ key, direction, bodies = false }) {
    this.key = key
    this.direction = direction
    this.bodies = bodies
    this.pending = null
    this.body = null // { msg, need, parts, have } while a push's body is read
  }

  push (chunk) {
    let buf = this.pending ? Buffer.concat([this.pending, chunk]) : chunk
    this.pending = null
    const out = []
    for (;;) {
      if (this.body) {
        const b = this.body
        const take = Math.min(b.need - b.have, buf.length)
        b.parts.push(buf.subarray(0, take))
        b.have += take
        buf = buf.subarray(take)
        if (b.have < b.need) break
        b.msg.body = b.parts.length === 1 ? Buffer.from(b.parts[0]) : Buffer.concat(b.parts, b.need)
        out.push(b.msg)
        this.body = null
        continue
      }
      const nl = buf.indexOf(NL)
      if (nl < 0) break
      const msg = this.#frame(buf.subarray(0, nl))
      buf = buf.subarray(nl + 1)
      const bytes = this.bodies && msg.push ? msg.push.bytes : undefined
      if (bytes === undefined) {
        out.push(msg)
        continue
      }
      if (!Number.isSafeInteger(bytes) || bytes < 0 || bytes > MAX_BODY) throw new LeaseStreamError(`lease stream push of ${bytes} bytes: expected 0 to ${MAX_BODY}`)
      this.body = { msg, need: bytes, parts: [], have: 0 }
    }
    if (!this.body && buf.length > MAX_FRAME) throw new LeaseStreamError(`lease stream frame over ${MAX_FRAME} bytes`)
    if (buf.length > 0) this.pending = Buffer.from(buf)
    return out
  }

  #frame (line) {
    let json = line
    if (this.key) {
      const tab = line.lastIndexOf(TAB)
      if (tab < 0) throw new LeaseStreamError('lease stream frame without a MAC')
      json = line.subarray(0, tab)
      if (!sameMac(line.toString('latin1', tab + 1), frameMac(this.key, this.direction, json))) throw new LeaseStreamError('lease stream frame with a bad MAC')
    }
    let msg
    try {
      msg = JSON.parse(json.toString('utf8'))
    } catch (err) {
      throw new LeaseStreamError(`lease stream frame is not a JSON object: ${err.message}`)
    }
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) throw new LeaseStreamError('lease stream frame is not a JSON object: not an object')
    return msg
  }
}

/** A fresh controller nonce for the 101 answer. */
function newStreamNonce () {
  return crypto.randomBytes(18).toString('base64url')
}

module.exports = { PROTOCOL, STREAM_NONCE_HEADER, FEATURES_HEADER, MAX_FRAME, NONCE, streamKey, encodeFrame, FrameReader, newStreamNonce }
