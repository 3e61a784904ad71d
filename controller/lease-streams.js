'use strict'

const { NotFoundError, NotLeaderError, UnknownServerError, LeaseStreamError, TimeoutError, PeerStatusError, statusOf, toHttpBody } = require('../core/errors')
const { HEADERS, MAP_HEADER } = require('../core/cluster-auth')
const { PROTOCOL, STREAM_NONCE_HEADER, FEATURES_HEADER, NONCE, streamKey, encodeFrame, FrameReader, newStreamNonce } = require('../core/lease-stream-protocol')
const { encode } = require('./member-calls')

const PATH = /^\/v1\/servers\/([A-Za-z0-9._-]{1,128})\/lease-stream$/
const EMPTY = Buffer.alloc(0)
const MAX_BUFFERED = 1024 * 1024 // answers a member does not read: it is gone or stuck
const IDLE_MS = 30000 // no frame for this long (a renewal comes at least every few seconds): closed

/**
 * The controller's end of the lease streams (core/lease-stream-protocol.js,
 * docs/control-plane.md): each member renews over one long-lived connection
 * instead of one HTTP request per renewal. A renewal frame is answered
 * exactly as `POST /v1/servers/:id/lease` is, by the same `renew`, but
 * without parsing HTTP, routing or verifying a request signature per call:
 * about a third of the CPU (bench/renewal-cost.js). A member may register
 * over it too (a `register` frame, answered as `POST /v1/servers`), so its
 * first call opens the one connection it keeps.
 *
 * Returns the http server's 'upgrade' listener and `close()`.
 * @param {object} c the controller's shared state
 * @param {{ verifier: import('../core/cluster-auth').RequestVerifier|null, renew: (id: string, body: object) => [object, object|null], register: (body: object) => [object, object|null] }} calls
 */
function createLeaseStreams (c, { verifier, renew, register }) {
  const token = c.opts.clusterToken
  const open = new Map() // member id -> its socket (a newer stream replaces an older one)
  const all = new Set() // every stream's socket, claimed or not
  const streams = new WeakMap() // socket -> { socket, key, features, lastReq, pending }
  c.counts.streams = { opened: 0, registrations: 0, renewals: 0, refused: 0, broken: 0, refusedBy: {} } // refusedBy: code -> count

  function leaderHint () {
    return c.election && c.election.leader && c.election.leader.url !== c.url ? c.election.leader.url : null
  }

  /** An HTTP answer to an upgrade refused: JSON error, then close. */
  function refuse (socket, err) {
    if (err instanceof NotLeaderError) c.m.standbyRefusals.inc()
    c.counts.streams.refused++
    c.counts.streams.refusedBy[err.code] = (c.counts.streams.refusedBy[err.code] || 0) + 1
    const body = Buffer.from(JSON.stringify(toHttpBody(err)))
    const leader = err instanceof NotLeaderError ? leaderHint() : null
    socket.end(`HTTP/1.1 ${statusOf(err)} Refused\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${body.length}\r\n` +
      `${leader ? `x-chopper-leader: ${leader}\r\n` : ''}connection: close\r\n\r\n${body}`)
  }

  function upgrade (req, socket, head) {
    socket.on('error', () => {}) // a reset member: 'close' follows
    const m = PATH.exec(req.url)
    const wanted = typeof req.headers.upgrade === 'string' && req.headers.upgrade.toLowerCase() === PROTOCOL
    if (!m || req.method !== 'GET' || !wanted) return refuse(socket, new NotFoundError(`no upgrade to ${req.headers.upgrade} at ${req.method} ${req.url}`))
    if (!c.leading()) return refuse(socket, new NotLeaderError(`controller ${c.controllerId} is a standby`))
    try {
      if (verifier) verifier.verify({ method: 'GET', path: req.url, headers: req.headers, rawBody: EMPTY })
    } catch (err) {
      return refuse(socket, err)
    }
    const id = m[1]
    // What else the member serves over its stream ("load" reports, "push"es), so the controller
    // need not call it; "register": it registers over the stream, so its id need not be known yet.
    const features = new Set(String(req.headers[FEATURES_HEADER] || '').split(',').map((f) => f.trim()))
    if (!c.servers.has(id) && !features.has('register')) return refuse(socket, new UnknownServerError(`unknown app server ${id}: register first`))
    const memberNonce = req.headers[HEADERS.nonce]
    if (verifier && !NONCE.test(memberNonce)) return refuse(socket, new LeaseStreamError('a lease stream needs an X-Chopper-Nonce of 16 to 64 base64url characters'))
    const nonce = newStreamNonce()
    const key = streamKey(token, id, memberNonce, nonce)
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: ${PROTOCOL}\r\nconnection: Upgrade\r\n${STREAM_NONCE_HEADER}: ${nonce}\r\n\r\n`)
    socket.setNoDelay(true)
    socket.lastFrameAt = Date.now()
    const stream = { socket, key, features, lastReq: 0, pending: new Map() }
    streams.set(socket, stream)
    all.add(socket)
    c.counts.streams.opened++
    // The stream serves `id` (pushes, load requests) from its first answered
    // registration or renewal on, replacing an older one: not before, or a
    // second process with the same id, which the registration refuses (409),
    // would cut the live member's stream each time it tried.
    const claim = () => {
      const prior = open.get(id)
      if (prior === socket) return
      if (prior) prior.destroy()
      open.set(id, socket)
    }
    socket.on('close', () => {
      all.delete(socket)
      if (open.get(id) === socket) open.delete(id)
      for (const p of stream.pending.values()) p.settle(new LeaseStreamError(`lease stream of ${id} closed with a request in flight`))
      stream.pending.clear()
    })

    const reader = new FrameReader({ key, direction: 'm' })
    let lastSeq = -1
    const broken = (err) => {
      c.counts.streams.broken++
      c.log.warn({ err, server: id }, 'lease stream closed: bad frame')
      socket.destroy()
    }
    const onData = (chunk) => {
      let messages
      socket.lastFrameAt = Date.now()
      try {
        messages = reader.push(chunk)
      } catch (err) {
        return broken(err)
      }
      for (const msg of messages) {
        // A replayed or reordered frame within this connection (its key is this connection's alone).
        if (!Number.isSafeInteger(msg.seq) || msg.seq <= lastSeq) return broken(new LeaseStreamError(`lease stream seq ${msg.seq} not above ${lastSeq}`))
        lastSeq = msg.seq
        if (msg.re !== undefined) {
          // The answer to a request of ours (a load report, a push).
          const p = stream.pending.get(msg.re)
          if (p) p.settle(null, msg)
          continue
        }
        let out
        let ascii = false // written as latin1 (no UTF-8 pass): only for an answer of numbers
        let last = false
        try {
          if (!c.leading()) {
            c.m.standbyRefusals.inc()
            last = true
            throw new NotLeaderError(`controller ${c.controllerId} is a standby`)
          }
          let fields, map
          if (msg.register !== undefined) {
            // A new id cuts no one's stream: claimed first, so the pushes its batch sends come this way.
            if (!c.servers.has(id)) claim()
            ;[fields, map] = register({ ...msg.register, id })
            c.counts.streams.registrations++
          } else {
            ;[fields, map] = renew(id, msg)
            c.counts.streams.renewals++
          }
          claim()
          // Most answers are a lease alone: a string, no Buffer of its own.
          if (map) {
            out = encode({ seq: msg.seq, ...fields }, map)
          } else {
            // Spliced rather than spread into a new object: this runs for every renewal.
            const rest = JSON.stringify(fields)
            out = rest.length > 2 ? `{"seq":${msg.seq},${rest.slice(1)}` : `{"seq":${msg.seq}}`
            ascii = true // the fields are a lease: numbers only
          }
        } catch (err) {
          const status = statusOf(err)
          if (status >= 500 && !(err instanceof NotLeaderError)) c.log.error({ err, server: id }, 'lease stream call failed')
          const leader = err instanceof NotLeaderError ? leaderHint() : null
          out = JSON.stringify({ seq: msg.seq, status, ...toHttpBody(err), ...(leader ? { leader } : {}) })
        }
        socket.write(encodeFrame(key, 'c', out), ascii ? 'latin1' : 'utf8')
        if (last) return socket.end()
        if (socket.writableLength > MAX_BUFFERED) return broken(new LeaseStreamError('member does not read its lease stream'))
      }
    }
    if (head && head.length > 0) onData(head)
    socket.on('data', onData)
  }

  // Idle streams (a member gone without closing: a cut cable) are swept
  // rather than timed each: re-arming a timer per frame costs more than the frame.
  const sweep = setInterval(() => {
    const before = Date.now() - IDLE_MS
    for (const socket of all) if (socket.lastFrameAt < before) socket.destroy()
  }, IDLE_MS / 3)
  sweep.unref()

  /**
   * Send request `message` (with `body` after it, for a push) to member `id`
   * over its stream: resolves the answer message; rejects on an error answer
   * (PeerStatusError, whose `response` is `{ status, headers, data }` as an
   * HTTP call's), a broken stream or no answer within `timeoutMs`. Returns
   * null when the member has no stream serving `feature` (call it by HTTP).
   */
  function request (id, feature, message, body, timeoutMs) {
    const socket = open.get(id)
    const stream = socket && streams.get(socket)
    if (!stream || !stream.features.has(feature) || socket.destroyed) return null
    const req = ++stream.lastReq
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => entry.settle(new TimeoutError(`${feature} to ${id} over its lease stream: no answer within ${timeoutMs} ms`)), timeoutMs)
      const entry = {
        settle (err, msg) {
          clearTimeout(timer)
          stream.pending.delete(req)
          if (err) return reject(err)
          if (msg.error) {
            const e = new PeerStatusError(`${feature} to ${id} over its lease stream: ${msg.status} ${msg.error.code}`)
            const { seq, re, status, ...data } = msg
            e.response = { status: status || 500, headers: {}, data }
            return reject(e)
          }
          resolve(msg)
        }
      }
      stream.pending.set(req, entry)
      socket.cork()
      socket.write(encodeFrame(stream.key, 'c', JSON.stringify({ req, ...message })))
      if (body) socket.write(body)
      socket.uncork()
    })
  }

  /**
   * Member `id`'s load report over its stream, acknowledging `ack`
   * (`{ instance, seq }` of the last report used, or undefined), as
   * `GET <controlUrl>/v1/load` would; null without such a stream.
   */
  function requestLoad (id, ack, timeoutMs) {
    const p = request(id, 'load', { load: ack || {} }, null, timeoutMs)
    return p && p.then((msg) => msg.load)
  }

  /**
   * Push body `b` (controller/pusher.js bodyFor) to member `id` over its
   * stream, as `PUT <controlUrl>/v1/assignment` would: resolves
   * `{ data }` of the member's answer; null without such a stream.
   */
  function requestPush (id, b, timeoutMs) {
    // Its generation (and a diff's base) in the head, as the HTTP push's headers carry them.
    const head = { bytes: b.body.length, gzip: b.headers['content-encoding'] === 'gzip', generation: Number(b.headers['x-chopper-generation']) }
    if (b.headers['x-chopper-base'] !== undefined) head.base = Number(b.headers['x-chopper-base'])
    const sig = b.headers[MAP_HEADER]
    const p = request(id, 'push', sig ? { push: head, sig } : { push: head }, b.body, timeoutMs)
    return p && p.then(({ seq, re, ...data }) => ({ data }))
  }

  return {
    upgrade,
    requestLoad,
    requestPush,
    /** Open streams now. */
    get size () { return open.size },
    /** Whether member `id` has a stream open. */
    has: (id) => open.has(id),
    /** Whether a push to member `id` would go over its stream (requestPush would not return null). */
    canPush (id) {
      const socket = open.get(id)
      const stream = socket && streams.get(socket)
      return Boolean(stream && stream.features.has('push') && !socket.destroyed)
    },
    /** Close every stream (the controller closes or crashes). */
    close () {
      clearInterval(sweep)
      for (const socket of all) socket.destroy()
      all.clear()
      open.clear()
    }
  }
}

module.exports = { createLeaseStreams }
