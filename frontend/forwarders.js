'use strict'

const http = require('node:http')
const { Pool } = require('undici')
const axios = require('axios')

/**
 * Two interchangeable upstream clients for the hot forwarding path. Both
 * resolve `{ statusCode, headers, body }` with `body` a readable stream.
 * undici is the default: bench/forwarding.js measures it against axios.
 */

class UndiciForwarder {
  constructor ({ connections, timeoutMs }) {
    this.connections = connections
    this.timeoutMs = timeoutMs
    this.pools = new Map()
  }

  #pool (origin) {
    let pool = this.pools.get(origin)
    if (!pool) {
      pool = new Pool(origin, {
        connections: this.connections,
        keepAliveTimeout: 30000,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs
      })
      this.pools.set(origin, pool)
    }
    return pool
  }

  async request (origin, { method, path, headers, body }) {
    const { statusCode, headers: resHeaders, body: resBody } = await this.#pool(origin).request({ method, path, headers, body })
    return { statusCode, headers: resHeaders, body: resBody }
  }

  /** Drop the pool of a server that left the assignment. */
  forget (origin) {
    const pool = this.pools.get(origin)
    if (pool) {
      this.pools.delete(origin)
      pool.close().catch(() => {})
    }
  }

  async close () {
    const pools = [...this.pools.values()]
    this.pools.clear()
    await Promise.all(pools.map((p) => p.destroy()))
  }
}

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

  async request (origin, { method, path, headers, body }) {
    try {
      const res = await this.http.request({ url: origin + path, method, headers, data: body })
      return { statusCode: res.status, headers: res.headers, body: res.data }
    } catch (err) {
      // Map axios' wrapper to the underlying socket code, as undici reports it.
      if (err.code === 'ECONNABORTED') err.code = 'UND_ERR_HEADERS_TIMEOUT'
      throw err
    }
  }

  forget () {}

  async close () {
    this.agent.destroy()
  }
}

/** @param {'undici'|'axios'} kind */
function createForwarder (kind, options) {
  return kind === 'axios' ? new AxiosForwarder(options) : new UndiciForwarder(options)
}

module.exports = { createForwarder, UndiciForwarder, AxiosForwarder }
