'use strict'

const { setTimeout: delay } = require('node:timers/promises')
const { UpstreamPool, UpstreamError } = require('../../core/upstream-h1')
const { InvalidArgumentError } = require('../../core/errors')
const { silent } = require('../../core/logger')
const { signRequest } = require('../../core/cluster-auth')

/** The internal route every replica serves on its data port (routes.js). */
const FENCE_PATH = '/kv/_fence'
const PHASES = Object.freeze(['hold', 'release', 'abort', 'lapse'])
/** A replica's read of a key a write holds, asked of that write's writer (ask). */
const READ_PHASE = 'read'
const RETRY_MS = 25 // between attempts at one replica, after a network error or a 5xx
const WATCH_MS = 25 // how often an attempt still waiting for its answer asks whether its replica was dropped
const CONNECTIONS = 32 // keep-alive connections per replica
const never = () => false
const fencePath = (key) => `${FENCE_PATH}?key=${encodeURIComponent(key)}`

/**
 * What a signed fence binds besides its path (the key) and body (the value):
 * the replica it is for and every header the replica acts on. Without the
 * target, a fence captured on its way to one replica could be replayed to
 * another within the replay window; without the headers, changed on the way.
 * The sender passes its own values, the receiver what it received.
 */
function fenceContext ({ to, phase, fenceId, from, generation, version, contentType, heldReads }) {
  const v = (x) => (x === undefined ? '' : String(x))
  const base = `kv-fence\nto:${v(to)}\nphase:${v(phase)}\nid:${v(fenceId)}\nfrom:${v(from)}\ngeneration:${v(generation)}\nversion:${v(version)}\ncontent-type:${v(contentType)}`
  // only when sent, so a fence without it signs as before this header existed
  return heldReads === undefined ? base : `${base}\nheld-reads:${heldReads}`
}

/**
 * The writing primary's side of write fencing: send one phase (`hold`,
 * `release` with the new version, or `abort`) for one key to every other
 * replica of its slice, in parallel, over keep-alive connections.
 *
 * Each replica is retried after network errors and 5xx answers until it
 * answers or `timeoutMs` has passed since the phase started. The shard guard
 * on the replica admits the request only when that replica admits the key's
 * slice; it may hold it (up to its holdMs) while a newer map is on its way,
 * which is why `timeoutMs` exceeds appserver-lib's holdMs (2 s) by default.
 *
 * Outcomes per replica: `ok` (applied), `not_admitted` (421: the replica does
 * not admit the slice now; it distrusts its cache when it gains it again),
 * `dropped` (the caller's `dropped(target)` said a newer map settled the slice
 * without it: asked after every failed or refused attempt, and every WATCH_MS
 * while one waits for its answer, which is then abandoned), `failed`
 * (unreachable, timed out, or refused with another status).
 *
 * With a cluster token every attempt is signed afresh (core/cluster-auth.js,
 * bound to its target and headers by fenceContext), and replicas refuse
 * unsigned fences.
 *
 * Fences go over core/upstream-h1.js, the front end's own keep-alive client
 * (head and body in one write, the answer parsed in place), not undici's
 * `request()`: a fence is a small POST with a small answer, several per
 * replicated write; in scenario 1 it costs the app servers an eighth less
 * CPU per request.
 */
class FenceClient {
  #token // the cluster token; kept off the object's enumerable state

  /**
   * @param {object} options
   * @param {string} options.serverId sent as X-KV-Fence-From
   * @param {number} options.timeoutMs per phase, every retry included
   * @param {string} [options.clusterToken] sign every fence with it
   * @param {{ fencesSent }} [options.metrics]
   */
  constructor ({ serverId, timeoutMs, clusterToken, metrics = null, logger = silent }) {
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new InvalidArgumentError('invalid fenceTimeoutMs: expected an integer >= 1')
    this.serverId = serverId
    this.#token = clusterToken
    this.timeoutMs = timeoutMs
    this.metrics = metrics
    this.logger = logger
    this.pools = new Map() // origin -> UpstreamPool
    this.closed = false
  }

  /**
   * @param {'hold'|'release'|'abort'|'lapse'} phase
   * @param {{ id: string, url?: string }[]} targets the other replicas (url undefined: not known)
   * @param {{ key: string, generation: number, fenceId: string, version?: bigint, value?: Buffer, contentType?: string,
   *   heldReads?: 'ask', dropped?: (target: object) => boolean }} what
   *   heldReads (hold only): `X-KV-Held-Reads: ask`, the replica asks this writer for reads of the key while held
   *   value (release only): the written value, which the replica caches at `version` instead of a bare fence;
   *   dropped: whether the replica no longer needs this phase (never, when not given)
   * @returns {Promise<{ ok: object[], notAdmitted: object[], dropped: object[], failed: { target, reason, status? }[] }>}
   *   status: the replica's answer, when it answered with a 4xx other than 421 (a refusal)
   */
  async send (phase, targets, { key, generation, fenceId, version, value, contentType, heldReads, dropped = never }) {
    if (!PHASES.includes(phase)) throw new InvalidArgumentError(`invalid fence phase: ${JSON.stringify(phase)}`)
    const deadline = Date.now() + this.timeoutMs
    const headers = this.#headers(phase, generation, fenceId)
    if (version !== undefined) headers['x-kv-version'] = version.toString()
    if (phase === 'hold' && heldReads !== undefined) headers['x-kv-held-reads'] = heldReads
    const body = phase === 'release' && value !== undefined ? value : undefined
    if (body !== undefined) headers['content-type'] = contentType
    const path = fencePath(key)
    const context = (to) => fenceContext({ to, phase, fenceId, from: this.serverId, generation, version, contentType: headers['content-type'], heldReads: headers['x-kv-held-reads'] })
    const results = await Promise.all(targets.map((t) => this.#one(t, path, headers, deadline, body, context, dropped)))
    const out = { ok: [], notAdmitted: [], dropped: [], failed: [] }
    results.forEach((r, i) => {
      const target = targets[i]
      if (this.metrics) this.metrics.fencesSent.inc({ phase, outcome: r.outcome })
      if (r.outcome === 'ok') out.ok.push(target)
      else if (r.outcome === 'not_admitted') out.notAdmitted.push(target)
      else if (r.outcome === 'dropped') out.dropped.push(target)
      else out.failed.push(r.status === undefined ? { target, reason: r.reason } : { target, reason: r.reason, status: r.status })
    })
    return out
  }

  async #one (target, path, headers, deadline, body, context, dropped) {
    let reason = 'timed out'
    for (;;) {
      if (!target.url) return dropped(target) ? { outcome: 'dropped' } : { outcome: 'failed', reason: `no URL known for server ${target.id}` }
      const left = deadline - Date.now()
      if (left <= 0) return { outcome: 'failed', reason }
      // An attempt at a replica that hangs (a host gone without a reset) is
      // abandoned as soon as a newer map drops that replica (checked every
      // WATCH_MS until its answer begins).
      try {
        const { url, signed } = this.#attempt(target, path, headers, body, context)
        const res = await this.#post(url, signed, body, left, () => dropped(target))
        if (res.statusCode === 204) return { outcome: 'ok' }
        if (res.statusCode === 421) return { outcome: 'not_admitted' }
        reason = `HTTP ${res.statusCode} ${res.body.toString('utf8', 0, 200)}`
        // 5xx (the replica's Redis and store are fine to retry on) is retried; 4xx is a bug or a
        // forgery check (a clock skewed past the replay window), which does not matter from a
        // replica that no longer needs the phase.
        if (res.statusCode < 500) return dropped(target) ? { outcome: 'dropped' } : { outcome: 'failed', reason, status: res.statusCode }
      } catch (err) {
        reason = err.code || err.message
      }
      // Asked after a failed attempt, not before the first: a dropped replica
      // that is up and answers within WATCH_MS still gets its phase (it answers
      // a hold with 421, and a release lifts its hold at once instead of at the
      // lapse); one slower than that is left to its hold's lapse, which costs it
      // nothing it needs: it does not admit the slice, and when it gains it
      // again it distrusts its cache.
      if (dropped(target)) return { outcome: 'dropped' }
      const wait = Math.min(RETRY_MS, deadline - Date.now())
      if (wait > 0) await delay(wait)
    }
  }

  /**
   * A replica's read of `key` while a write of `target` (the writer) holds it
   * here (docs/replication.md, kv-cache: held reads): one attempt, answered by
   * the writer's own read of the key. `have`: the version this replica has
   * cached; the writer then answers 204 when that is still its value.
   *
   * Outcomes: `current` (the writer's value is version `have`), `value` (its
   * value: `item`), `none` (no value), `gone` (the writer refused the
   * connection or does not admit the key's slice: it serves nothing of it
   * from a cache, so a DynamoDB read is safe), `unsure` (anything else: no
   * answer in time, a 5xx, or 409 when the writer is itself held by another
   * write; `reason` says which).
   * @param {{ id: string, url: string }} target
   * @param {{ key: string, generation: number, fenceId: string, have?: bigint, timeoutMs: number }} what
   * @returns {Promise<{ outcome: 'current'|'value'|'none'|'gone'|'unsure', item?: object, reason?: string }>}
   */
  async ask (target, { key, generation, fenceId, have, timeoutMs }) {
    const outcome = await this.#ask(target, { key, generation, fenceId, have, timeoutMs })
    if (this.metrics && this.metrics.writerAsks) this.metrics.writerAsks.inc({ outcome: outcome.outcome })
    return outcome
  }

  async #ask (target, { key, generation, fenceId, have, timeoutMs }) {
    const headers = this.#headers(READ_PHASE, generation, fenceId)
    if (have !== undefined) headers['x-kv-version'] = have.toString()
    const context = (to) => fenceContext({ to, phase: READ_PHASE, fenceId, from: this.serverId, generation, version: headers['x-kv-version'] })
    try {
      const { url, signed } = this.#attempt(target, fencePath(key), headers, undefined, context)
      const res = await this.#post(url, signed, undefined, timeoutMs)
      const body = res.body
      const ver = res.headers['x-kv-version']
      if (res.statusCode === 204 && have !== undefined && ver === have.toString()) return { outcome: 'current' }
      if (res.statusCode === 200 && typeof ver === 'string' && /^\d{1,32}$/.test(ver)) {
        return { outcome: 'value', item: { value: body, contentType: res.headers['content-type'] || 'application/octet-stream', ver: BigInt(ver) } }
      }
      if (res.statusCode === 404) return { outcome: 'none' }
      if (res.statusCode === 421) return { outcome: 'gone' }
      return { outcome: 'unsure', reason: `HTTP ${res.statusCode} ${body.toString('utf8', 0, 200)}` }
    } catch (err) {
      // Refused: nothing listens there, so nothing serves the key from that writer's cache.
      if (err.code === 'ECONNREFUSED') return { outcome: 'gone' }
      return { outcome: 'unsure', reason: err.code || err.message }
    }
  }

  /**
   * One POST of `headers` (an object) and `body` to `url` over the replica's
   * keep-alive pool. Resolves with the answer ({ statusCode, headers (lower-
   * case names, the first of each), body: Buffer }) or rejects with an error
   * whose code says why: the socket's (ECONNREFUSED, ...), UND_ERR_SOCKET (the
   * connection closed early), UND_ERR_HEADERS_TIMEOUT (no complete answer
   * within `timeoutMs`, connecting included), UND_ERR_ABORTED (`abandon()`
   * said so: asked every WATCH_MS until the answer's head arrives; an answer
   * that has begun is read to the end).
   * @param {URL} url
   * @param {Object<string, string>} headers
   * @param {Buffer} [body]
   * @param {number} timeoutMs
   * @param {() => boolean} [abandon]
   */
  #post (url, headers, body, timeoutMs, abandon = null) {
    const flat = []
    for (const name of Object.keys(headers)) flat.push(name, headers[name])
    flat.push('content-length', String(body === undefined ? 0 : body.length))
    return new Promise((resolve, reject) => {
      let settled = false
      let abort = null
      let status = 0
      let raw = null
      const chunks = []
      let watch = null
      const finish = (err, answer) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        clearTimeout(watch)
        if (err) reject(err)
        else resolve(answer)
      }
      // Settle first: the abort's own error (onError) then finds it settled.
      const stop = (err) => {
        finish(err)
        if (abort !== null) abort()
      }
      const timer = setTimeout(() => stop(new UpstreamError(`no answer from ${url.origin} within ${timeoutMs} ms`, 'UND_ERR_HEADERS_TIMEOUT')), timeoutMs)
      if (abandon !== null) {
        const check = () => {
          if (abandon()) stop(new UpstreamError('request abandoned: the replica was dropped', 'UND_ERR_ABORTED'))
          else watch = setTimeout(check, WATCH_MS)
        }
        watch = setTimeout(check, WATCH_MS)
      }
      const handler = {
        onConnect (fn) {
          abort = fn
          if (settled) fn() // timed out or abandoned while queued for a connection: never sent
        },
        onHeaders (statusCode, rawHeaders) {
          status = statusCode
          raw = rawHeaders
          clearTimeout(watch) // it answered: read the (small) answer to the end
          return true
        },
        onData (chunk) {
          chunks.push(chunk)
          return true
        },
        onComplete () {
          const names = {}
          for (let i = 0; i < raw.length; i += 2) {
            const name = raw[i].toLowerCase()
            if (!(name in names)) names[name] = raw[i + 1]
          }
          finish(null, { statusCode: status, headers: names, body: chunks.length === 1 ? chunks[0] : Buffer.concat(chunks) })
        },
        onError (err) {
          finish(err)
        }
      }
      this.#pool(url).dispatch({ method: 'POST', path: url.pathname + url.search, headers: flat, body }, handler)
    })
  }

  /**
   * The keep-alive pool for `url`'s origin (one per replica). Before a new
   * one is made, pools left with no connection (a replica gone, or one that
   * came back on another port) are closed, so they do not pile up as
   * members come and go.
   */
  #pool (url) {
    let pool = this.pools.get(url.origin)
    if (pool === undefined) {
      for (const [origin, old] of this.pools) {
        if (old.all.size === 0 && old.queue.length === 0) {
          old.close()
          this.pools.delete(origin)
        }
      }
      pool = new UpstreamPool(url.origin, { connections: CONNECTIONS, timeoutMs: this.timeoutMs })
      if (this.closed) pool.close()
      else this.pools.set(url.origin, pool)
    }
    return pool
  }

  /**
   * One attempt's URL and headers: with a cluster token, signed afresh for
   * `target` over the path as sent (normalized by URL), the body and
   * `context(target.id)`.
   */
  #attempt (target, path, headers, body, context) {
    const url = new URL(target.url + path)
    if (this.#token === undefined) return { url, signed: headers }
    return { url, signed: { ...headers, ...signRequest({ token: this.#token, method: 'POST', path: url.pathname + url.search, body, context: context(target.id) }) } }
  }

  /** The headers every fence request carries. */
  #headers (phase, generation, fenceId) {
    return {
      'x-chopper-generation': String(generation),
      'x-kv-fence': phase,
      'x-kv-fence-id': fenceId,
      'x-kv-fence-from': this.serverId
    }
  }

  /** No new fences; idle connections close now, busy ones once their answer ends. */
  async close () {
    this.closed = true
    for (const pool of this.pools.values()) pool.close()
    this.pools.clear()
  }
}

module.exports = { FenceClient, FENCE_PATH, PHASES, READ_PHASE, fenceContext }
