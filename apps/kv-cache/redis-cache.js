'use strict'

const crypto = require('node:crypto')
const Redis = require('ioredis')
const { contains } = require('../../core/ranges')
const { silent } = require('../../core/logger')

const NL = 0x0a
const VER_WIDTH = 40 // versions have at most 32 digits (version.js)

// Set KEYS[1] to ARGV[1] with TTL ARGV[3] ms unless it holds a newer version
// than ARGV[2]. GETRANGE reads only the version, not a 400 KB value.
const SET_IF_NOT_OLDER = `
local held = redis.call('GETRANGE', KEYS[1], 0, ${VER_WIDTH - 1})
if held ~= '' and held > ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
return 1
`

/**
 * The look-aside cache in Redis (paper 6.1: each app server runs its own).
 *
 * Keys are `chopper:kv:<serverId>:<instance>:<slice key, 8 hex>:<app key>`.
 * The per-process instance id means a restarted server never trusts what an
 * earlier incarnation cached (it may have missed writes while down), and two
 * servers pointed at one Redis by mistake cannot read each other's entries.
 * The slice key in the name lets a released range be dropped with one SCAN.
 *
 * Values are `<version, 40 digits> <tag> <content type>\n<bytes>`: one GETEX
 * reads the entry and restarts its TTL ("10 s after the last access"). The
 * version is zero-padded so that Lua can compare two of them as strings: SET
 * goes through a script that never replaces an entry with an older version.
 *
 * Every command fails fast while the connection is down (no offline queue):
 * the caller then serves from DynamoDB instead of waiting for Redis.
 *
 * When Redis becomes usable again after it was not, the reconnect listeners
 * run before any command can succeed on the new connection: a restarted Redis
 * may come back with an older snapshot, and entries may have changed while we
 * could not see them, so the service distrusts everything cached before.
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
    this.wasHealthy = false // a later change to healthy is a reconnect
    this.reconnectListeners = []
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
    this.client.defineCommand('chopperSetIfNotOlder', { numberOfKeys: 1, lua: SET_IF_NOT_OLDER })
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

  /** Run `fn` (synchronously) each time Redis becomes usable again after it was not. */
  onReconnect (fn) {
    this.reconnectListeners.push(fn)
  }

  #setHealthy (healthy, err) {
    if (healthy === this.healthy) return
    this.healthy = healthy
    if (healthy && this.wasHealthy) for (const fn of this.reconnectListeners) fn()
    if (healthy) this.wasHealthy = true
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

  /** Read an entry and restart its TTL. @returns {Promise<{tag: number, ver: bigint, contentType: string, value: Buffer}|null>} */
  async get (key, sliceKey) {
    const buf = await this.#run(() => this.client.getexBuffer(this.#key(key, sliceKey), 'PX', this.ttlMs))
    if (buf === null) return null
    const nl = buf.indexOf(NL)
    const head = buf.toString('latin1', 0, nl)
    const sp = head.indexOf(' ', VER_WIDTH + 1)
    return {
      tag: Number(head.slice(VER_WIDTH + 1, sp)),
      ver: BigInt(head.slice(0, VER_WIDTH)),
      contentType: head.slice(sp + 1),
      value: buf.subarray(nl + 1)
    }
  }

  /**
   * Store an entry unless Redis holds a newer version of the key.
   * @param {{ tag: number, ver: bigint, contentType: string, value: Buffer }} entry
   * @returns {Promise<boolean>} false when a newer version was kept
   */
  async set (key, sliceKey, { tag, ver, contentType, value }) {
    const padded = ver.toString().padStart(VER_WIDTH, '0')
    const buf = Buffer.concat([Buffer.from(`${padded} ${tag} ${contentType}\n`, 'latin1'), value])
    return (await this.#run(() => this.client.chopperSetIfNotOlder(this.#key(key, sliceKey), buf, padded, this.ttlMs))) === 1
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
