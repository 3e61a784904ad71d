'use strict'

/**
 * A protocol-level app server or front end for bench/control-plane.js: it
 * registers, renews its lease (app servers), re-registers, and answers the
 * controller's pushes and load collections on a control port of its own,
 * with no app, shard guard or signature check behind them. Many live in one
 * process (bench/lib/fake-members.js); they share one `counters` object and
 * one renewal-latency reservoir, so the process answers `stats` in O(1).
 *
 * A push is read whole and discarded: its generation comes from the
 * `x-chopper-generation` / `x-chopper-base` headers when the controller sends
 * them, else from the first 200 bytes of the body (the full map starts with
 * `{"generation":N`), else from the parsed body. Pushes are not verified: the
 * bench prices the controller, not its members.
 */
const http = require('node:http')
const zlib = require('node:zlib')
const { setTimeout: delay } = require('node:timers/promises')
const { performance } = require('node:perf_hooks')
const { json } = require('../../core/json-client')
const { LeaseStream } = require('../../core/lease-stream')

const DEFAULT_RENEW_MS = 250
const REGISTER_TIMEOUT_MS = 10000 // appserver-lib's (core/controller-client.js) // appserver-lib's renewMs, until the controller chooses one
const RETRY_MS = 250 // core/membership.js's registration retry interval
const PEEK = 200

/** Counters shared by every fake member of a process (all cumulative). */
function newCounters () {
  return {
    pushes: { messages: 0, bytes: 0, full: 0, diffs: 0, gzip: 0, stale: 0, diffBaseRefused: 0, parsed: 0, frontendMessages: 0, frontendBytes: 0 },
    renewals: { sent: 0, ok: 0, failures: 0, notFound: 0, bytesOut: 0, bytesIn: 0, withMap: 0, mapBytes: 0, withDiff: 0, diffBaseMismatch: 0 },
    registrations: { sent: 0, ok: 0, conflicts: 0, failures: 0, bytesOut: 0, bytesIn: 0, gaveUp: 0 },
    errors: {}, // failed calls to the controller by what failed: `${call} ${status or error code}`
    loads: 0,
    localLapses: 0 // a member's own lease ran out before a renewal was answered
  }
}

/** The generation a push carries, from its headers or its first bytes. */
function readPush (headers, body) {
  const g = headers['x-chopper-generation']
  if (g !== undefined) {
    const base = headers['x-chopper-base']
    return { generation: Number(g), base: base === undefined ? undefined : Number(base), parsed: false }
  }
  const text = (headers['content-encoding'] === 'gzip' ? zlib.gunzipSync(body) : body)
  const head = text.subarray(0, PEEK).toString('latin1')
  const gm = /"generation":(\d+)/.exec(head)
  if (gm) {
    const diff = /"kind":"diff"/.test(head)
    const bm = diff ? /"base":(\d+)/.exec(head) : null
    if (!diff || bm) return { generation: Number(gm[1]), base: bm ? Number(bm[1]) : undefined, parsed: false }
  }
  const data = JSON.parse(text.toString('utf8'))
  return { generation: data.generation, base: data.kind === 'diff' ? data.base : undefined, parsed: true }
}

function send (res, status, body) {
  const buf = json(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': buf.length })
  res.end(buf)
}

/** The bytes of a JsonClient answer's body: its Content-Length, else its JSON's length. */
function answerBytes (response) {
  const n = Number(response.headers && response.headers['content-length'])
  return Number.isFinite(n) ? n : Buffer.byteLength(JSON.stringify(response.data ?? ''))
}

class FakeMember {
  /**
   * @param {object} options
   * @param {string} options.id
   * @param {'server'|'frontend'} options.kind
   * @param {import('../../core/json-client').JsonClient} options.client signs with the cluster token
   * @param {string} options.controllerUrl
   * @param {ReturnType<typeof newCounters>} options.counters
   * @param {{ record: (ms: number) => void }} options.latency renewal round trips
   * @param {Set<import('node:net').Socket>} options.sockets every control-port connection (wire bytes)
   * @param {number} options.reregisterMs 0: never
   * @param {number} options.registerTimeoutMs give up registering after this
   */
  constructor ({ id, kind, client, controllerUrl, counters, latency, sockets, reregisterMs, registerTimeoutMs, clusterToken, leaseStream = true }) {
    Object.assign(this, { id, kind, client, controllerUrl, counters, latency, sockets, reregisterMs, registerTimeoutMs })
    // As appserver-lib: renewals over a lease stream (core/lease-stream.js), else one HTTP call each.
    // Its load reports go over the stream too, as appserver-lib's do.
    const serveLoad = () => {
      this.counters.loads++
      return { instance: this.instance, seq: ++this.seq, frames: 1, entries: [] }
    }
    // And its pushes (unverified, as over HTTP: the bench prices the controller), read as
    // over HTTP: the generation from the head, as from the headers there, and not inflated.
    const servePush = async ({ raw, gzip, generation, base }) => {
      const headers = {}
      if (generation !== undefined) headers['x-chopper-generation'] = String(generation)
      if (base !== undefined) headers['x-chopper-base'] = String(base)
      if (gzip) headers['content-encoding'] = 'gzip'
      return this.#take(headers, raw)
    }
    this.stream = leaseStream && kind === 'server' ? new LeaseStream({ url: controllerUrl, id, clusterToken, timeoutMs: 2000, serveLoad, servePush, inflate: false }) : null
    this.opening = null
    this.generation = 0
    this.needs = 0 // its last lease's minGeneration: the generation it must hold (app servers)
    this.registered = false
    this.stopped = false
    this.leaseEnd = Infinity // performance.now() ms; Infinity until a lease is granted
    this.lapsed = false
    this.renewMs = DEFAULT_RENEW_MS
    this.timer = null
    this.reregisterTimer = null
    this.registering = null
    this.instance = `${id}-${process.pid}`
    this.seq = 0
    this.server = http.createServer((req, res) => this.#handle(req, res))
    this.server.on('connection', (socket) => sockets.add(socket))
  }

  /** Listen on a port of its own (port 0), then register. */
  async start () {
    await new Promise((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(0, '127.0.0.1', resolve)
    })
    this.controlUrl = `http://127.0.0.1:${this.server.address().port}`
    // A fake app server's data URL: never called; it only has to differ from controlUrl.
    this.url = `http://127.0.0.1:${this.server.address().port + 1}`
    await this.register(this.registerTimeoutMs)
    if (this.reregisterMs > 0 && !this.stopped) {
      // As appserver-lib does: app servers re-register only while renewals fail (a 404 re-registers at once).
      this.reregisterTimer = setInterval(() => { if (!this.registering && (this.kind !== 'server' || this.renewalFailing)) this.register(0) }, this.reregisterMs)
    }
  }

  /** Register (retrying 409s and failures until `timeoutMs` has passed; 0: once). */
  register (timeoutMs) {
    if (this.registering) return this.registering
    this.registering = this.#register(timeoutMs).finally(() => { this.registering = null })
    return this.registering
  }

  async #register (timeoutMs) {
    const deadline = performance.now() + timeoutMs
    const path = this.kind === 'server' ? '/v1/servers' : '/v1/frontends'
    let backoff = RETRY_MS
    for (;;) {
      if (this.stopped) return
      const body = json(this.kind === 'server'
        ? { id: this.id, url: this.url, controlUrl: this.controlUrl, generation: this.generation }
        : { id: this.id, controlUrl: this.controlUrl, generation: this.generation })
      const c = this.counters.registrations
      c.sent++
      c.bytesOut += body.length
      const sentAt = performance.now()
      try {
        // As appserver-lib's ControllerClient: a registration waits 10 s for its answer.
        const res = await this.#registration(path, body)
        c.ok++
        c.bytesIn += res.headers ? answerBytes(res) : Buffer.byteLength(JSON.stringify(res.data))
        this.registered = true
        this.#apply(res.data, sentAt)
        if (this.kind === 'server' && !this.timer && !this.stopped) this.#schedule(0) // renew at once, as LeaseKeeper.start does
        return
      } catch (err) {
        const status = err.response && err.response.status
        if (status === 409) c.conflicts++
        else c.failures++
        this.#noteError('register', err)
        if (err.response) c.bytesIn += answerBytes(err.response)
        if (performance.now() >= deadline) {
          if (!this.registered) c.gaveUp++
          return
        }
        // As appserver-lib's Membership: retries back off, with jitter.
        await delay(backoff * (0.5 + Math.random() / 2))
        backoff = Math.min(backoff * 2, 5000)
      }
    }
  }

  /**
   * One registration as appserver-lib's ControllerClient makes it: over the
   * lease stream (opening it) when the member has one, by HTTP when the
   * stream cannot be had. Resolves `{ data, headers? }`.
   */
  async #registration (path, body) {
    const byHttp = () => this.client.post(this.controllerUrl + path, body, { timeoutMs: REGISTER_TIMEOUT_MS })
    if (!this.stream) return byHttp()
    try {
      return { data: await this.stream.register({ url: this.url, controlUrl: this.controlUrl, generation: this.generation }, REGISTER_TIMEOUT_MS) }
    } catch (err) {
      if (err.upgradeRefused || err.code === 'CHOPPER_ERR_LEASE_STREAM') return byHttp()
      throw err
    }
  }

  /** A registration or renewal answer: its map or diff, and its lease. */
  #apply (data, sentAt) {
    if (!data || typeof data !== 'object') return
    const a = data.assignment
    if (a && Number.isSafeInteger(a.generation) && a.generation > this.generation) this.generation = a.generation
    const d = data.diff
    if (d && Number.isSafeInteger(d.generation)) {
      if (d.base === this.generation) this.generation = Math.max(this.generation, d.generation)
      else if (d.generation > this.generation) this.counters.renewals.diffBaseMismatch++
    }
    const lease = data.lease
    if (lease && Number.isFinite(lease.leaseMs)) {
      // Measured from when the request left, as appserver-lib's ShardGuard does.
      this.leaseEnd = sentAt + lease.leaseMs
      this.lapsed = false
      if (Number.isSafeInteger(lease.minGeneration)) this.needs = lease.minGeneration
      if (Number.isInteger(lease.renewMs) && lease.renewMs > 0) this.renewMs = lease.renewMs
    }
  }

  #noteError (call, err) {
    const key = `${call} ${err.response ? err.response.status : (err.code || err.name)}`
    this.counters.errors[key] = (this.counters.errors[key] || 0) + 1
  }

  #schedule (ms) {
    if (this.stopped) return
    this.timer = setTimeout(() => this.#renew(), ms)
  }

  async #renew () {
    if (this.stopped) return
    const now = performance.now()
    if (!this.lapsed && now > this.leaseEnd) {
      this.lapsed = true
      this.counters.localLapses++
    }
    const c = this.counters.renewals
    const report = { generation: this.generation, drainedGeneration: this.generation }
    const body = json(report)
    c.sent++
    c.bytesOut += body.length
    try {
      const res = await this.#renewal(report, body)
      const ms = performance.now() - now
      this.latency.record(ms)
      this.renewalFailing = false
      c.ok++
      const bytes = res.headers ? answerBytes(res) : Buffer.byteLength(JSON.stringify(res.data))
      c.bytesIn += bytes
      if (res.data && (res.data.assignment || res.data.diff)) {
        if (res.data.assignment) c.withMap++
        else c.withDiff++
        c.mapBytes += bytes
      }
      this.#apply(res.data, now)
    } catch (err) {
      c.failures++
      this.renewalFailing = true
      this.#noteError('renew', err)
      if (err.response) c.bytesIn += answerBytes(err.response)
      if (err.response && err.response.status === 404) {
        // The controller dropped this member while it was alive: register again.
        c.notFound++
        this.registered = false
        this.timer = null
        this.register(this.registerTimeoutMs)
        return
      }
    }
    // As appserver-lib's lease keeper: the period runs from when the renewal left.
    this.#schedule(Math.max(0, this.renewMs - (performance.now() - now)))
  }

  /**
   * One renewal as appserver-lib's ControllerClient makes it: over the lease
   * stream once it is open; by HTTP while it opens (in the background) or
   * when it just broke. Resolves `{ data, headers? }`.
   */
  async #renewal (report, body) {
    const byHttp = () => this.client.post(`${this.controllerUrl}/v1/servers/${this.id}/lease`, body)
    if (!this.stream) return byHttp()
    if (!this.stream.connected) {
      if (!this.opening) this.opening = this.stream.connect().catch(() => {}).finally(() => { this.opening = null })
      return byHttp()
    }
    try {
      return { data: await this.stream.renew(report) }
    } catch (err) {
      if (err.code === 'CHOPPER_ERR_LEASE_STREAM') return byHttp()
      throw err
    }
  }

  #handle (req, res) {
    if (req.method === 'PUT' && req.url === '/v1/assignment') return this.#push(req, res)
    if (req.method === 'GET' && req.url.startsWith('/v1/load') && this.kind === 'server') {
      req.resume()
      this.counters.loads++
      return send(res, 200, { instance: this.instance, seq: ++this.seq, frames: 1, entries: [] })
    }
    req.resume()
    send(res, 404, { error: { code: 'CHOPPER_ERR_NOT_FOUND', message: `no route for ${req.method} ${req.url}` } })
  }

  #push (req, res) {
    const chunks = []
    let bytes = 0
    req.on('data', (chunk) => { chunks.push(chunk); bytes += chunk.length })
    req.on('end', () => {
      const { status, body } = this.#take(req.headers, Buffer.concat(chunks, bytes))
      send(res, status, body)
    })
  }

  /** One push, over HTTP or the lease stream: `{ status, body }` of the answer. */
  #take (headers, raw) {
    const p = this.counters.pushes
    p.messages++
    p.bytes += raw.length
    if (headers['content-encoding'] === 'gzip') p.gzip++
    if (this.kind === 'frontend') { p.frontendMessages++; p.frontendBytes += raw.length }
    let push
    try {
      push = readPush(headers, raw)
    } catch (err) {
      return { status: 400, body: { error: { code: 'CHOPPER_ERR_MALFORMED_BODY', message: err.message } } }
    }
    if (push.parsed) p.parsed++
    const { generation, base } = push
    if (base !== undefined) {
      p.diffs++
      if (base !== this.generation && generation !== this.generation) {
        p.diffBaseRefused++
        return { status: 409, body: { error: { code: 'CHOPPER_ERR_DIFF_BASE', message: `diff from ${base}, but this member holds ${this.generation}` }, generation: this.generation } }
      }
    } else {
      p.full++
      if (generation < this.generation) {
        p.stale++
        return { status: 409, body: { error: { code: 'CHOPPER_ERR_STALE_GENERATION', message: `stale assignment: generation ${generation} is not above current ${this.generation}` }, generation: this.generation } }
      }
    }
    this.generation = Math.max(this.generation, generation)
    return {
      status: 200,
      body: this.kind === 'server'
        ? { accepted: true, generation: this.generation, drainedGeneration: this.generation }
        : { accepted: true, generation: this.generation }
    }
  }

  /**
   * Whether it holds what it must: a front end `generation` (the
   * controller's current one), an app server what its last lease asked
   * (the last generation that changed its slices) and at least one map.
   */
  holds (generation) {
    return this.kind === 'server' ? this.generation > 0 && this.generation >= this.needs : this.generation >= generation
  }

  /** Stop renewing and re-registering and close the control port (no deregistration). */
  async stop () {
    this.stopped = true
    if (this.stream) this.stream.close()
    clearTimeout(this.timer)
    clearInterval(this.reregisterTimer)
    this.server.closeAllConnections()
    await new Promise((resolve) => this.server.close(() => resolve()))
  }
}

module.exports = { FakeMember, newCounters, readPush }
