'use strict'

const { silent } = require('../core/logger')
const { JsonClient, json } = require('../core/json-client')

/**
 * Delivers the latest assignment to every registered target (front ends and
 * app servers). Each target converges on the newest generation on its own:
 * a failed or late push is retried with capped exponential backoff, and a
 * retry always sends the newest assignment, never a superseded one.
 */
class Pusher {
  /**
   * @param {object} [options]
   * @param {(key: string, body: object) => void} [options.onAck] a target's answer to a push (app servers report the generation they drained)
   * @param {string} [options.clusterToken] sign every push with it (core/cluster-auth.js)
   */
  constructor ({ timeoutMs = 2000, minBackoffMs = 100, maxBackoffMs = 5000, onAck = () => {}, clusterToken, logger = silent } = {}) {
    this.onAck = onAck
    // Signed pushes (docs/security.md); every retry is signed afresh (its own nonce).
    this.http = new JsonClient({ timeoutMs, clusterToken })
    this.minBackoffMs = minBackoffMs
    this.maxBackoffMs = maxBackoffMs
    this.logger = logger
    this.targets = new Map() // key -> { url, acked, inflight, timer, backoff, failures }
    this.latest = null
    this.latestBody = null // this.latest serialized once, for every target
    this.stats = { pushes: 0, failures: 0, rejected: 0 }
    this.closed = false
  }

  /** Add or update a target (its control URL) and bring it up to date. */
  addTarget (key, controlUrl) {
    const t = this.targets.get(key)
    if (t && t.url === controlUrl) return this.#kick(key)
    if (t) clearTimeout(t.timer)
    this.targets.set(key, { url: controlUrl, acked: 0, inflight: false, timer: null, backoff: this.minBackoffMs, failures: 0 })
    this.#kick(key)
  }

  removeTarget (key) {
    const t = this.targets.get(key)
    if (t) clearTimeout(t.timer)
    this.targets.delete(key)
  }

  /** Publish a new assignment to every target. */
  publish (assignment) {
    this.latest = assignment
    this.latestBody = null
    for (const key of this.targets.keys()) this.#kick(key)
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

  #kick (key) {
    const t = this.targets.get(key)
    if (!t || t.inflight || t.timer || !this.latest || this.closed) return
    if (t.acked >= this.latest.generation) return
    this.#send(key, t)
  }

  async #send (key, t) {
    const assignment = this.latest
    if (this.latestBody === null) this.latestBody = json(assignment)
    const body = this.latestBody
    t.inflight = true
    this.stats.pushes++
    let retry = false
    try {
      const res = await this.http.put(`${t.url}/v1/assignment`, body)
      t.acked = assignment.generation
      t.failures = 0
      t.backoff = this.minBackoffMs
      if (this.targets.get(key) === t) this.onAck(key, res.data)
    } catch (err) {
      const status = err.response && err.response.status
      if (status === 409) {
        // The target already holds a newer generation than this one (we restarted?): nothing to retry.
        t.acked = assignment.generation
        this.stats.rejected++
        this.logger.debug({ target: key, generation: assignment.generation, body: err.response.data }, 'push refused as stale')
      } else {
        t.failures++
        this.stats.failures++
        retry = true
        this.logger.warn({ target: key, generation: assignment.generation, failures: t.failures, err: { code: err.code, status, message: err.message } }, 'assignment push failed; will retry')
      }
    } finally {
      t.inflight = false
    }
    if (this.targets.get(key) !== t || this.closed) return
    if (retry) {
      const wait = t.backoff
      t.backoff = Math.min(t.backoff * 2, this.maxBackoffMs)
      t.timer = setTimeout(() => { t.timer = null; this.#kick(key) }, wait)
    } else {
      this.#kick(key) // a newer assignment may have been published meanwhile
    }
  }

  close () {
    this.closed = true
    for (const t of this.targets.values()) clearTimeout(t.timer)
    // pushes in flight end with their timeout; the pool's idle sockets do not hold the process open
    this.http.close().catch(() => {})
  }
}

module.exports = { Pusher }
