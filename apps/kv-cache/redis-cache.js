'use strict'

const crypto = require('node:crypto')
const Redis = require('ioredis')
const { contains } = require('../../core/ranges')
const { silent } = require('../../core/logger')

const NL = 0x0a

/**
 * The look-aside cache in Redis (paper 6.1: each app server runs its own).
 *
 * Keys are `chopper:kv:<serverId>:<instance>:<slice key, 8 hex>:<app key>`.
 * The per-process instance id means a restarted server never trusts what an
 * earlier incarnation cached (it may have missed writes while down), and two
 * servers pointed at one Redis by mistake cannot read each other's entries.
 * The slice key in the name lets a released range be dropped with one SCAN.
 *
 * Values are `<tag> <content type>\n<bytes>`: one GETEX reads the entry and
 * restarts its TTL ("10 s after the last access").
 *
 * Every command fails fast while the connection is down (no offline queue):
 * the caller then serves from DynamoDB instead of waiting for Redis.
 */
class RedisCache {
  /**
   * @param {object} options
   * @param {string} options.url redis:// URL
   * @param {number} options.ttlMs
   * @param {number} options.timeoutMs per command
   * @param {string} options.serverId
   * @param {(healthy: boolean, err?: Error) => void} [options.onHealth] called on every change
   */
  constructor ({ url, ttlMs, timeoutMs, serverId, onHealth = () => {}, logger = silent }) {
    this.backend = 'redis'
    this.url = url
    this.ttlMs = ttlMs
    this.logger = logger
    this.onHealth = onHealth
    this.prefix = `chopper:kv:${serverId}:${crypto.randomBytes(6).toString('base64url')}:`
    this.healthy = false
    this.client = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: timeoutMs,
      connectTimeout: Math.max(timeoutMs, 1000),
      // Keep retrying (a restarted Redis is picked up within a second) but
      // never block requests on it.
      retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 5), 1000),
      disableClientInfo: true,
      protocol: 2,
      // ioredis arms this timer on disconnect even when the socket is already
      // gone (Redis died), and it would hold the process open for 2 s.
      disconnectTimeout: 100
    })
    this.client.on('ready', () => this.#setHealthy(true))
    this.client.on('close', () => this.#setHealthy(false))
    // ioredis reports every failed reconnect; the health transition is logged once.
    this.client.on('error', (err) => this.#setHealthy(false, err))
  }

  /** Wait until connected or `timeoutMs` passed; never throws (an unreachable Redis means degraded mode). */
  async waitReady (timeoutMs) {
    if (this.client.status === 'ready') return true
    return new Promise((resolve) => {
      const done = (ok) => {
        clearTimeout(timer)
        this.client.off('ready', onReady)
        resolve(ok)
      }
      const onReady = () => done(true)
      const timer = setTimeout(() => done(false), timeoutMs)
      this.client.on('ready', onReady)
    })
  }

  #setHealthy (healthy, err) {
    if (healthy === this.healthy) return
    this.healthy = healthy
    this.onHealth(healthy, err)
  }

  #key (key, sliceKey) {
    return this.prefix + sliceKey.toString(16).padStart(8, '0') + ':' + key
  }

  async #run (fn) {
    try {
      const out = await fn()
      this.#setHealthy(true)
      return out
    } catch (err) {
      this.#setHealthy(false, err)
      throw err
    }
  }

  /** Read an entry and restart its TTL. @returns {Promise<{tag, contentType, value}|null>} */
  async get (key, sliceKey) {
    const buf = await this.#run(() => this.client.getexBuffer(this.#key(key, sliceKey), 'PX', this.ttlMs))
    if (buf === null) return null
    const nl = buf.indexOf(NL)
    const head = buf.toString('latin1', 0, nl)
    const sp = head.indexOf(' ')
    return { tag: Number(head.slice(0, sp)), contentType: head.slice(sp + 1), value: buf.subarray(nl + 1) }
  }

  async set (key, sliceKey, { tag, contentType, value }) {
    const buf = Buffer.concat([Buffer.from(`${tag} ${contentType}\n`, 'latin1'), value])
    await this.#run(() => this.client.set(this.#key(key, sliceKey), buf, 'PX', this.ttlMs))
  }

  async del (key, sliceKey) {
    return this.#run(() => this.client.del(this.#key(key, sliceKey)))
  }

  /** Drop every entry whose slice key lies in the normalized `ranges`; returns how many. */
  async dropRanges (ranges) {
    let cursor = '0'
    let dropped = 0
    const match = this.prefix + '*'
    const at = Buffer.byteLength(this.prefix)
    do {
      const [next, keys] = await this.#run(() => this.client.scanBuffer(cursor, 'MATCH', match, 'COUNT', 1000))
      cursor = next.toString()
      const doomed = keys.filter((k) => contains(ranges, parseInt(k.toString('latin1', at, at + 8), 16)))
      if (doomed.length) dropped += await this.#run(() => this.client.unlink(...doomed))
    } while (cursor !== '0')
    return dropped
  }

  async close () {
    this.client.removeAllListeners('close')
    this.client.on('error', () => {})
    try {
      await this.client.quit()
    } catch {
      this.client.disconnect()
    }
  }
}

module.exports = { RedisCache }
