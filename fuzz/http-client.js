'use strict'

const { Pool, errors: undiciErrors } = require('undici')

/** Every option of FuzzClient and its default. */
const defaults = Object.freeze({
  connections: 16, // keep-alive connections per origin
  timeoutMs: 10000, // no answer head (or no end of the body) within this: a timeout
  maxBodyBytes: 64 * 1024 // an answer body longer than this is cut (errors are small)
})

/**
 * A keep-alive HTTP client that sends what the fuzzer generated as is: raw
 * bytes as the body (invalid JSON, wrong encodings), any method, path and
 * headers that undici will put on the wire. One undici Pool per origin.
 *
 * `send` never throws: it resolves `{ status, headers, text }` for an answer,
 * `{ error: 'timeout' }` when none came in time, `{ error: 'transport', code }`
 * when the connection broke, and `{ error: 'client', code }` when undici
 * refused to send the request (a header or path it does not accept: the
 * request never reached the component, and is not counted as a call).
 */
class FuzzClient {
  constructor (options = {}) {
    const opts = { ...defaults, ...options }
    for (const k of Object.keys(defaults)) {
      if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new TypeError(`invalid ${k}: expected an integer >= 1`)
    }
    this.opts = opts
    this.pools = new Map()
  }

  pool (origin) {
    let p = this.pools.get(origin)
    if (!p) {
      p = new Pool(origin, { connections: this.opts.connections, keepAliveTimeout: 30000, headersTimeout: this.opts.timeoutMs, bodyTimeout: this.opts.timeoutMs })
      this.pools.set(origin, p)
    }
    return p
  }

  /**
   * @param {string} origin e.g. http://127.0.0.1:41377
   * @param {{ method: string, path: string, headers?: object, body?: Buffer|string|null, chunked?: boolean }} req
   *   `chunked` sends the body with Transfer-Encoding: chunked (no Content-Length)
   */
  async send (origin, req) {
    const body = req.body === undefined || req.body === null ? null : (req.chunked ? chunks(req.body) : req.body)
    let res
    try {
      res = await this.pool(origin).request({
        method: req.method,
        path: req.path,
        headers: req.headers || {},
        body,
        signal: AbortSignal.timeout(this.opts.timeoutMs)
      })
    } catch (err) {
      return classify(err)
    }
    try {
      const parts = []
      let size = 0
      for await (const chunk of res.body) {
        if (size < this.opts.maxBodyBytes) parts.push(chunk)
        size += chunk.length
      }
      return { status: res.statusCode, headers: res.headers, text: Buffer.concat(parts).toString('utf8'), size }
    } catch (err) {
      return { ...classify(err), status: res.statusCode }
    }
  }

  async close () {
    await Promise.all([...this.pools.values()].map((p) => p.destroy()))
    this.pools.clear()
  }
}

/** A body as several chunks, so undici sends it chunked. */
async function * chunks (body) {
  const buf = Buffer.isBuffer(body) ? body : Buffer.from(body)
  const step = Math.max(1, Math.ceil(buf.length / 3))
  for (let i = 0; i < buf.length; i += step) yield buf.subarray(i, i + step)
}

const CLIENT_CODES = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED'])

function classify (err) {
  if (err.name === 'TimeoutError' || err.name === 'AbortError' || err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError) {
    return { error: 'timeout', code: err.code || err.name }
  }
  if (CLIENT_CODES.has(err.code)) return { error: 'client', code: err.code, message: err.message }
  return { error: 'transport', code: err.code || err.name, message: err.message }
}

module.exports = { FuzzClient, defaults }
