'use strict'

const http = require('node:http')
const https = require('node:https')
const zlib = require('node:zlib')
const { promisify } = require('node:util')
const { PeerStatusError, TimeoutError, LeaseStreamError, InvalidArgumentError, statusOf, toHttpBody } = require('./errors')
const { signRequest, HEADERS } = require('./cluster-auth')
const { PROTOCOL, STREAM_NONCE_HEADER, FEATURES_HEADER, NONCE, streamKey, encodeFrame, FrameReader } = require('./lease-stream-protocol')

const gunzip = promisify(zlib.gunzip)
// An upgrade waits this long, as a registration does: renewals go by HTTP
// meanwhile (ControllerClient), and giving up sooner only sends the busy
// controller another upgrade to parse and verify.
const CONNECT_TIMEOUT_MS = 10000

/**
 * A member's end of its lease stream (core/lease-stream-protocol.js): one
 * long-lived connection to one controller over which `renew(report)` sends
 * a renewal and resolves the controller's answer, as
 * `POST /v1/servers/:id/lease` would. It connects on first use and again
 * after the connection broke.
 *
 * Failures reject as the HTTP call's do, so callers treat both alike:
 *  - an error answer (a refused upgrade, or an error frame) rejects with
 *    PeerStatusError whose `response` is `{ status, headers, data }`
 *    (a standby's names the leader in `headers['x-chopper-leader']`);
 *  - no answer within `timeoutMs` rejects with TimeoutError; two in a row
 *    close the connection, which may be stuck, and the next renewal reconnects;
 *  - a broken connection rejects what is in flight with LeaseStreamError.
 *
 * With `serveLoad`, the member also answers the controller's load requests
 * over the stream (`serveLoad(ack)` gives the report `GET /v1/load` would),
 * so the controller need not call its control port every period; with
 * `servePush`, the controller's map pushes (`servePush({ raw, signature, generation, base })`
 * resolves `{ status, body }` as `PUT /v1/assignment` would answer).
 */
class LeaseStream {
  #token

  /**
   * @param {{ url: string, id: string, clusterToken?: string, timeoutMs: number, connectTimeoutMs?: number, serveLoad?: (ack: { instance?: string, seq?: number }) => object, servePush?: (push: { raw: Buffer, signature?: string, generation?: number, base?: number, gzip: boolean }) => Promise<{ status: number, body: object }>, inflate?: boolean }} options
   *   inflate: false hands servePush a gzipped push as it came (`gzip: true`), for a member that reads only its generation
   *   url: the controller's; timeoutMs: a renewal's; connectTimeoutMs: the upgrade's (default max(timeoutMs, 10 s))
   */
  constructor ({ url, id, clusterToken, timeoutMs, connectTimeoutMs = Math.max(timeoutMs, CONNECT_TIMEOUT_MS), serveLoad, servePush, inflate = true }) {
    this.url = url
    this.id = id
    this.serveLoad = serveLoad
    this.servePush = servePush
    this.inflate = inflate
    this.lastReq = 0
    this.#token = clusterToken
    this.timeoutMs = timeoutMs
    this.connectTimeoutMs = connectTimeoutMs
    this.path = `/v1/servers/${encodeURIComponent(id)}/lease-stream`
    this.socket = null
    this.connecting = null
    this.upgrading = null // the upgrade request in flight
    this.key = null
    this.seq = 0
    this.pending = new Map() // seq -> { resolve, reject, timer }
    this.timeouts = 0
    this.closed = false
    this.stats = { connects: 0, renewals: 0, registrations: 0, timeouts: 0, breaks: 0 }
  }

  /** Whether the stream is open now (a renewal would not wait for a connection). */
  get connected () {
    return this.socket !== null
  }

  /** Open the stream now (concurrent calls share one attempt); resolves once it is open. */
  connect () {
    return this.socket ? Promise.resolve(this.socket) : this.#connect()
  }

  /** One renewal: `{ generation, drainedGeneration }`; resolves the answer (lease, and a map or diff). */
  renew (report) {
    this.stats.renewals++
    return this.#ask({ generation: report.generation, drainedGeneration: report.drainedGeneration }, this.timeoutMs, 'lease renewal')
  }

  /**
   * Register over the stream, as `POST /v1/servers` with
   * `{ url, controlUrl, generation }` would (the id is the stream's): one
   * connection per member from its first call, and the controller needs no
   * call of its own to reach it. Resolves the answer (lease, and a map or
   * diff). A controller that takes no registrations over streams refuses the
   * upgrade of an id it does not know (CHOPPER_ERR_UNKNOWN_SERVER).
   */
  register ({ url, controlUrl, generation = 0 }, timeoutMs = this.connectTimeoutMs) {
    this.stats.registrations++
    return this.#ask({ register: { url, controlUrl, generation } }, timeoutMs, 'registration')
  }

  async #ask (message, timeoutMs, what) {
    const socket = this.socket || await this.#connect()
    const seq = ++this.seq
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(seq)
        this.stats.timeouts++
        if (++this.timeouts >= 2) this.#drop(new LeaseStreamError('lease stream unanswered twice: reconnecting'))
        reject(new TimeoutError(`${what} over ${this.url}${this.path}: no answer within ${timeoutMs} ms`))
      }, timeoutMs)
      this.pending.set(seq, { resolve, reject, timer, what })
      socket.write(encodeFrame(this.key, 'm', JSON.stringify({ seq, ...message })))
    })
  }

  #connect () {
    if (this.closed) return Promise.reject(new LeaseStreamError('lease stream closed'))
    if (this.connecting) return this.connecting
    this.connecting = new Promise((resolve, reject) => {
      const target = new URL(this.url + this.path)
      const headers = { connection: 'Upgrade', upgrade: PROTOCOL }
      // "register": this member may register over the stream, so its id need not be known yet.
      const features = ['register', this.serveLoad && 'load', this.servePush && 'push'].filter(Boolean)
      if (features.length > 0) headers[FEATURES_HEADER] = features.join(',')
      if (this.#token !== undefined) Object.assign(headers, signRequest({ token: this.#token, method: 'GET', path: this.path }))
      const req = (target.protocol === 'https:' ? https : http).request(target, { method: 'GET', headers, agent: false })
      const timer = setTimeout(() => req.destroy(new TimeoutError(`lease stream to ${this.url}: no answer to the upgrade within ${this.connectTimeoutMs} ms`)), this.connectTimeoutMs)
      req.on('error', (err) => {
        clearTimeout(timer)
        reject(err)
      })
      req.on('response', (res) => {
        // Refused: read the JSON error, as an HTTP call's.
        const chunks = []
        res.on('data', (b) => chunks.push(b))
        res.on('error', () => {})
        res.on('end', () => {
          clearTimeout(timer)
          let data
          try { data = JSON.parse(Buffer.concat(chunks).toString('utf8')) } catch { data = undefined }
          const code = data && data.error && data.error.code
          const err = new PeerStatusError(`GET ${this.url}${this.path}: HTTP ${res.statusCode}${code ? ` ${code}` : ''}`)
          err.response = { status: res.statusCode, headers: res.headers, data }
          err.upgradeRefused = true // an HTTP answer, not a frame
          reject(err)
        })
      })
      this.upgrading = req
      req.on('upgrade', (res, socket, head) => {
        clearTimeout(timer)
        if (this.closed) {
          // Closed while the upgrade was on its way: an open socket now would outlive its member.
          socket.destroy()
          return reject(new LeaseStreamError('lease stream closed'))
        }
        const nonce = res.headers[STREAM_NONCE_HEADER]
        if (this.#token !== undefined && (typeof nonce !== 'string' || !NONCE.test(nonce))) {
          socket.destroy()
          return reject(new LeaseStreamError('lease stream upgrade without a valid controller nonce'))
        }
        this.key = streamKey(this.#token, this.id, headers[HEADERS.nonce], nonce)
        this.#attach(socket, head)
        resolve(socket)
      })
      req.end()
    }).finally(() => {
      this.connecting = null
      this.upgrading = null
    })
    return this.connecting
  }

  #attach (socket, head) {
    this.stats.connects++
    this.socket = socket
    this.timeouts = 0
    this.lastReq = 0 // the controller numbers its requests per connection
    socket.setNoDelay(true)
    const reader = new FrameReader({ key: this.key, direction: 'c', bodies: true })
    const onData = (chunk) => {
      let messages
      try {
        messages = reader.push(chunk)
      } catch (err) {
        return this.#drop(err)
      }
      for (const msg of messages) this.#answer(msg)
    }
    socket.on('data', onData)
    socket.on('error', (err) => this.#drop(err))
    socket.on('close', () => this.#drop(new LeaseStreamError('lease stream closed by the controller')))
    if (head && head.length > 0) onData(head)
  }

  #answer (msg) {
    if (msg.req !== undefined) {
      // Requests rise within a connection: an old one again is not the controller's (it is MACed, so a replay).
      if (!Number.isSafeInteger(msg.req) || msg.req <= this.lastReq) return this.#drop(new LeaseStreamError(`lease stream request ${msg.req} not above ${this.lastReq}`))
      this.lastReq = msg.req
      return msg.push ? this.#push(msg) : this.#load(msg)
    }
    const p = this.pending.get(msg.seq)
    if (!p) return // answered after its timeout: the renewal was counted failed
    this.pending.delete(msg.seq)
    clearTimeout(p.timer)
    this.timeouts = 0
    if (msg.error) {
      const err = new PeerStatusError(`${p.what} over ${this.url}${this.path}: ${msg.status} ${msg.error.code}`)
      err.response = { status: msg.status, headers: msg.leader ? { 'x-chopper-leader': msg.leader } : {}, data: { error: msg.error } }
      return p.reject(err)
    }
    p.resolve(msg)
  }

  /** A load request of the controller's: answer with the report, as `GET /v1/load` would. */
  #load (msg) {
    let answer
    try {
      const ack = msg.load
      if (!this.serveLoad) throw new LeaseStreamError('this member serves no load over its lease stream')
      if (!ack || typeof ack !== 'object' || (ack.instance !== undefined && typeof ack.instance !== 'string') || (ack.seq !== undefined && (!Number.isSafeInteger(ack.seq) || ack.seq < 0))) {
        throw new InvalidArgumentError('invalid load acknowledgement: expected { instance?: string, seq?: non-negative integer }')
      }
      answer = { seq: ++this.seq, re: msg.req, load: this.serveLoad({ instance: ack.instance, seq: ack.seq }) }
    } catch (err) {
      answer = { seq: ++this.seq, re: msg.req, status: statusOf(err), ...toHttpBody(err) }
    }
    this.#reply(answer)
  }

  /** A map push of the controller's: installed as `PUT /v1/assignment` would; answered once drained. */
  async #push (msg) {
    const socket = this.socket
    let answer
    try {
      if (!this.servePush) throw new LeaseStreamError('this member takes no pushes over its lease stream')
      const inflate = msg.push.gzip && this.inflate
      const raw = inflate ? await gunzip(msg.body) : msg.body
      const { generation, base } = msg.push
      const { status, body } = await this.servePush({
        raw,
        gzip: Boolean(msg.push.gzip) && !inflate,
        signature: typeof msg.sig === 'string' ? msg.sig : undefined,
        generation: Number.isSafeInteger(generation) ? generation : undefined,
        base: Number.isSafeInteger(base) ? base : undefined
      })
      answer = status >= 400 ? { ...body, status } : body
    } catch (err) {
      answer = { status: statusOf(err), ...toHttpBody(err) }
    }
    // Answered on the connection it came by: a newer one has another controller's numbering.
    if (this.socket === socket) this.#reply({ seq: ++this.seq, re: msg.req, ...answer })
  }

  #reply (answer) {
    if (this.socket) this.socket.write(encodeFrame(this.key, 'm', JSON.stringify(answer)))
  }

  /** Forget the connection; renewals in flight reject. */
  #drop (err) {
    const socket = this.socket
    if (!socket) return
    this.socket = null
    this.stats.breaks++
    socket.destroy()
    for (const [seq, p] of this.pending) {
      clearTimeout(p.timer)
      this.pending.delete(seq)
      p.reject(err instanceof LeaseStreamError ? err : new LeaseStreamError(`lease stream broke: ${err.message}`, { cause: err }))
    }
  }

  close () {
    this.closed = true
    if (this.upgrading) this.upgrading.destroy(new LeaseStreamError('lease stream closed'))
    this.#drop(new LeaseStreamError('lease stream closed'))
  }
}

module.exports = { LeaseStream }
