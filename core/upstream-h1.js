'use strict'

const net = require('node:net')
const diagnostics = require('node:diagnostics_channel')
const { STATUS, parseFields, invalidField } = require('./http-syntax')
const { UpstreamProtocolError } = require('./errors')

/**
 * A keep-alive HTTP/1.1 client for the front end's common case: a request
 * without a body, or with a body already read whole into a Buffer (sent
 * after the head in the same write, framed by the request's own
 * Content-Length), to one app server (docs/frontend-performance.md, "A server
 * and a client of our own"). It speaks undici's dispatch-handler protocol
 * (onConnect, onHeaders, onData, onComplete, onError) so `ForwardHandler`
 * drives it unchanged; requests with a streamed body still go through undici.
 *
 * Per request it writes the head as one latin1 string and parses the answer
 * in place: status line, header lines, then the body by Content-Length, by
 * chunked framing, or to the end of the connection. Answers to HEAD, 204 and
 * 304 have no body; 1xx heads are skipped. A malformed answer fails the
 * request with CHOPPER_ERR_UPSTREAM_PROTOCOL and closes the connection.
 *
 * Errors carry undici's codes where the proxy acts on them: ECONNREFUSED
 * and friends from the socket, UND_ERR_CONNECT_TIMEOUT for a connection not
 * made within `connectTimeoutMs` (nothing was sent: the proxy retries on the
 * slice's next owner, as after undici's connect timeout), UND_ERR_SOCKET for
 * a connection that closed before the answer ended, UND_ERR_HEADERS_TIMEOUT /
 * UND_ERR_BODY_TIMEOUT when the server went quiet for `timeoutMs` (one sweep
 * per pool checks every connection, not a timer per request), and
 * UND_ERR_INVALID_ARG for a request header that is not a valid field (never
 * written: a CR or LF in it would split the head).
 *
 * A connection goes back to the pool after a complete answer unless the
 * server said Connection: close; it is not reused after the server's own
 * Keep-Alive timeout (less a second), so a request does not race the
 * server closing it.
 */

const HEAD_END = Buffer.from('\r\n\r\n')
// A chunk-size line: hex digits, then extensions of token characters (no
// whitespace anywhere: llhttp refuses it, so must we).
const CHUNK_SIZE_LINE = /^([0-9A-Fa-f]{1,12})(?:;[!#$%&'*+\-.^_`|~0-9A-Za-z=]*)*$/
const MAX_HEAD = 64 * 1024
// Published with { origin, status } as an answer's head has been read, before the
// handler's onHeaders (as undici's 'undici:request:headers'): for tests and tracing.
const headersChannel = diagnostics.channel('chopper:upstream:headers')
const SWEEP_MS = 1000

class UpstreamError extends Error {
  constructor (message, code) {
    super(message)
    this.name = 'UpstreamError'
    this.code = code
  }
}

// Body framing states.
const HEAD = 0
const LENGTH = 1
const CHUNK_SIZE = 2
const CHUNK_DATA = 3
const CHUNK_CRLF = 4
const TRAILERS = 5
const UNTIL_CLOSE = 6

class Connection {
  constructor (pool) {
    this.pool = pool
    this.socket = net.connect({ host: pool.hostname, port: pool.port, noDelay: true })
    // A host that drops SYNs would hold the request until timeoutMs (a 504): give up on the
    // connection sooner, as not sent, so the proxy can take the request elsewhere.
    this.connectTimer = setTimeout(() => this.connectTimedOut(), pool.connectTimeoutMs)
    this.socket.once('connect', () => clearTimeout(this.connectTimer))
    this.handler = null // the request in flight
    this.method = ''
    this.state = HEAD
    this.buffered = null
    this.remaining = 0 // LENGTH: body bytes left; CHUNK_DATA: chunk bytes left
    this.reusable = true
    this.expiresAt = Infinity
    this.since = 0 // last activity of the request in flight
    this.received = false // any byte of the answer arrived
    this.written = false // the request in flight was written
    this.paused = false
    this.resume = () => {
      if (this.paused) {
        this.paused = false
        this.since = Date.now() // the body timeout counts from here, not from before the pause
        this.socket.resume()
      }
    }
    this.socket.on('data', (chunk) => this.data(chunk))
    this.socket.on('error', (err) => { this.error = err })
    this.socket.on('close', () => this.closed())
    this.error = null
  }

  connectTimedOut () {
    if (!this.socket.connecting) return
    this.error = new UpstreamError(`no connection to ${this.pool.origin} within ${this.pool.connectTimeoutMs} ms`, 'UND_ERR_CONNECT_TIMEOUT')
    this.socket.destroy() // 'close' fails the request in flight with this error (nothing was received)
  }

  /** Send a request on this (idle or connecting) connection. */
  send (request, handler) {
    this.handler = handler
    this.method = request.method
    this.state = HEAD
    this.received = false
    this.since = Date.now()
    this.written = false
    // Per request: a late abort must not reach the next request on this connection.
    handler.onConnect(() => this.abortRequest(handler))
    if (this.handler !== handler) return // aborted in onConnect (its client left while it waited): never sent
    const h = request.headers
    const bad = invalidField(h)
    if (bad !== null) { // refused before writing: the connection stays good
      this.handler = null
      this.pool.release(this)
      handler.onError(new UpstreamError(`invalid request header ${JSON.stringify(bad.name)}${'value' in bad ? ' value' : ''}`, 'UND_ERR_INVALID_ARG'))
      return
    }
    let head = request.method + ' ' + request.path + ' HTTP/1.1\r\nhost: ' + this.pool.host + '\r\n'
    for (let i = 0; i < h.length; i += 2) head += h[i] + ': ' + h[i + 1] + '\r\n'
    this.written = true
    const body = request.body
    if (body === null || body === undefined || body.length === 0) {
      this.socket.write(head + '\r\n', 'latin1')
      return
    }
    // A body read whole (frontend/fast-http.js): head and body leave in one write. The
    // request's own Content-Length, forwarded in its headers, frames it.
    this.socket.cork()
    this.socket.write(head + '\r\n', 'latin1')
    this.socket.write(body)
    this.socket.uncork()
  }

  abortRequest (handler) {
    if (this.handler !== handler) return
    const err = new UpstreamError('request aborted', 'UND_ERR_ABORTED')
    if (this.written) return this.fail(err) // the answer would arrive for nobody: the connection goes
    this.handler = null // nothing was sent: the connection stays good
    this.pool.release(this)
    handler.onError(err)
  }

  data (chunk) {
    if (this.handler === null) { // bytes nobody asked for: the connection is out of step
      this.socket.destroy()
      return
    }
    this.received = true
    this.since = Date.now()
    if (this.buffered !== null) {
      chunk = Buffer.concat([this.buffered, chunk])
      this.buffered = null
    }
    const handler = this.handler
    let at = 0
    while (at < chunk.length && this.handler === handler) {
      const next = this.step(chunk, at)
      if (next < 0) return // waiting for more bytes (kept in `buffered`), or failed
      at = next
    }
    // Bytes after the answer: the connection is out of step (and any request sent on it since fails).
    if (at < chunk.length) this.fail(new UpstreamProtocolError(`unexpected bytes after an answer from ${this.pool.origin}`))
  }

  /** Consume from `chunk` at `at` in the current state; the new offset, or -1. */
  step (chunk, at) {
    switch (this.state) {
      case HEAD: return this.head(chunk, at)
      case LENGTH: {
        const n = Math.min(this.remaining, chunk.length - at)
        this.remaining -= n
        this.body(chunk.subarray(at, at + n))
        if (this.remaining === 0) this.complete()
        return at + n
      }
      case UNTIL_CLOSE:
        this.body(chunk.subarray(at))
        return chunk.length
      case CHUNK_SIZE: {
        const eol = chunk.indexOf('\r\n', at, 'latin1')
        if (eol === -1) return this.wait(chunk, at, 1024)
        const m = CHUNK_SIZE_LINE.exec(chunk.toString('latin1', at, eol))
        if (m === null) return this.protocol('bad chunk size')
        this.remaining = parseInt(m[1], 16)
        this.state = this.remaining === 0 ? TRAILERS : CHUNK_DATA
        return eol + 2
      }
      case CHUNK_DATA: {
        const n = Math.min(this.remaining, chunk.length - at)
        this.remaining -= n
        this.body(chunk.subarray(at, at + n))
        if (this.remaining === 0) this.state = CHUNK_CRLF
        return at + n
      }
      case CHUNK_CRLF:
        if (chunk.length - at < 2) return this.wait(chunk, at, 2)
        if (chunk[at] !== 13 || chunk[at + 1] !== 10) return this.protocol('chunk not followed by CRLF')
        this.state = CHUNK_SIZE
        return at + 2
      case TRAILERS: { // trailer lines are read and dropped, up to the empty line
        const eol = chunk.indexOf('\r\n', at, 'latin1')
        if (eol === -1) return this.wait(chunk, at, MAX_HEAD)
        if (eol === at) {
          this.complete()
          return at + 2
        }
        return eol + 2
      }
    }
    return this.protocol('unknown state')
  }

  /** Keep the unread bytes from `at` until more arrive (at most `limit`). */
  wait (chunk, at, limit) {
    if (chunk.length - at > limit) return this.protocol('line too long')
    this.buffered = at === 0 ? chunk : chunk.subarray(at)
    return -1
  }

  head (chunk, at) {
    const end = chunk.indexOf(HEAD_END, at)
    if (end === -1) return this.wait(chunk, at, MAX_HEAD)
    const text = chunk.toString('latin1', at, end)
    // Three digits exactly: Number() would take '2e2' or ' 20'.
    const m = STATUS.exec(text)
    if (m === null) return this.protocol('bad status line')
    const status = Number(m[1])
    if (text.charCodeAt(7) === 48) this.reusable = false // HTTP/1.0: no keep-alive assumed
    const line = text.indexOf('\r\n')
    // Checked as the request side is: nothing with a bare CR or LF, a control
    // character or an obs-fold ever reaches a client's answer.
    const f = parseFields(text, line === -1 ? text.length : line + 2)
    if (f.error !== null) return this.protocol(f.error)
    if (f.close) this.reusable = false
    if (f.keepAlive !== null) this.keepAlive(f.keepAlive)
    // Digits, no whitespace after them, and only once (llhttp refuses even an equal repeat).
    if (f.contentLength === -2) return this.protocol('bad Content-Length')
    const length = f.contentLength
    const chunked = f.transferEncoding !== null
    if (chunked && f.transferEncoding.toLowerCase() !== 'chunked') return this.protocol(`unsupported Transfer-Encoding ${f.transferEncoding}`)
    if (chunked && length !== -1) return this.protocol('both Content-Length and Transfer-Encoding')
    const raw = f.raw
    const next = end + 4
    if (status < 200) return next // 1xx: the final answer follows (101 never: the front end sends no Upgrade)
    const handler = this.handler
    if (headersChannel.hasSubscribers) headersChannel.publish({ origin: this.pool.origin, status })
    if (handler.onHeaders(status, raw, this.resume) === false) this.pause()
    if (this.handler === null) return -1 // aborted in onHeaders
    if (this.method === 'HEAD' || status === 204 || status === 304 || length === 0) {
      this.complete()
    } else if (chunked) {
      this.state = CHUNK_SIZE
    } else if (length > 0) {
      this.state = LENGTH
      this.remaining = length
    } else {
      this.state = UNTIL_CLOSE
      this.reusable = false
    }
    return next
  }

  keepAlive (value) {
    const m = /timeout\s*=\s*(\d+)/i.exec(value)
    if (m) this.expiresAt = Date.now() + Number(m[1]) * 1000 - 1000
  }

  body (chunk) {
    if (chunk.length === 0) return
    if (this.handler.onData(chunk) === false) this.pause()
  }

  pause () {
    if (!this.paused) {
      this.paused = true
      this.socket.pause()
    }
  }

  complete () {
    const handler = this.handler
    this.handler = null
    this.state = HEAD
    this.resume()
    this.pool.release(this)
    handler.onComplete([])
  }

  protocol (message) {
    this.fail(new UpstreamProtocolError(`malformed answer from ${this.pool.origin}: ${message}`))
    return -1
  }

  /** End the request in flight with `err` and drop the connection. */
  fail (err) {
    const handler = this.handler
    this.handler = null
    this.reusable = false
    this.socket.destroy()
    if (handler !== null) handler.onError(err)
  }

  closed () {
    clearTimeout(this.connectTimer)
    this.pool.drop(this)
    const handler = this.handler
    if (handler === null) return
    this.handler = null
    if (this.state === UNTIL_CLOSE && this.error === null) { // the body ran to the end of the connection
      handler.onComplete([])
      return
    }
    const err = this.error && !this.received && this.error.code ? this.error : new UpstreamError(`other side closed (${this.pool.origin})`, 'UND_ERR_SOCKET')
    handler.onError(err)
  }

  /** The request in flight went quiet for too long. */
  expire (now, timeoutMs) {
    // A connection paused for a slow client is not the server's silence (undici agrees).
    if (this.handler === null || this.paused || now - this.since <= timeoutMs) return
    this.fail(new UpstreamError(`no answer from ${this.pool.origin} within ${timeoutMs} ms`, this.received ? 'UND_ERR_BODY_TIMEOUT' : 'UND_ERR_HEADERS_TIMEOUT'))
  }
}

/** Keep-alive connections to one origin, at most `connections`; requests beyond wait in order. */
class UpstreamPool {
  constructor (origin, { connections, timeoutMs, connectTimeoutMs = 10000 }) {
    const url = new URL(origin)
    if (url.protocol !== 'http:') throw new UpstreamError(`unsupported origin ${origin}`, 'UND_ERR_INVALID_ARG')
    this.origin = origin
    this.hostname = url.hostname.replace(/^\[|\]$/g, '')
    this.port = Number(url.port) || 80
    this.host = url.host
    this.max = connections
    this.timeoutMs = timeoutMs
    this.connectTimeoutMs = connectTimeoutMs // undici's default
    this.all = new Set()
    this.idle = []
    this.queue = []
    this.closed = false
    this.sweep = setInterval(() => {
      const now = Date.now()
      for (const c of this.all) c.expire(now, this.timeoutMs)
    }, Math.min(SWEEP_MS, timeoutMs)).unref()
  }

  dispatch (request, handler) {
    if (this.closed) {
      handler.onError(new UpstreamError('pool closed', 'UND_ERR_DESTROYED'))
      return
    }
    this.place(request, handler)
  }

  /** An idle connection, a new one, or the queue (also after close(): the queue drains). */
  place (request, handler) {
    const now = Date.now()
    while (this.idle.length > 0) {
      const c = this.idle.pop()
      if (c.expiresAt > now && !c.socket.destroyed) return c.send(request, handler)
      c.socket.destroy() // past the server's keep-alive: do not race its close
    }
    if (this.all.size < this.max) {
      const c = new Connection(this)
      this.all.add(c)
      return c.send(request, handler)
    }
    this.queue.push(request, handler)
  }

  release (c) {
    if (!c.reusable) {
      c.socket.destroy()
      return
    }
    if (this.queue.length > 0) {
      const request = this.queue.shift()
      const handler = this.queue.shift()
      // After the current answer's callbacks: the next request starts on a clean stack.
      process.nextTick(() => {
        if (c.socket.destroyed || !this.all.has(c)) this.place(request, handler)
        else c.send(request, handler)
      })
      return
    }
    if (this.closed) c.socket.destroy()
    else this.idle.push(c)
  }

  drop (c) {
    this.all.delete(c)
    const i = this.idle.indexOf(c)
    if (i !== -1) this.idle.splice(i, 1)
    if (this.queue.length > 0) { // a waiting request takes the freed slot
      const request = this.queue.shift()
      const handler = this.queue.shift()
      this.place(request, handler)
    }
    if (this.closed && this.all.size === 0) clearInterval(this.sweep) // the last request's deadline no longer needs watching
  }

  /**
   * No new requests; idle connections close now, busy ones when their answer
   * ends (still under the timeout), and requests waiting for a connection are
   * still sent, as undici's Pool.close() does. A request queued for a server
   * that left the map (the front end forgets its pool) is never failed
   * unsent as if it might have been sent: it is sent, or meets a refused or
   * timed-out connect, which the proxy retries elsewhere.
   */
  close () {
    this.closed = true
    if (this.all.size === 0) clearInterval(this.sweep)
    for (const c of this.all) {
      if (c.handler === null) c.socket.destroy()
    }
  }

  destroy () {
    this.closed = true
    const queued = this.queue.splice(0)
    for (let i = 1; i < queued.length; i += 2) queued[i].onError(new UpstreamError('pool destroyed', 'UND_ERR_DESTROYED'))
    for (const c of [...this.all]) c.fail(new UpstreamError('pool destroyed', 'UND_ERR_DESTROYED'))
    clearInterval(this.sweep)
  }
}

module.exports = { UpstreamPool, UpstreamError }
