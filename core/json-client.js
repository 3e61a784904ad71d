'use strict'

const { Agent, request } = require('undici')
const { InvalidArgumentError, PeerStatusError, TimeoutError } = require('./errors')
const { signRequest, validateToken } = require('./request-signing')

const EMPTY = Buffer.alloc(0)

/**
 * The control plane's HTTP client: JSON requests between Chopper's own
 * members (the controller's pushes and load collection, members' calls to the
 * controller) over an undici keep-alive pool.
 *
 * A push of an assignment costs the sender about a third of axios's CPU
 * (`node bench/control-http.js`, bench/README.md), and a body serialized
 * once (`json()`) goes to every target as the same bytes.
 *
 * Answers:
 *  - 2xx resolves `{ status, headers, data }`; `data` is the parsed JSON, or
 *    the text when it does not parse (undefined when empty);
 *  - any other status rejects with PeerStatusError, whose `response` is
 *    `{ status, headers, data }` as above;
 *  - no answer within `timeoutMs` (connecting, sending and reading the whole
 *    answer) rejects with TimeoutError;
 *  - anything else (refused, reset) rejects with undici's error, whose `code`
 *    says which (ECONNREFUSED, UND_ERR_SOCKET, ...).
 *
 * With a cluster token every request is signed (core/cluster-auth.js) over
 * its method, its path and query as sent, and its body.
 */
class JsonClient {
  #token

  /**
   * @param {{ timeoutMs?: number, clusterToken?: string, connections?: number }} [options]
   *   connections: per origin (a member's control port)
   */
  constructor ({ timeoutMs = 2000, clusterToken, connections = 4 } = {}) {
    if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new InvalidArgumentError('invalid timeoutMs: expected an integer >= 1')
    if (clusterToken !== undefined && validateToken(clusterToken) === undefined) throw new InvalidArgumentError('invalid clusterToken: expected the cluster token')
    this.timeoutMs = timeoutMs
    this.#token = clusterToken
    this.agent = new Agent({ connections, keepAliveTimeout: 10000, connect: { timeout: timeoutMs } })
  }

  /**
   * @param {string} method
   * @param {string} url absolute
   * @param {{ body?: object|Buffer, query?: Record<string, string|number>, headers?: object, sign?: boolean }} [options]
   *   body: an object is sent as JSON; a Buffer (from `json()`) as it is, as JSON;
   *   headers: added (a gzip body's content-encoding, a map signature);
   *   sign: false leaves the request unsigned (a body that signs itself: signMap);
   *   timeoutMs: this request's, instead of the client's
   */
  async request (method, url, { body, query, headers: extra, sign = true, timeoutMs = this.timeoutMs } = {}) {
    const target = new URL(url)
    if (query) for (const [k, v] of Object.entries(query)) target.searchParams.append(k, String(v))
    const payload = body === undefined ? undefined : (Buffer.isBuffer(body) ? body : json(body))
    const headers = { accept: 'application/json' }
    if (payload !== undefined) headers['content-type'] = 'application/json'
    if (extra) Object.assign(headers, extra)
    const upper = method.toUpperCase()
    if (this.#token !== undefined && sign) Object.assign(headers, signRequest({ token: this.#token, method: upper, path: target.pathname + target.search, body: payload }))
    const signal = AbortSignal.timeout(timeoutMs)
    let res
    let text
    try {
      res = await request(target, { method: upper, headers, body: payload, dispatcher: this.agent, signal })
      text = await res.body.text()
    } catch (err) {
      if (signal.aborted) throw new TimeoutError(`${upper} ${target.origin}${target.pathname}: no answer within ${timeoutMs} ms`, { cause: err })
      throw err
    }
    const response = { status: res.statusCode, headers: res.headers, data: parse(text) }
    if (res.statusCode >= 200 && res.statusCode < 300) return response
    const code = response.data && response.data.error && response.data.error.code
    const err = new PeerStatusError(`${upper} ${target.origin}${target.pathname}: HTTP ${res.statusCode}${code ? ` ${code}` : ''}`)
    err.response = response
    throw err
  }

  get (url, options) { return this.request('GET', url, options) }
  post (url, body, options) { return this.request('POST', url, { ...options, body }) }
  put (url, body, options) { return this.request('PUT', url, { ...options, body }) }
  delete (url, options) { return this.request('DELETE', url, options) }

  /** Let calls in flight finish (each within its timeout), then close the pool. */
  async close () {
    await this.agent.close()
  }

  /** Close the pool now: calls in flight reject. */
  async destroy () {
    await this.agent.destroy()
  }
}

/** A body serialized once, to send as it is (to several targets, say). */
function json (value) {
  return value === undefined ? EMPTY : Buffer.from(JSON.stringify(value), 'utf8')
}

/** JSON when it parses (whatever the Content-Type says), else the text. */
function parse (text) {
  if (text === '') return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text // not JSON: the caller's checks of its shape refuse it
  }
}

module.exports = { JsonClient, json }
