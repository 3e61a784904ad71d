'use strict'

const { Agent, request } = require('undici')
const { resolveMap, isDiff } = require('../core/map-diff')
const { signRead } = require('../core/request-signing')
const { PeerStatusError } = require('../core/errors')

/**
 * Where a client reads the slice map: the controller (`GET /v1/assignment`,
 * signed with the read credential when the cluster has a token) or any
 * member's control port (a front end's or an app server's
 * `GET /v1/assignment`, open: docs/security.md). Each pull asks for a diff
 * from the generation held (`?since=`; members answer the full map) with the
 * last answer's ETag, so an unchanged map costs a 304 and no body.
 *
 * A source that does not answer, or answers as a standby, is skipped for the
 * next one in the list; every failure leaves the map the client holds in
 * place (docs/client.md: what the client promises while the controller is
 * away).
 */
class MapSource {
  #credential

  /**
   * @param {{ urls: string[], credential?: string, timeoutMs: number }} options
   *   urls: the controller's or members' base URLs, tried in order
   */
  constructor ({ urls, credential, timeoutMs }) {
    this.urls = urls
    this.current = 0
    this.#credential = credential
    this.timeoutMs = timeoutMs
    this.etag = null // of the last 200 from urls[current]
    this.agent = new Agent({ connections: 2, keepAliveTimeout: 10000, connect: { timeout: timeoutMs } })
    this.stats = { pulls: 0, unchanged: 0, failures: 0 }
  }

  /**
   * The map to hold after one pull: a full assignment newer than `current`,
   * or null when nothing newer was read. Throws when no source answered.
   * @param {object|null} current the assignment held
   */
  async pull (current) {
    let lastErr
    for (let n = 0; n < this.urls.length; n++) {
      try {
        return await this.#pullFrom(this.urls[this.current], current)
      } catch (err) {
        lastErr = err
        this.stats.failures++
        this.current = (this.current + 1) % this.urls.length
        this.etag = null
      }
    }
    throw lastErr
  }

  async #pullFrom (base, current) {
    this.stats.pulls++
    const generation = current ? current.generation : 0
    const path = `/v1/assignment${generation > 0 ? `?since=${generation}` : ''}`
    const headers = { accept: 'application/json' }
    if (this.etag !== null && generation > 0) headers['if-none-match'] = this.etag
    if (this.#credential !== undefined) Object.assign(headers, signRead({ credential: this.#credential, path }))
    const res = await request(base + path, { dispatcher: this.agent, headers, headersTimeout: this.timeoutMs, bodyTimeout: this.timeoutMs })
    const text = await res.body.text()
    if (res.statusCode === 304) {
      this.stats.unchanged++
      return null
    }
    let body
    try {
      body = text.length > 0 ? JSON.parse(text) : undefined
    } catch {
      body = text
    }
    if (res.statusCode !== 200) {
      const err = new PeerStatusError(`map read from ${base} answered ${res.statusCode}${body && body.error ? ` ${body.error.code}` : ''}`)
      err.response = { status: res.statusCode, headers: res.headers, data: body }
      throw err
    }
    this.etag = typeof res.headers.etag === 'string' ? res.headers.etag : null
    // A member answers { generation, assignment }; the controller the map or a diff itself.
    const next = body && !isDiff(body) && body.slices === undefined ? body.assignment : body
    if (!next || (current && next.generation <= current.generation)) return null
    try {
      return resolveMap(current, next)
    } catch (err) {
      if (err.code !== 'CHOPPER_ERR_DIFF_BASE') throw err
      this.etag = null // a diff from a generation we no longer hold: read the full map
      return this.#pullFrom(base, null)
    }
  }

  close () {
    return this.agent.close()
  }
}

module.exports = { MapSource }
