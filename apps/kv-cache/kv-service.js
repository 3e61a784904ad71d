'use strict'

const { KeyQueue } = require('./key-queue')
const { OwnershipEpochs } = require('./ownership-epochs')
const { StoreUnavailableError } = require('../../core/errors')
const { silent } = require('../../core/logger')

/**
 * The look-aside cache logic of paper 6.1, independent of HTTP:
 * - reads try the cache, and on a miss do a strongly consistent DynamoDB read
 *   and fill the cache;
 * - writes go to DynamoDB first (the source of truth) and are acknowledged
 *   only once it accepted them; then the cache is updated.
 * A cache failure never fails a request: it costs a DynamoDB read, is counted
 * and logged, and distrusts whatever the cache may still hold.
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
  }

  /**
   * @returns {Promise<{ value: Buffer, contentType: string, cached: boolean } | null>}
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
        return { value: entry.value, contentType: entry.contentType, cached: true }
      }
      this.metrics.invalidations.inc({ reason: 'stale' })
    }
    this.metrics.misses.inc()
    const item = await this.queue.read(key, () => this.#fill(key, sliceKey, entry !== null))
    return item && { value: item.value, contentType: item.contentType, cached: false }
  }

  async #fill (key, sliceKey, sawStale) {
    // The tag is taken before the read: if this server loses and regains the
    // slice while DynamoDB answers, the entry is born distrusted.
    const tag = this.epochs.now()
    const item = await this.#storeOp('get', () => this.store.get(key))
    if (!this.cache.healthy) return item // degraded: the fill would only fail
    try {
      if (item) await this.cache.set(key, sliceKey, { tag, contentType: item.contentType, value: item.value })
      // A distrusted entry for a deleted key would otherwise be kept alive by
      // every GETEX that reads (and refuses) it.
      else if (sawStale) await this.cache.del(key, sliceKey)
    } catch (err) {
      // A failed fill leaves nothing newer than DynamoDB behind: no need to distrust.
      this.#cacheFailed('fill', err)
    }
    return item
  }

  /** Store `value`; resolves once DynamoDB accepted it (the acknowledgement). */
  put (key, sliceKey, value, contentType) {
    return this.queue.write(key, async () => {
      const tag = this.epochs.now()
      await this.#write('put', key, sliceKey, () => this.store.put(key, value, contentType))
      try {
        await this.cache.set(key, sliceKey, { tag, contentType, value })
      } catch (err) {
        this.#cacheFailed('set', err)
        this.#distrustAll()
      }
    })
  }

  /** Delete `key` (deleting a missing key succeeds). */
  delete (key, sliceKey) {
    return this.queue.write(key, async () => {
      await this.#write('delete', key, sliceKey, () => this.store.delete(key))
      try {
        await this.cache.del(key, sliceKey)
        this.metrics.invalidations.inc({ reason: 'delete' })
      } catch (err) {
        this.#cacheFailed('del', err)
        this.#distrustAll()
      }
    })
  }

  /**
   * A write DynamoDB did not acknowledge may still have been applied (a
   * timeout after sending), so the cached value may now be older than the
   * truth: drop it, or distrust the whole cache if even that fails.
   */
  async #write (op, key, sliceKey, fn) {
    try {
      await this.#storeOp(op, fn)
    } catch (err) {
      if (err instanceof StoreUnavailableError) {
        try {
          await this.cache.del(key, sliceKey)
        } catch (cacheErr) {
          this.#cacheFailed('del', cacheErr)
          this.#distrustAll()
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

  #distrustAll () {
    this.epochs.invalidateAll()
    this.metrics.invalidations.inc({ reason: 'cache_error' })
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
