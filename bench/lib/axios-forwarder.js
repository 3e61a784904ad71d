'use strict'

const http = require('node:http')
const axios = require('axios')
const { RETRY_NEWER_MAP, OWNER_HINT } = require('../../core/http')
const { appendResponseHeaders } = require('../../core/forwarder')

/**
 * The front end's upstream through axios, for comparison only
 * (bench/forwarding.js, bench/proxies): the same attempt contract as
 * core/forwarder.js's UndiciForwarder, passed to createFrontend as its
 * `forwarder`. Production axios users call Chopper through the client's
 * axios adapter (client/axios-adapter.js), which routes in the caller.
 */
class AxiosForwarder {
  constructor ({ connections, timeoutMs }) {
    this.agent = new http.Agent({ keepAlive: true, maxSockets: connections })
    this.http = axios.create({
      httpAgent: this.agent,
      timeout: timeoutMs,
      responseType: 'stream',
      validateStatus: () => true,
      maxRedirects: 0,
      decompress: false,
      transformRequest: [(data) => data]
    })
  }

  attempt ({ origin, request, sink: res, extra, done, tracker = null, slot = 0, size = 1 }) {
    const handle = { abort: null }
    let ended = tracker === null
    const end = () => {
      if (ended) return
      ended = true
      tracker.end(slot, size)
    }
    if (tracker !== null) tracker.begin(slot, size)
    handle.sentAt = tracker === null ? 0 : performance.now()
    this.#attempt(origin, request, res, extra, handle, end, tracker, slot).then((outcome) => done(null, outcome), (err) => { end(); done(err) })
    return handle
  }

  async #attempt (origin, { method, path, headers, body }, res, extra, handle, end, tracker, slot) {
    const object = {}
    for (let i = 0; i < headers.length; i += 2) object[headers[i]] = headers[i + 1]
    let upstream
    // The client may leave before the head arrives: abortUpstream cancels the request.
    const cancel = new AbortController()
    handle.abort = () => cancel.abort()
    try {
      upstream = await this.http.request({ url: origin + path, method, headers: object, data: body, signal: cancel.signal })
    } catch (err) {
      if (res.destroyed) { end(); return null } // the client left: nothing to retry for
      // Map axios' wrapper to the underlying socket code, as undici reports it.
      if (err.code === 'ECONNABORTED') err.code = 'UND_ERR_HEADERS_TIMEOUT'
      throw err
    }
    const stream = upstream.data
    // The exchange is over when the upstream body ended, failed or was destroyed.
    stream.once('end', end)
    stream.once('close', end)
    stream.once('error', end)
    if (res.destroyed) { // the client left while we waited for the head
      stream.destroy()
      return null
    }
    if (upstream.status === 421 || (upstream.status === 503 && upstream.headers[RETRY_NEWER_MAP.name] === RETRY_NEWER_MAP.value)) {
      stream.resume()
      return { misdirected: true, generation: Number(upstream.headers['x-chopper-generation']), owners: upstream.headers[OWNER_HINT] || null }
    }
    const raw = []
    for (const [name, value] of Object.entries(upstream.headers)) {
      if (Array.isArray(value)) for (const v of value) raw.push(name, String(v))
      else if (value !== undefined) raw.push(name, String(value))
    }
    const forwarded = []
    const inflight = appendResponseHeaders(raw, forwarded)
    if (inflight !== -1 && tracker !== null) tracker.report(slot, inflight, handle.sentAt)
    res.writeHead(upstream.status, forwarded.concat(extra))
    stream.once('error', (err) => res.destroy(err))
    handle.abort = () => stream.destroy()
    // By hand, not pipe(): `res` may be the data server's own response
    // (frontend/fast-http.js), which has write/end/'drain' and no more.
    const resume = () => stream.resume()
    stream.on('data', (chunk) => {
      if (!res.write(chunk)) {
        stream.pause()
        res.once('drain', resume)
      }
    })
    stream.once('end', () => res.end())
    return null
  }

  forget () {}

  async close () {
    this.agent.destroy()
  }
}

module.exports = { AxiosForwarder }
