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
 * longer in the history, gets the full map; either is gzipped when large.
 *
 * Each body is serialized, hashed and signed once for every target that
 * needs it (signMap), not once per target. At most `concurrency` pushes by
 * HTTP and `streamConcurrency` over lease streams are in flight; the rest
 * queue, so a generation to thousands of members does not crowd out the
 * renewals that carry failure detection. Each kind has its own bound and
 * queue, so front ends' pushes do not wait behind thousands of newcomers'
 * maps on their streams, nor the reverse.
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
   * @param {number} [options.concurrency] pushes by HTTP in flight at most
   * @param {number} [options.streamConcurrency] pushes over lease streams in flight at most
   * @param {(serverId: string) => boolean} [options.canStream] whether a push to app server `serverId` would go over its stream
   * @param {number} [options.historySize] generations kept to diff from
   * @param {number} [options.gzipAbove] bodies (full maps, diffs) of more bytes are sent gzipped
   */
  constructor ({ timeoutMs = 2000, minBackoffMs = 100, maxBackoffMs = 5000, concurrency = 64, streamConcurrency = 64, canStream = () => false, historySize = 64, gzipAbove = 32 * 1024, selectiveAbove = Infinity, onAck = () => {}, viaStream = () => null, clusterToken, logger = silent } = {}) {
    this.onAck = onAck
    this.http = new JsonClient({ timeoutMs, clusterToken, connections: 1 })
    this.token = clusterToken
    this.minBackoffMs = minBackoffMs
    this.maxBackoffMs = maxBackoffMs
    this.concurrency = concurrency
    this.streamConcurrency = streamConcurrency
    this.canStream = canStream
    this.historySize = historySize
    this.gzipAbove = gzipAbove
    this.selectiveAbove = selectiveAbove
    this.logger = logger
    this.targets = new Map() // key -> { url, acked, full, inflight, timer, backoff, failures }
    // Keys waiting for a push slot, in order, by how they go (HTTP, lease
    // stream), each with its urgent ones ahead (a handoff's losers, a member that asked).
    this.waiting = { http: { urgent: new Set(), queue: new Set() }, stream: { urgent: new Set(), queue: new Set() } }
    this.inflight = 0 // by HTTP
    this.inflightStreamed = 0
    this.latest = null
    this.history = new Map() // generation -> assignment, oldest first
    this.steps = new Map() // generation -> { value, raw }: the diff from the generation published before it
    this.bodies = new Map() // base generation (0: full map) -> { body, headers, diff }, for `latest`
    this.full = null // { generation, raw }: `latest` serialized
    // server id -> the last generation that changed its slices or listed it
    // anew (touchedBy): what it must hold for its lease to count (needs)
    this.touched = new Map()
    // (serverId, body, timeoutMs) => Promise<{ data }> | null: a push over the
    // member's lease stream (controller/lease-streams.js); null: by HTTP.
    this.viaStream = viaStream
    this.stats = { pushes: 0, failures: 0, rejected: 0, bytes: 0, full: 0, diffs: 0, fullBytes: 0, diffBytes: 0, selective: 0, streamed: 0 }
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
    this.#unqueue(key)
  }

  #unqueue (key) {
    for (const w of Object.values(this.waiting)) {
      w.queue.delete(key)
      w.urgent.delete(key)
    }
  }

  /** Pushes waiting for a slot. */
  get queued () {
    const { http, stream } = this.waiting
    return http.urgent.size + http.queue.size + stream.urgent.size + stream.queue.size
  }

  /**
   * Publish a new assignment. Every target gets it, except that with at
   * least `selectiveAbove` targets an app server whose slices this
   * generation does not change is left to its next renewal, whose answer
   * carries the diff (docs/control-plane.md, "Who gets a push"): front ends,
   * newcomers and every server the change touches are pushed at once.
   */
  publish (assignment, urgent = EMPTY_SET) {
    const prev = this.latest
    this.latest = assignment
    this.history.set(assignment.generation, assignment)
    // This generation's step, computed and serialized once for every holder of every older base.
    let step = null
    if (prev && prev.generation < assignment.generation) {
      const value = diffMaps(prev, assignment)
      step = { value, raw: Buffer.from(JSON.stringify(value), 'utf8') }
      this.steps.set(assignment.generation, step)
    }
    while (this.history.size > this.historySize) {
      const oldest = this.history.keys().next().value
      this.history.delete(oldest)
      this.steps.delete(oldest)
    }
    this.bodies.clear()
    const touched = step ? touchedBy(prev, step.value) : null
    if (touched) {
      for (const id of touched) this.touched.set(id, assignment.generation)
      for (const id of step.value.servers.remove) this.touched.delete(id)
    } else {
      // No step (the first map, or one from another numbering): every server must hold it.
      this.touched = new Map(Object.keys(assignment.servers).map((id) => [id, assignment.generation]))
    }
    const selective = touched !== null && this.targets.size >= this.selectiveAbove
    if (selective) this.stats.selective++
    // Who goes first when there are more than `concurrency`: the losers of a
    // handoff (`urgent`: the grant waits for their acknowledgement), then
    // diffs, then full maps (newcomers').
    const diffs = []
    const fulls = []
    for (const key of urgent) if (this.targets.has(key)) this.#kick(key)
    for (const [key, t] of this.targets) {
      if (urgent.has(key)) continue
      if (selective && key.startsWith('server:') && t.acked > 0 && !t.full && !touched.has(key.slice(7))) continue
      if (t.acked > 0 && !t.full) diffs.push(key)
      else fulls.push(key)
    }
    for (const key of diffs) this.#kick(key)
    for (const key of fulls) this.#kick(key)
    // Queued earlier for an older generation: the urgent ones still go first.
    this.#toFront(urgent)
  }

  /**
   * Move the queued ones of `keys` ahead of the queue: O(keys), not
   * O(queue), since a join storm's renewals ask for one at a time.
   */
  #toFront (keys) {
    for (const w of Object.values(this.waiting)) {
      if (w.queue.size === 0) continue
      for (const k of keys) {
        if (w.queue.delete(k)) w.urgent.add(k)
      }
    }
  }

  /**
   * The body that brings a holder of `base` to the latest generation: the
   * latest generation's step (diff from the one before) when `base` is that
   * one; a chain of the steps after `base` when every one of them is in the
   * history; else the full map; either gzipped when large. Each generation's step
   * is computed and serialized once, at publish; a chain only concatenates
   * them. Each body is hashed and signed once, and re-signed after 10 s so
   * its timestamp stays inside receivers' clock window.
   * @returns {{ body: Buffer, raw: Buffer, headers: object, diff: boolean }} raw: the JSON before gzip
   */
  bodyFor (base) {
    const latest = this.latest
    let from = base > 0 && base < latest.generation && this.history.has(base) ? base : 0
    let chain = from ? this.#chain(from) : null
    // A chain longer than the map itself (a holder far behind a busy spell): the map.
    if (chain && chain.reduce((n, step) => n + step.raw.length, 0) > this.#fullRaw().length) chain = null
    if (!chain) from = 0
    let b = this.bodies.get(from)
    const now = Date.now()
    if (!b) {
      let raw
      if (!from) {
        raw = this.#fullRaw()
      } else if (chain.length === 1) {
        raw = chain[0].raw
      } else {
        const head = { kind: 'diff', base: from, generation: latest.generation }
        if (latest.epoch !== undefined) head.epoch = latest.epoch
        const parts = [Buffer.from(JSON.stringify(head).slice(0, -1) + ',"steps":[')]
        chain.forEach((step, i) => parts.push(i ? COMMA : EMPTY, step.raw))
        parts.push(CLOSE)
        raw = Buffer.concat(parts)
      }
      let body = raw
      const headers = { 'x-chopper-generation': String(latest.generation) }
      if (from) headers['x-chopper-base'] = String(from)
      const hash = this.token === undefined ? null : hashBody(body)
      // A join burst's diffs run to 100 KB, to every server they touch: gzipped as full maps are.
      if (body.length > this.gzipAbove) {
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

  /** The latest map serialized, once per generation. */
  #fullRaw () {
    if (!this.full || this.full.generation !== this.latest.generation) this.full = { generation: this.latest.generation, raw: Buffer.from(JSON.stringify(this.latest), 'utf8') }
    return this.full.raw
  }

  /**
   * Push to `key` now whatever it holds (a renewal could not carry what it
   * lacks, and its lease will not apply until it has it): ahead of the queue.
   */
  want (key) {
    const t = this.targets.get(key)
    if (!t || t.inflight || t.timer) return
    this.#kick(key) // sends now, or queues it
    this.#toFront(new Set([key]))
  }

  /** The steps from `base` to the latest generation, oldest first; null when one is missing. */
  #chain (base) {
    const out = []
    let g = this.latest.generation
    while (g !== base) {
      const step = this.steps.get(g)
      if (!step) return null
      out.push(step)
      g = step.value.base
    }
    return out.reverse()
  }

  /**
   * The generation app server `id` must hold for its lease to count
   * (docs/control-plane.md, "Who needs a generation"): the last one that
   * changed its slices or listed it anew; the latest for a server no
   * generation since the first map has touched or that the map does not list.
   */
  needs (id) {
    if (!this.latest) return 0
    const g = this.touched.get(id)
    return g === undefined ? this.latest.generation : g
  }

  /** What target `key` must hold: a front end every generation, an app server what it needs. */
  #due (key) {
    return key.startsWith('server:') ? this.needs(key.slice(7)) : this.latest.generation
  }

  /** The generation target `key` acknowledged last (0: none, or no such target). */
  ackedBy (key) {
    const t = this.targets.get(key)
    return t ? t.acked : 0
  }

  /** Targets that have not acknowledged what they must hold (front ends: the latest generation). */
  lagging () {
    const out = []
    if (!this.latest) return out
    for (const [key, t] of this.targets) {
      if (t.acked < this.#due(key)) out.push({ target: key, acked: t.acked, failures: t.failures })
    }
    return out
  }

  /** How many targets have not acknowledged what they must hold (O(targets), no allocation). */
  laggingCount () {
    if (!this.latest) return 0
    let n = 0
    for (const [key, t] of this.targets) if (t.acked < this.#due(key)) n++
    return n
  }

  /** Whether a push to `key` would go over a lease stream. */
  #streams (key) {
    return key.startsWith('server:') && this.canStream(key.slice(7))
  }

  #kick (key) {
    const t = this.targets.get(key)
    if (!t || t.inflight || t.timer || !this.latest || this.closed) return
    if (t.acked >= this.latest.generation) return
    const streamed = this.#streams(key)
    if (streamed ? this.inflightStreamed >= this.streamConcurrency : this.inflight >= this.concurrency) {
      const w = streamed ? this.waiting.stream : this.waiting.http
      // Queued once: a key queued the other way (its stream opened or broke since) moves here, urgent if it was.
      const other = streamed ? this.waiting.http : this.waiting.stream
      other.queue.delete(key)
      if (other.urgent.delete(key) || w.urgent.has(key)) w.urgent.add(key)
      else w.queue.add(key)
      return
    }
    this.#unqueue(key) // sent now: out of any queue it waited in
    this.#send(key, t)
  }

  /** Start queued pushes of each kind while it has room, urgent ones first. */
  #next () {
    this.#drain(this.waiting.http, () => this.inflight < this.concurrency)
    this.#drain(this.waiting.stream, () => this.inflightStreamed < this.streamConcurrency)
  }

  #drain (w, room) {
    while (room() && w.urgent.size + w.queue.size > 0) {
      const from = w.urgent.size > 0 ? w.urgent : w.queue
      const key = from.values().next().value
      from.delete(key)
      // Sent now, or queued again by how it goes now (its stream opened or broke meanwhile).
      this.#kick(key)
    }
  }

  async #send (key, t) {
    const assignment = this.latest
    const base = t.full ? 0 : t.acked
    const b = this.bodyFor(base)
    const viaStream = this.#streams(key)
    t.inflight = true
    if (viaStream) this.inflightStreamed++
    else this.inflight++
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
      const streamed = viaStream ? this.viaStream(key.slice(7), b, this.http.timeoutMs) : null
      if (streamed) this.stats.streamed++
      const res = await (streamed || this.http.put(`${t.url}/v1/assignment`, b.body, { headers: b.headers, sign: b.hash === null }))
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
        // (a refusal from the very base it was sent from would repeat forever: the full map then)
        if (Number.isSafeInteger(held) && held > 0 && held !== base && this.history.has(held)) {
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
      if (viaStream) this.inflightStreamed--
      else this.inflight--
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
    for (const w of Object.values(this.waiting)) {
      w.queue.clear()
      w.urgent.clear()
    }
    // pushes in flight end with their timeout; the pool's idle sockets do not hold the process open
    this.http.close().catch(() => {})
  }
}

/**
 * Server ids whose slices a diff of `base` changes: every server listed (as
 * owner, replica or holder) by a slice the diff replaces or brings, and every
 * server it adds, removes or moves to another URL.
 */
function touchedBy (base, diff) {
  const out = new Set([...Object.keys(diff.servers.set), ...diff.servers.remove])
  const add = (s) => {
    for (const id of s.servers) out.add(id)
    if (s.holders) for (const id of s.holders) out.add(id)
  }
  const old = base.slices
  let i = 0
  // Splices are sorted and start at slice boundaries of `base`: one walk over both.
  for (const sp of diff.splices) {
    while (old[i].end <= sp.start) i++
    for (; i < old.length && old[i].start < sp.end; i++) add(old[i])
    for (const s of sp.slices) add(s)
  }
  return out
}

const EMPTY_SET = new Set()
const COMMA = Buffer.from(',')
const EMPTY = Buffer.alloc(0)
const CLOSE = Buffer.from(']}')

module.exports = { Pusher, touchedBy }
