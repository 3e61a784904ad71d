'use strict'

const { NotFoundError, NotLeaderError, UnknownServerError, LeaseStreamError, statusOf, toHttpBody } = require('../core/errors')
const { HEADERS } = require('../core/cluster-auth')
const { PROTOCOL, STREAM_NONCE_HEADER, NONCE, streamKey, encodeFrame, FrameReader, newStreamNonce } = require('../core/lease-stream-protocol')
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
 * about a third of the CPU (bench/renewal-cost.js).
 *
 * Returns the http server's 'upgrade' listener and `close()`.
 * @param {object} c the controller's shared state
 * @param {{ verifier: import('../core/cluster-auth').RequestVerifier|null, renew: (id: string, body: object) => [object, object|null] }} calls
 */
function createLeaseStreams (c, { verifier, renew }) {
  const token = c.opts.clusterToken
  const open = new Map() // member id -> its socket (a newer stream replaces an older one)
  c.counts.streams = { opened: 0, refused: 0, broken: 0 }

  function leaderHint () {
    return c.election && c.election.leader && c.election.leader.url !== c.url ? c.election.leader.url : null
  }

  /** An HTTP answer to an upgrade refused: JSON error, then close. */
  function refuse (socket, err) {
    c.counts.streams.refused++
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
    if (!c.servers.has(id)) return refuse(socket, new UnknownServerError(`unknown app server ${id}: register first`))
    const memberNonce = req.headers[HEADERS.nonce]
    if (verifier && !NONCE.test(memberNonce)) return refuse(socket, new LeaseStreamError('a lease stream needs an X-Chopper-Nonce of 16 to 64 base64url characters'))
    const nonce = newStreamNonce()
    const key = streamKey(token, id, memberNonce, nonce)
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: ${PROTOCOL}\r\nconnection: Upgrade\r\n${STREAM_NONCE_HEADER}: ${nonce}\r\n\r\n`)
    socket.setNoDelay(true)
    socket.setTimeout(IDLE_MS, () => socket.destroy())
    const prior = open.get(id)
    if (prior) prior.destroy()
    open.set(id, socket)
    c.counts.streams.opened++
    socket.on('close', () => { if (open.get(id) === socket) open.delete(id) })

    const reader = new FrameReader({ key, direction: 'm' })
    let lastSeq = -1
    const broken = (err) => {
      c.counts.streams.broken++
      c.log.warn({ err, server: id }, 'lease stream closed: bad frame')
      socket.destroy()
    }
    const onData = (chunk) => {
      let messages
      try {
        messages = reader.push(chunk)
      } catch (err) {
        return broken(err)
      }
      for (const msg of messages) {
        // A replayed or reordered frame within this connection (its key is this connection's alone).
        if (!Number.isSafeInteger(msg.seq) || msg.seq <= lastSeq) return broken(new LeaseStreamError(`lease stream seq ${msg.seq} not above ${lastSeq}`))
        lastSeq = msg.seq
        let out
        let last = false
        try {
          if (!c.leading()) {
            last = true
            throw new NotLeaderError(`controller ${c.controllerId} is a standby`)
          }
          const [fields, map] = renew(id, msg)
          out = encode({ seq: msg.seq, ...fields }, map)
        } catch (err) {
          const status = statusOf(err)
          if (status >= 500 && !(err instanceof NotLeaderError)) c.log.error({ err, server: id }, 'lease stream renewal failed')
          const leader = err instanceof NotLeaderError ? leaderHint() : null
          out = JSON.stringify({ seq: msg.seq, status, ...toHttpBody(err), ...(leader ? { leader } : {}) })
        }
        socket.write(encodeFrame(key, 'c', out))
        if (last) return socket.end()
        if (socket.writableLength > MAX_BUFFERED) return broken(new LeaseStreamError('member does not read its lease stream'))
      }
    }
    if (head && head.length > 0) onData(head)
    socket.on('data', onData)
  }

  return {
    upgrade,
    /** Open streams now. */
    get size () { return open.size },
    /** Close every stream (the controller closes or crashes). */
    close () {
      for (const socket of open.values()) socket.destroy()
      open.clear()
    }
  }
}

module.exports = { createLeaseStreams }
