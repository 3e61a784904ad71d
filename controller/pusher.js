'use strict'

const zlib = require('node:zlib')
const { silent } = require('../core/logger')
const { JsonClient } = require('../core/json-client')
const { diffMaps } = require('../core/map-diff')
const { signMap, hashBody } = require('../core/cluster-auth')

/**
 * Delivers the latest assignment to every registered target (front ends and
 * app servers), as a diff from the generation each one acknowledged
 * (docs/control-plane.md). A newcomer, or a target whose generation is no
 * longer in the history, gets the full map, gzipped when large.
 *
 * Each body is serialized, hashed and signed once for every target that
 * needs it (signMap), not once per target. At most `concurrency` pushes are
 * in flight; the rest queue, so a generation to thousands of members does
 * not crowd out the renewals that carry failure detection.
 *
 * Each target converges on the newest generation on its own: a failed or
 * late push is retried with capped exponential backoff, and a retry always
 * sends the newest assignment, never a superseded one.
 */
class Pusher {
  /**
   * @param {object} [options]
   * @param {(key: string, body: object) => void} [options.onAck] a target's answer to a push (app servers report the generation they drained)
   * @param {string} [options.clusterToken] sign every body with it (core/cluster-auth.js signMap)
   * @param {number} [options.concurrency] pushes in flight at most
   * @param {number} [options.historySize] generations kept to diff from
   * @param {number} [options.gzipAbove] full maps of more bytes are sent gzipped
   */
  constructor ({ timeoutMs = 2000, minBackoffMs = 100, maxBackoffMs = 5000, concurrency = 64, historySize = 64, gzipAbove = 32 * 1024, onAck = () => {}, clusterToken, logger = silent } = {}) {
    this.onAck = onAck
    this.http = new JsonClient({ timeoutMs, clusterToken, connections: 1 })
    this.token = clusterToken
    this.minBackoffMs = minBackoffMs
    this.maxBackoffMs = maxBackoffMs
    this.concurrency = concurrency
    this.historySize = historySize
    this.gzipAbove = gzipAbove
    this.logger = logger
    this.targets = new Map() // key -> { url, acked, full, inflight, timer, backoff, failures }
    this.queue = new Set() // keys waiting for a push slot, in order
    this.inflight = 0
    this.latest = null
    this.history = new Map() // generation -> assignment, oldest first
    this.bodies = new Map() // base generation (0: full map) -> { body, headers, diff }, for `latest`
    this.stats = { pushes: 0, failures: 0, rejected: 0, bytes: 0, full: 0, diffs: 0, fullBytes: 0, diffBytes: 0 }
    this.closed = false
  }

  /** Add or update a target (its control URL) and bring it up to date. */
  addTarget (key, controlUrl, acked = 0) {
    const t = this.targets.get(key)
    if (t && t.url === controlUrl) return this.#kick(key)
    if (t) clearTimeout(t.timer)
    this.targets.set(key, { url: controlUrl, acked, full: acked === 0, inflight: false, timer: null, backoff: this.minBackoffMs, failures: 0 })
    this.#kick(key)
  }

  /** A target told us its generation another way (a lease renewal): no push of it is needed. */
  noteHeld (key, generation) {
    const t = this.targets.get(key)
    if (!t || !(generation > t.acked)) return
    if (this.history.has(generation) || (this.latest && generation >= this.latest.generation)) {
      t.acked = generation
      t.full = false
    }
  }

  removeTarget (key) {
    const t = this.targets.get(key)
    if (t) clearTimeout(t.timer)
    this.targets.delete(key)
    this.queue.delete(key)
  }

  /** Publish a new assignment to every target. */
  publish (assignment) {
    this.latest = assignment
    this.history.set(assignment.generation, assignment)
    while (this.history.size > this.historySize) this.history.delete(this.history.keys().next().value)
    this.bodies.clear()
    for (const key of this.targets.keys()) this.#kick(key)
  }

  /**
   * The body that brings a holder of `base` to the latest generation:
   * a diff when `base` is in the history, else the full map (base 0).
   * Built, hashed and signed once per generation; re-signed after 10 s so the
   * signature's timestamp stays inside receivers' clock window.
   * @returns {{ body: Buffer, raw: Buffer, headers: object, diff: boolean }} raw: the JSON before gzip
   */
  bodyFor (base) {
    const from = base > 0 && base < this.latest.generation && this.history.has(base) ? base : 0
    let b = this.bodies.get(from)
    const now = Date.now()
    if (!b) {
      const value = from ? diffMaps(this.history.get(from), this.latest) : this.latest
      const raw = Buffer.from(JSON.stringify(value), 'utf8')
      let body = raw
      const headers = { 'x-chopper-generation': String(this.latest.generation) }
      if (from) headers['x-chopper-base'] = String(from)
      const hash = this.token === undefined ? null : hashBody(body)
      if (!from && body.length > this.gzipAbove) {
        body = zlib.gzipSync(body, { level: 1 })
        headers['content-encoding'] = 'gzip'
      }
      b = { body, raw, headers, diff: from > 0, hash, signedAt: 0 }
      this.bodies.set(from, b)
    }
    if (b.hash && now - b.signedAt > 10000) {
      b.headers['x-chopper-map-signature'] = signMap({ token: this.token, bodyHash: b.hash, now })
      b.signedAt = now
    }
    return b
  }

  /** Targets that have not acknowledged the latest generation. */
  lagging () {
    const out = []
    if (!this.latest) return out
    for (const [key, t] of this.targets) {
      if (t.acked < this.latest.generation) out.push({ target: key, acked: t.acked, failures: t.failures })
    }
    return out
  }

  /** How many targets have not acknowledged the latest generation (O(targets), no allocation). */
  laggingCount () {
    if (!this.latest) return 0
    let n = 0
    for (const t of this.targets.values()) if (t.acked < this.latest.generation) n++
    return n
  }

  #kick (key) {
    const t = this.targets.get(key)
    if (!t || t.inflight || t.timer || !this.latest || this.closed) return
    if (t.acked >= this.latest.generation) return
    if (this.inflight >= this.concurrency) {
      this.queue.add(key)
      return
    }
    this.#send(key, t)
  }

  #next () {
    while (this.inflight < this.concurrency && this.queue.size > 0) {
      const key = this.queue.values().next().value
      this.queue.delete(key)
      this.#kick(key)
    }
  }

  async #send (key, t) {
    const assignment = this.latest
    const b = this.bodyFor(t.full ? 0 : t.acked)
    t.inflight = true
    this.inflight++
    this.stats.pushes++
    this.stats.bytes += b.body.length
    if (b.diff) {
      this.stats.diffs++
      this.stats.diffBytes += b.body.length
    } else {
      this.stats.full++
      this.stats.fullBytes += b.body.length
    }
    let retry = false
    try {
      const res = await this.http.put(`${t.url}/v1/assignment`, b.body, { headers: b.headers, sign: b.hash === null })
      t.acked = Math.max(t.acked, assignment.generation)
      t.full = false
      t.failures = 0
      t.backoff = this.minBackoffMs
      if (this.targets.get(key) === t) this.onAck(key, res.data)
    } catch (err) {
      const status = err.response && err.response.status
      const code = status === 409 && err.response.data && err.response.data.error && err.response.data.error.code
      if (code === 'CHOPPER_ERR_DIFF_BASE') {
        // It does not hold the diff's base (restarted, or it took a push whose answer
        // we lost): a diff from the generation it names when we still have it, else the full map.
        const held = err.response.data.generation
        if (Number.isSafeInteger(held) && held > 0 && this.history.has(held)) {
          t.acked = held
          t.full = false
        } else {
          t.full = true
        }
      } else if (status === 409) {
        // The target already holds a newer generation than this one (we restarted?): nothing to retry.
        t.acked = assignment.generation
        t.full = false
        this.stats.rejected++
        this.logger.debug({ target: key, generation: assignment.generation, body: err.response.data }, 'push refused as stale')
      } else {
        t.failures++
        this.stats.failures++
        retry = true
        this.logger.warn({ target: key, generation: assignment.generation, failures: t.failures, err }, 'assignment push failed; will retry')
      }
    } finally {
      t.inflight = false
      this.inflight--
    }
    if (this.targets.get(key) === t && !this.closed) {
      if (retry) {
        const wait = t.backoff
        t.backoff = Math.min(t.backoff * 2, this.maxBackoffMs)
        t.timer = setTimeout(() => { t.timer = null; this.#kick(key) }, wait)
      } else {
        this.#kick(key) // a newer assignment may have been published meanwhile
      }
    }
    this.#next()
  }

  close () {
    this.closed = true
    for (const t of this.targets.values()) clearTimeout(t.timer)
    this.queue.clear()
    // pushes in flight end with their timeout; the pool's idle sockets do not hold the process open
    this.http.close().catch(() => {})
  }
}

module.exports = { Pusher }
