'use strict'

const net = require('node:net')
const { STATUS_CODES } = require('node:http')
const { parseFields, hasBareLf } = require('../core/http-syntax')
const { MalformedRequestError, InvalidArgumentError, InternalError, toHttpBody } = require('../core/errors')

/**
 * The data port's HTTP/1.1 server for the common case, on plain `net`
 * sockets (docs/frontend-performance.md, "A server and a client of our own").
 *
 * A proxy reads a request head, forwards it and writes the answer back;
 * Node's `http` server builds two streams, a header object and a parser
 * binding per request for that, and profiles put most of the front end's
 * remaining CPU there. This server parses only what it can parse exactly:
 * HTTP/1.1 requests without Transfer-Encoding, Expect or Upgrade, with a
 * Host, whose request line and header lines are well formed, and whose body
 * (one plain decimal Content-Length) is at most `maxBodySize` bytes. It reads
 * such a body whole into `req.bufferedBody` (a Buffer; null without a body),
 * so the proxy can send it in one write and replay it after a 421, and hands
 * each request to `onRequest` with a small request and response object that
 * have the subset of IncomingMessage and ServerResponse the proxy uses.
 *
 * Everything else (a chunked or larger body, an upgrade, HTTP/1.0, anything
 * malformed, a head over `maxHeaderSize`, or a path `fallbackFor` claims) hands the whole
 * connection, with the bytes read so far, to `fallback`, an ordinary
 * `http.Server` that is not listening: it answers every such request as it
 * would on its own port, 400s included. The connection stays with it.
 *
 * Responses: the head is written as given (names and values are trusted:
 * they come from undici's parser or from the front end itself), with a Date
 * when the list has none, and with chunked framing when it has no
 * Content-Length and the answer may have a body. Pipelined requests are
 * answered in order, one at a time. An idle connection closes after
 * `keepAliveTimeout`; a head (or a head and its body) that has not completed
 * within `headersTimeout` of its first byte closes the connection, as in
 * Node's server.
 */

const HEAD_END = Buffer.from('\r\n\r\n')
// A request target in origin form, visible ASCII only (llhttp's strict mode agrees).
const ORIGIN_FORM = /^\/[\x21-\x7e]*$/
// Methods this server takes; others (CONNECT, PRI, anything unknown) go to the fallback.
const METHODS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'PUT', 'PATCH'])
// Node keeps the first of these when repeated (IncomingMessage's matchKnownFields); others are joined.
const FIRST_WINS = new Set(['content-type', 'content-length', 'user-agent', 'referer', 'host', 'authorization', 'proxy-authorization', 'if-modified-since', 'if-unmodified-since', 'from', 'location', 'max-forwards', 'retry-after', 'etag', 'last-modified', 'server', 'age', 'expires'])

const noop = () => {}

let dateString = ''
let dateSecond = 0
/** The Date header value, recomputed at most once a second. */
function utcDate () {
  const now = Date.now()
  const second = Math.floor(now / 1000)
  if (second !== dateSecond) {
    dateSecond = second
    dateString = new Date(now).toUTCString()
  }
  return dateString
}

/** parseHead's answer for a head with more than one Host (RFC 9112 3.2: the server answers 400 itself). */
const DUPLICATE_HOST = Symbol('duplicate Host')

/**
 * Parse a request head (without its final CRLF CRLF) into a FastRequest;
 * null when this server does not take it (the fallback decides), or
 * DUPLICATE_HOST. `head` is a latin1 string.
 */
function parseHead (head, socket) {
  let eol = head.indexOf('\r\n')
  if (eol === -1) eol = head.length
  const sp1 = head.indexOf(' ')
  if (sp1 <= 0 || sp1 >= eol) return null
  const sp2 = head.indexOf(' ', sp1 + 1)
  if (sp2 === -1 || sp2 >= eol || eol - sp2 !== 9 || !head.startsWith('HTTP/1.1', sp2 + 1)) return null
  const method = head.slice(0, sp1)
  if (!METHODS.has(method)) return null
  const url = head.slice(sp1 + 1, sp2)
  if (!ORIGIN_FORM.test(url)) return null
  const f = parseFields(head, eol + 2)
  if (f.error !== null) return null
  if (f.hosts > 1) return DUPLICATE_HOST // Node's server would take the first
  // A repeated or odd Content-Length goes to Node (which answers 400 unless they agree).
  if (f.hosts === 0 || f.contentLength === -2 || f.transferEncoding !== null || f.expect || f.upgrade) return null
  if (f.connection !== null && f.connection.includes('upgrade')) return null
  return new FastRequest(method, url, f.raw, socket, f.close, f.contentLength > 0 ? f.contentLength : 0)
}

/** The part of `http.IncomingMessage` the proxy reads; a body, if any, read whole into `bufferedBody`. */
class FastRequest {
  constructor (method, url, rawHeaders, socket, close, contentLength = 0) {
    this.method = method
    this.url = url
    this.rawHeaders = rawHeaders
    this.socket = socket
    this.httpVersion = '1.1'
    this.complete = true // handed over only once the body (if any) is read
    this.bodyless = contentLength === 0 // no body: the proxy need not look at the headers for one
    this.contentLength = contentLength
    this.bufferedBody = null // the body's bytes (contentLength of them), set before onRequest
    this.shouldClose = close
    this._headers = null
  }

  /** Lower-case names to values, joined as Node joins repeated fields; built on first use. */
  get headers () {
    if (this._headers !== null) return this._headers
    const out = Object.create(null)
    const raw = this.rawHeaders
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toLowerCase()
      const value = raw[i + 1]
      const prev = out[name]
      if (prev === undefined) out[name] = name === 'set-cookie' ? [value] : value
      else if (name === 'set-cookie') prev.push(value)
      else if (FIRST_WINS.has(name)) continue
      else out[name] = prev + (name === 'cookie' ? '; ' : ', ') + value
    }
    this._headers = out
    return out
  }

  // The body, if any, is already read: nothing to drain or unpipe.
  resume () { return this }
  unpipe () { return this }
}

/** The part of `http.ServerResponse` the proxy writes through. */
class FastResponse {
  constructor (conn, bodyless) {
    this.conn = conn
    this.socket = conn.socket
    this.bodyless = bodyless // HEAD
    this.statusCode = 200
    this.headersSent = false
    this.chunked = false
    this.hasBody = true
    this.writableFinished = false
    this.destroyed = false
    this.onClose = null
    this.onDrain = null
  }

  once (event, fn) {
    if (event === 'close') {
      this.onClose = this.onClose === null ? fn : chain(this.onClose, fn)
    } else if (event === 'drain') {
      this.onDrain = this.onDrain === null ? fn : chain(this.onDrain, fn)
    } else {
      throw new InvalidArgumentError(`fast-http response has no ${event} event`)
    }
    return this
  }

  cork () { this.socket.cork() }
  uncork () { this.socket.uncork() }

  /** `headers`: a flat [name, value, ...] list. */
  writeHead (status, headers) {
    if (this.headersSent) throw new InternalError('headers already sent')
    this.headersSent = true
    this.statusCode = status
    this.hasBody = !this.bodyless && status !== 204 && status !== 304 && !(status >= 100 && status < 200)
    let head = 'HTTP/1.1 ' + status + ' ' + (STATUS_CODES[status] || 'Unknown') + '\r\n'
    let length = false
    let date = false
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i]
      if (name.length === 14 && name.toLowerCase() === 'content-length') length = true
      else if (name.length === 4 && name.toLowerCase() === 'date') date = true
      head += name + ': ' + headers[i + 1] + '\r\n'
    }
    if (!date) head += 'Date: ' + utcDate() + '\r\n'
    if (!length && this.hasBody) {
      this.chunked = true
      head += 'Transfer-Encoding: chunked\r\n'
    }
    if (this.conn.closing) head += 'Connection: close\r\n'
    this.socket.write(head + '\r\n', 'latin1')
    return this
  }

  write (chunk) {
    if (this.destroyed || !this.hasBody || chunk.length === 0) return true
    if (!this.chunked) return this.socket.write(chunk)
    this.socket.write(chunk.length.toString(16) + '\r\n', 'latin1')
    this.socket.write(chunk)
    return this.socket.write('\r\n', 'latin1')
  }

  end (text) {
    if (this.destroyed || this.writableFinished) return this
    if (!this.headersSent) this.writeHead(this.statusCode, [])
    if (text !== undefined) this.write(typeof text === 'string' ? Buffer.from(text) : text)
    if (this.chunked) this.socket.write('0\r\n\r\n', 'latin1')
    this.writableFinished = true
    this.closed()
    this.conn.finished(this)
    return this
  }

  destroy () {
    if (this.destroyed) return this
    this.destroyed = true
    this.socket.destroy()
    this.closed()
    return this
  }

  /** The socket can take more. */
  drained () {
    const fn = this.onDrain
    this.onDrain = null
    if (fn !== null) fn()
  }

  closed () {
    const fn = this.onClose
    this.onClose = null
    if (fn !== null) fn()
  }

  /** The connection went away under this response. */
  lost () {
    if (this.writableFinished) return
    this.destroyed = true
    this.closed()
  }
}

function chain (a, b) {
  return () => { a(); b() }
}

class Connection {
  constructor (socket, server) {
    this.socket = socket
    this.server = server
    this.buffered = null // bytes read and not yet parsed
    this.res = null // the response in flight
    this.closing = false // the request in flight asked for Connection: close
    this.starting = false // next() is running
    this.pending = null // a request whose head is parsed and whose body is still arriving
    // Deadlines, checked by the server's sweep (no timer per request): an
    // idle connection has keepAliveTimeout from its last answer; a head being
    // read, or a new connection's first, has headersTimeout from its start.
    this.idle = false
    this.since = Date.now()
    this.onData = (chunk) => this.data(chunk)
    this.onClose = () => this.lost()
    this.onDrain = () => { if (this.res !== null) this.res.drained() }
    socket.setNoDelay(true)
    socket.on('data', this.onData)
    socket.on('close', this.onClose)
    socket.on('drain', this.onDrain)
    socket.on('error', noop) // a reset by the client: 'close' follows
  }

  data (chunk) {
    this.buffered = this.buffered === null ? chunk : Buffer.concat([this.buffered, chunk])
    if (this.res === null) this.next()
    else if (this.buffered.length > this.server.maxHeaderSize) this.socket.pause() // pipelined ahead of us: wait for the answer
  }

  /**
   * Start the requests in the buffer, one at a time, while each is answered
   * at once (pipelined requests that fail fast): a loop, not a recursion
   * through finished(), however many a client sends in one write.
   */
  next () {
    if (this.starting) return // finished() during onRequest: the loop below goes on
    this.starting = true
    try {
      // Not after an answer that closed the connection (Connection: close).
      while (this.res === null && this.buffered !== null && !this.socket.writableEnded && !this.socket.destroyed) {
        if (!this.startOne()) return
      }
    } finally {
      this.starting = false
    }
  }

  /** Parse and start the next request in the buffer; false when none can start now. */
  startOne () {
    if (this.pending !== null) return this.body()
    const buf = this.buffered
    const end = buf.indexOf(HEAD_END)
    if (end === -1) {
      if (buf.length > this.server.maxHeaderSize) return this.handOff() // Node answers 431
      // Lines ended by a bare LF never make a CRLF CRLF: Node answers them (a 400) at once.
      if (hasBareLf(buf)) return this.handOff()
      this.started()
      return false
    }
    if (end > this.server.maxHeaderSize) return this.handOff()
    const req = parseHead(buf.toString('latin1', 0, end), this.socket)
    if (req === DUPLICATE_HOST) return this.refuse('more than one Host header (RFC 9112 3.2)')
    // A body over maxBodySize goes to Node too (the proxy streams it, or buffers it up to its own limit).
    if (req === null || req.contentLength > this.server.maxBodySize || this.server.fallbackFor(req)) return this.handOff()
    this.buffered = end + 4 === buf.length ? null : buf.subarray(end + 4)
    if (req.contentLength > 0) {
      this.started() // the body may take a while: the head's deadline covers it
      this.pending = req
      return this.body()
    }
    return this.dispatch(req)
  }

  /** A new request's first bytes (after an idle spell): its deadline runs from here. */
  started () {
    if (this.idle) {
      this.idle = false
      this.since = Date.now()
    }
  }

  /** The pending request's body: start the request once all of it is here. */
  body () {
    const req = this.pending
    const buf = this.buffered
    const need = req.contentLength
    if (buf === null || buf.length < need) return false
    // A copy: the rest of the buffer (a pipelined request) must not keep this body's memory alive, nor share it.
    req.bufferedBody = Buffer.from(buf.subarray(0, need))
    this.buffered = need === buf.length ? null : buf.subarray(need)
    this.pending = null
    return this.dispatch(req)
  }

  /** Hand a complete request to onRequest. */
  dispatch (req) {
    this.closing = req.shouldClose
    const res = new FastResponse(this, req.method === 'HEAD')
    this.res = res // busy: the request's deadline is the proxy's upstream timeout
    this.server.onRequest(req, res)
    return true
  }

  /** A response ended: close if asked, else take the next request. */
  finished (res) {
    if (this.res !== res) return
    this.res = null
    if (this.closing) {
      this.socket.end()
      return
    }
    this.since = Date.now()
    this.idle = this.buffered === null
    if (this.socket.isPaused()) this.socket.resume()
    if (this.buffered !== null) this.next()
  }

  /** Close when a deadline passed (the server's sweep calls this). */
  expire (now) {
    if (this.res !== null) return
    if (now - this.since > (this.idle ? this.server.keepAliveTimeout : this.server.headersTimeout)) this.socket.destroy()
  }

  lost () {
    this.server.connections.delete(this)
    const res = this.res
    this.res = null
    if (res !== null) res.lost()
  }

  /** Give the connection, and every byte read so far, to the fallback server (false: this one is done with it). */
  handOff () {
    const socket = this.socket
    this.server.connections.delete(this)
    socket.removeListener('data', this.onData)
    socket.removeListener('close', this.onClose)
    socket.removeListener('drain', this.onDrain)
    socket.removeListener('error', noop)
    socket.pause()
    if (this.buffered !== null) socket.unshift(this.buffered)
    this.buffered = null
    this.server.fallback.emit('connection', socket)
    socket.resume()
    return false
  }

  /**
   * Answer 400 and close: a request this server must refuse and Node's server
   * would take (false: this connection is done).
   */
  refuse (message) {
    const err = new MalformedRequestError(message)
    const body = JSON.stringify(toHttpBody(err))
    this.server.connections.delete(this)
    this.buffered = null
    this.socket.end(`HTTP/1.1 ${err.status} ${STATUS_CODES[err.status]}\r\nDate: ${utcDate()}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`, 'latin1')
    return false
  }

  /** Close when idle (server shutdown); a response in flight closes the connection when it ends. */
  closeIdle () {
    if (this.res === null) this.socket.destroy()
    else this.closing = true
  }
}

/**
 * A `net.Server` speaking the common case of HTTP/1.1 itself and handing
 * the rest to `fallback`. `fallbackFor(req)`: true to hand a well-formed
 * request to the fallback too (the front end's reserved routes).
 */
function createFastServer ({ onRequest, fallback, fallbackFor = () => false, keepAliveTimeout = 5000, headersTimeout = 60000, maxHeaderSize = 16 * 1024, maxBodySize = 64 * 1024 }) {
  const server = net.createServer()
  const state = { onRequest, fallback, fallbackFor, keepAliveTimeout, headersTimeout, maxHeaderSize, maxBodySize, connections: new Set() }
  server.on('connection', (socket) => state.connections.add(new Connection(socket, state)))
  // One sweep over every connection's deadlines, as Node's own server checks
  // its headersTimeout: cheaper than re-arming a socket timer per request.
  const sweepMs = Math.max(10, Math.min(1000, Math.floor(Math.min(keepAliveTimeout, headersTimeout) / 4)))
  let sweep = null
  server.on('listening', () => {
    sweep = setInterval(() => {
      const now = Date.now()
      for (const conn of state.connections) conn.expire(now)
    }, sweepMs).unref()
    // The fallback never listens itself: it starts its own header and
    // request timeout checks when it hears 'listening', and stops them on close.
    fallback.emit('listening')
  })
  server.on('close', () => {
    clearInterval(sweep)
    fallback.close(noop)
  })
  server.closeIdleConnections = () => {
    for (const conn of state.connections) conn.closeIdle()
    if (fallback.closeIdleConnections) fallback.closeIdleConnections()
  }
  server.closeAllConnections = () => {
    for (const conn of state.connections) conn.socket.destroy()
    if (fallback.closeAllConnections) fallback.closeAllConnections()
  }
  return server
}

module.exports = { createFastServer, parseHead, DUPLICATE_HOST, FastRequest, FastResponse }
