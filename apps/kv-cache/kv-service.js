'use strict'

const { KeyQueue } = require('./key-queue')
const { OwnershipEpochs } = require('./ownership-epochs')
const { FencedWriteError, StoreUnavailableError } = require('../../core/errors')
const { silent } = require('../../core/logger')

/**
 * The look-aside cache logic of paper 6.1, independent of HTTP:
 * - reads try the cache, and on a miss do a strongly consistent DynamoDB read
 *   and fill the cache;
 * - writes go to DynamoDB first (the source of truth) and are acknowledged
 *   only once it accepted them; then the cache is updated.
 * A cache failure never fails a request: it costs a DynamoDB read, is counted
 * and logged, and distrusts whatever the cache may still hold.
 *
 * Writes carry the assignment generation they were admitted under; DynamoDB
 * refuses a write older than what it holds (dynamo-store.js, version.js), and
 * cache entries carry the version they hold, so a cache set never replaces a
 * newer entry.
 */
class KvService {
  /**
   * @param {object} options
   * @param {import('./dynamo-store').DynamoStore} options.store
   * @param {import('./redis-cache').RedisCache|import('./memory-cache').MemoryCache} options.cache
   * @param {ReturnType<import('./metrics').createMetrics>} options.metrics
   */
  constructor ({ store, cache, metrics, logger = silent }) {
    this.store = store
    this.cache = cache
    this.metrics = metrics
    this.logger = logger
    this.epochs = new OwnershipEpochs()
    this.queue = new KeyQueue()
    this.drops = new Set() // background range drops still running
    // Runs synchronously when Redis is usable again, before any command can
    // succeed on the new connection: a restarted Redis may hold an older
    // snapshot, and entries may have changed while we could not see them.
    cache.onReconnect(() => this.#distrustAll('reconnect'))
  }

  /**
   * @returns {Promise<{ value: Buffer, contentType: string, ver: bigint, cached: boolean } | null>}
   */
  async get (key, sliceKey) {
    let entry = null
    try {
      entry = await this.cache.get(key, sliceKey)
    } catch (err) {
      this.#cacheFailed('get', err)
    }
    if (entry) {
      if (this.epochs.trusts(entry.tag, sliceKey)) {
        this.metrics.hits.inc()
        return { value: entry.value, contentType: entry.contentType, ver: entry.ver, cached: true }
      }
      this.metrics.invalidations.inc({ reason: 'stale' })
    }
    this.metrics.misses.inc()
    const item = await this.queue.read(key, () => this.#fill(key, sliceKey, entry !== null))
    return item && { value: item.value, contentType: item.contentType, ver: item.ver, cached: false }
  }

  async #fill (key, sliceKey, sawStale) {
    // The tag is taken before the read: if this server loses and regains the
    // slice while DynamoDB answers, the entry is born distrusted.
    const tag = this.epochs.now()
    const item = await this.#storeOp('get', () => this.store.get(key))
    if (!this.cache.healthy) return item // degraded: the fill would only fail
    try {
      // KeyQueue runs this after every earlier write of this server to the key,
      // and DynamoDB versions only grow, so the item is never older than an
      // entry we wrote; the cache's version check makes sure of it anyway.
      if (item) await this.cache.set(key, sliceKey, { tag, ver: item.ver, contentType: item.contentType, value: item.value })
      // A distrusted entry for a deleted key would otherwise be kept alive by
      // every GETEX that reads (and refuses) it.
      else if (sawStale) await this.cache.del(key, sliceKey)
    } catch (err) {
      // A failed fill leaves nothing newer than DynamoDB behind: no need to distrust.
      this.#cacheFailed('fill', err)
    }
    return item
  }

  /**
   * Store `value`; resolves with its version once DynamoDB accepted it (the
   * acknowledgement). Rejects with FencedWriteError when a newer generation
   * already wrote the key: nothing was written, so the front end may retry it
   * on the key's current owner.
   * @param {{ generation?: number }} [options] the generation the request was admitted under
   * @returns {Promise<bigint>}
   */
  put (key, sliceKey, value, contentType, { generation = 0 } = {}) {
    return this.queue.write(key, async () => {
      const tag = this.epochs.now()
      const ver = await this.#write('put', key, sliceKey, () => this.store.put(key, value, contentType, { generation }))
      try {
        await this.cache.set(key, sliceKey, { tag, ver, contentType, value })
      } catch (err) {
        this.#cacheFailed('set', err)
        this.#distrustAll('cache_error')
      }
      return ver
    })
  }

  /**
   * Delete `key` (deleting a missing key succeeds): a tombstone in DynamoDB,
   * under the same fence as put.
   * @param {{ generation?: number }} [options]
   * @returns {Promise<bigint>} the tombstone's version
   */
  delete (key, sliceKey, { generation = 0 } = {}) {
    return this.queue.write(key, async () => {
      const ver = await this.#write('delete', key, sliceKey, () => this.store.delete(key, { generation }))
      try {
        await this.cache.del(key, sliceKey)
        this.metrics.invalidations.inc({ reason: 'delete' })
      } catch (err) {
        this.#cacheFailed('del', err)
        this.#distrustAll('cache_error')
      }
      return ver
    })
  }

  /**
   * A write DynamoDB did not acknowledge may still have been applied (a
   * timeout after sending), so the cached value may now be older than the
   * truth. A fenced write was not applied, but a newer owner wrote the key,
   * so our entry is certainly older than the truth. Either way drop it, or
   * distrust the whole cache if even that fails.
   */
  async #write (op, key, sliceKey, fn) {
    try {
      return await this.#storeOp(op, fn)
    } catch (err) {
      const fenced = err instanceof FencedWriteError
      if (fenced) {
        this.metrics.fencedWrites.inc({ op })
        this.logger.warn({ err: { code: err.code, message: err.message }, op }, 'write fenced off: a newer owner wrote the key')
      }
      if (fenced || err instanceof StoreUnavailableError) {
        try {
          if (await this.cache.del(key, sliceKey) && fenced) this.metrics.invalidations.inc({ reason: 'fenced' })
        } catch (cacheErr) {
          this.#cacheFailed('del', cacheErr)
          this.#distrustAll('cache_error')
        }
      }
      throw err
    }
  }

  async #storeOp (op, fn) {
    try {
      return await fn()
    } catch (err) {
      if (err instanceof StoreUnavailableError) {
        this.metrics.storeErrors.inc({ store: 'dynamodb', op })
        this.logger.warn({ err: { code: err.code, message: err.message }, op }, 'DynamoDB request failed')
      }
      throw err
    }
  }

  #cacheFailed (op, err) {
    this.metrics.storeErrors.inc({ store: 'redis', op })
    // Health transitions are logged by the cache owner; per-request detail at debug.
    this.logger.debug({ err: { message: err.message }, op }, 'cache operation failed; serving from DynamoDB')
  }

  /** Distrust every entry cached before now; `reason` is cache_error or reconnect. */
  #distrustAll (reason) {
    this.epochs.invalidateAll()
    this.metrics.invalidations.inc({ reason })
  }

  /** appserver-lib hook: ranges this server just gained. Synchronous on purpose. */
  onAcquire (ranges) {
    this.epochs.acquire(ranges)
  }

  /**
   * appserver-lib hook: ranges this server just lost. Distrusting them is
   * synchronous; dropping their entries (memory hygiene only) runs in the
   * background so the assignment push is not held up by a Redis SCAN.
   */
  onRelease (ranges) {
    this.epochs.release(ranges)
    const drop = (async () => {
      try {
        const n = await this.cache.dropRanges(ranges)
        if (n > 0) this.metrics.invalidations.inc({ reason: 'release' }, n)
      } catch (err) {
        this.#cacheFailed('drop', err)
      }
    })()
    this.drops.add(drop)
    drop.finally(() => this.drops.delete(drop))
  }

  /** Wait for background range drops (before closing the cache). */
  async settle () {
    await Promise.all([...this.drops])
  }
}

module.exports = { KvService }
