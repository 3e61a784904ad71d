'use strict'

const { Pool } = require('undici')
const { UpstreamPool } = require('./upstream-h1')
const { RETRY_NEWER_MAP, OWNER_HINT } = require('./http')
const { connectionOptions } = require('./http-syntax')

/**
 * The upstream side of a router (core/key-router.js): one forwarding attempt
 * of a request to the app server the map names, with the answer streamed
 * into a sink.
 *
 *   attempt({ origin, request: { method, path, headers, body }, sink, extra, done, tracker, slot, size }) → handle
 *
 * One object per attempt, not positional arguments: the router fills it in
 * once and the forwarder reads it; the answer comes back once, through
 * `done(err, null | { misdirected: true, generation, owners })`.
 *
 * `headers` is a flat [name, value, ...] list. On any answer but 421 (or a
 * 503 marked RETRY_NEWER_MAP: not applied, a newer map decides) the
 * response head goes straight to `sink` (hop-by-hop headers dropped, `extra`
 * [name, value, ...] appended), the body streams after it, and `done(null,
 * null)` says the attempt is committed. On those the body is discarded and
 * `done(null, { misdirected, generation, owners })` lets the caller retry
 * elsewhere (`owners`: the answer's X-Chopper-Owner, the ids the refusing
 * server's map names for the key, as sent, or null; core/http.js OWNER_HINT).
 * A transport failure before the head is `done(err)` (err.code as undici
 * reports it); one after it destroys `sink`. A callback, not a promise: the
 * common case allocates no promise at all. The returned handle's `abort()`
 * stops the upstream request (the caller left).
 *
 * With a `tracker` (core/replica-router.js), `attempt` calls
 * `tracker.begin(slot, size)` as it dispatches and `tracker.end(slot, size)`
 * exactly once when the upstream exchange is over: the whole answer read, a
 * 421 drained, a transport error, or an abort. The in-flight counters replica
 * choice reads depend on that pairing. An answer's X-Chopper-Inflight (how
 * many requests the app server holds) goes to `tracker.report(slot, n,
 * sentAt)`, with the `performance.now()` at which the attempt was sent, and
 * is not forwarded.
 *
 * A request without a body, or with a body already read whole (a Buffer),
 * goes through core/upstream-h1.js (our own keep-alive HTTP/1.1 client,
 * which speaks undici's handler protocol) and one with a streamed body
 * through undici's `dispatch`; either streams the answer chunk by chunk into
 * `sink` with no Readable in between and passes the raw header list through
 * without building an object (docs/frontend-performance.md). `client:
 * 'undici'` sends every request through undici. The sink is the front end's
 * response (Node's ServerResponse or frontend/fast-http.js's) or the
 * client's (client/handler-sink.js): only writeHead, write, end, destroy,
 * `destroyed`, cork/uncork and the 'drain' event are used.
 * bench/forwarding.js measures them, and axios (bench/lib/axios-forwarder.js).
 */

// RFC 9110 7.6.1 connection-specific headers are never forwarded; the ones
// after them are set by the front end itself. A client's control-call
// signature headers are dropped too: the data port carries no signed calls
// (docs/security.md).
// An app server's count of the requests it holds (appserver-lib), for replica
// choice (core/replica-router.js `report`): ours, not the client's.
const INFLIGHT = 'x-chopper-inflight'
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'x-served-by', 'x-chopper-generation', 'x-chopper-timestamp', 'x-chopper-nonce', 'x-chopper-signature', 'x-chopper-credential', INFLIGHT])

const HOP_LENGTHS = new Set([...HOP_BY_HOP].map((n) => n.length))

/**
 * Append the forwardable [name, value] pairs of a raw header list (strings or
 * Buffers) to `out`: not hop-by-hop, and not named by the answer's
 * Connection header (RFC 9110 7.6.1). Returns the server's
 * X-Chopper-Inflight count, or -1.
 */
function appendResponseHeaders (raw, out) {
  let inflight = -1
  let connection = null
  const from = out.length
  for (let i = 0; i < raw.length; i += 2) {
    const name = typeof raw[i] === 'string' ? raw[i] : raw[i].toString('latin1')
    // Every hop-by-hop name is 2 to 20 characters long: most others skip the lowercasing.
    if (HOP_LENGTHS.has(name.length)) {
      const lower = name.toLowerCase()
      if (HOP_BY_HOP.has(lower)) {
        const value = typeof raw[i + 1] === 'string' ? raw[i + 1] : raw[i + 1].toString('latin1')
        if (lower === INFLIGHT) inflight = Number(value)
        else if (lower === 'connection') connection = connection === null ? value : connection + ',' + value
        continue
      }
    }
    out.push(name, typeof raw[i + 1] === 'string' ? raw[i + 1] : raw[i + 1].toString('latin1'))
  }
  // Most answers say at most `keep-alive` or `close`: nothing more to drop.
  const named = connectionOptions(connection)
  if (named !== null) dropNamed(out, from, named)
  return Number.isInteger(inflight) && inflight >= 0 ? inflight : -1
}

/** Remove from `list` (a flat [name, value, ...] list), from index `from` on, the fields whose lower-case name is in `names`. */
function dropNamed (list, from, names) {
  let to = from
  for (let i = from; i < list.length; i += 2) {
    if (names.has(list[i].toLowerCase())) continue
    list[to] = list[i]
    list[to + 1] = list[i + 1]
    to += 2
  }
  list.length = to
}

function uncork (res) {
  res.uncork()
}

/** Whether an answer says "not applied; a newer map decides" (RETRY_NEWER_MAP, core/http.js). Only 503s are scanned. */
function retriesOnNewerMap (raw) {
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toString('latin1')
    if (name.length === RETRY_NEWER_MAP.name.length && name.toLowerCase() === RETRY_NEWER_MAP.name) return raw[i + 1].toString('latin1') === RETRY_NEWER_MAP.value
  }
  return false
}

/** What a 421 (or a RETRY_NEWER_MAP 503) says: the refusing server's generation and the owners it names. */
function misdirectedBy (raw) {
  let generation = NaN
  let owners = null
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toString('latin1')
    if (name.length === 20 && name.toLowerCase() === 'x-chopper-generation') generation = Number(raw[i + 1].toString('latin1'))
    else if (name.length === OWNER_HINT.length && name.toLowerCase() === OWNER_HINT) owners = raw[i + 1].toString('latin1')
  }
  return { misdirected: true, generation, owners }
}

/**
 * One forwarding attempt as an undici dispatch handler (the handler API that
 * undici's HTTP/1.1 client speaks natively: no header object is built, no
 * Readable per response). `done(err, outcome)` is called exactly once: null
 * once the head is written to `res`, `{ misdirected }` after a 421, or the
 * transport error before the head.
 */
class ForwardHandler {
  constructor ({ sink, extra, done, tracker = null, slot = 0, size = 1 }) {
    this.res = sink
    this.extra = extra
    this.done = done
    this.tracker = tracker // null: not counted
    this.slot = slot
    this.size = size
    this.sentAt = tracker === null ? 0 : performance.now() // the server's answer time goes with its report
    this.abort = null
    this.resume = null
    this.misdirected = null
    this.committed = false
  }

  onConnect (abort) {
    this.abort = abort
    // The client left while this request waited for a connection: abortUpstream found no abort to call.
    if (this.res.destroyed) abort()
  }

  onHeaders (statusCode, rawHeaders, resume) {
    if (statusCode < 200) return true // 1xx: wait for the final answer
    if (statusCode === 421 || (statusCode === 503 && retriesOnNewerMap(rawHeaders))) {
      this.misdirected = misdirectedBy(rawHeaders)
      return true // read and drop the body, then report
    }
    const res = this.res
    this.committed = true
    // Head, body and end of a small answer usually arrive in one socket read:
    // corked until the next tick they leave in one write.
    res.cork()
    process.nextTick(uncork, res)
    const headers = []
    const inflight = appendResponseHeaders(rawHeaders, headers)
    if (inflight !== -1 && this.tracker !== null) this.tracker.report(this.slot, inflight, this.sentAt)
    for (let i = 0; i < this.extra.length; i++) headers.push(this.extra[i])
    res.writeHead(statusCode, headers)
    this.resume = resume
    this.done(null, null)
    return true
  }

  onData (chunk) {
    if (!this.committed) return true
    if (this.res.write(chunk)) return true
    this.res.once('drain', this.resume)
    return false
  }

  /** The upstream exchange is over: count it once (undici ends a dispatch with onComplete or onError). */
  ended () {
    const tracker = this.tracker
    if (tracker === null) return
    this.tracker = null
    tracker.end(this.slot, this.size)
  }

  onComplete () {
    this.ended()
    if (this.misdirected) return this.done(null, this.misdirected)
    this.res.end()
  }

  onError (err) {
    this.ended()
    // The client left before the answer (abortUpstream): nothing to retry for.
    if (!this.committed && this.res.destroyed) return this.done(null, null)
    if (!this.committed) return this.done(err)
    this.res.destroy(err)
  }
}

/** Call on the client response's 'close' with what `attempt` returned: stop an upstream answer nobody will read. */
function abortUpstream (res, handle) {
  if (handle && !res.writableFinished && handle.abort) handle.abort()
}

class UndiciForwarder {
  /**
   * @param {{ connections: number, timeoutMs: number, connectTimeoutMs?: number, client?: 'chopper'|'undici' }} options
   *   connections: keep-alive connections per app server; connectTimeoutMs: a connection
   *   not made by then fails as not sent (UND_ERR_CONNECT_TIMEOUT), default 10 s as undici's
   */
  constructor ({ connections, timeoutMs, connectTimeoutMs = 10000, client = 'chopper' }) {
    this.connections = connections
    this.timeoutMs = timeoutMs
    this.connectTimeoutMs = connectTimeoutMs
    this.pools = new Map()
    // Requests without a body or with one read whole (a Buffer): core/upstream-h1.js
    // ('chopper'), or undici too ('undici'). A streamed body always goes through undici.
    this.own = client === 'chopper' ? new Map() : null
  }

  #ownPool (origin) {
    let pool = this.own.get(origin)
    if (!pool) {
      pool = new UpstreamPool(origin, { connections: this.connections, timeoutMs: this.timeoutMs, connectTimeoutMs: this.connectTimeoutMs })
      this.own.set(origin, pool)
    }
    return pool
  }

  #pool (origin) {
    let pool = this.pools.get(origin)
    if (!pool) {
      pool = new Pool(origin, {
        connections: this.connections,
        keepAliveTimeout: 30000,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        connect: { timeout: this.connectTimeoutMs }
      })
      this.pools.set(origin, pool)
    }
    return pool
  }

  /** One attempt (see the top of this file); returns the handle whose abort() stops it. */
  attempt (a) {
    const handler = new ForwardHandler(a)
    if (handler.tracker !== null) handler.tracker.begin(handler.slot, handler.size)
    const request = a.request
    if (this.own !== null && (request.body === null || Buffer.isBuffer(request.body))) this.#ownPool(a.origin).dispatch(request, handler)
    else this.#pool(a.origin).dispatch(request, handler)
    return handler
  }

  /** Drop the pool of a server that left the assignment. */
  forget (origin) {
    const own = this.own && this.own.get(origin)
    if (own) {
      this.own.delete(origin)
      own.close()
    }
    const pool = this.pools.get(origin)
    if (pool) {
      this.pools.delete(origin)
      pool.close().catch(() => {})
    }
  }

  async close () {
    if (this.own !== null) {
      for (const pool of this.own.values()) pool.destroy()
      this.own.clear()
    }
    const pools = [...this.pools.values()]
    this.pools.clear()
    await Promise.all(pools.map((p) => p.destroy()))
  }
}

/**
 * A RoutingTable onChange (core/routing-table.js): close `forwarder`'s
 * connections to servers that left the map, so their sockets do not linger.
 */
function forgetDeparted (forwarder) {
  let known = new Set()
  return function forget (map) {
    const now = new Set(Object.values(map.assignment.servers).map((s) => s.url))
    for (const url of known) if (!now.has(url)) forwarder.forget(url)
    known = now
  }
}

module.exports = { UndiciForwarder, forgetDeparted, ForwardHandler, HOP_BY_HOP, appendResponseHeaders, retriesOnNewerMap, abortUpstream, dropNamed }
