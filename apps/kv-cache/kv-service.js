'use strict'

const { KeyQueue } = require('./key-queue')
const { KeyHolds } = require('./key-holds')
const { OwnershipEpochs } = require('./ownership-epochs')
const { KvReader } = require('./kv-reader')
const { KvWriter } = require('./kv-writer')
const { KvReplica } = require('./kv-replica')
const { defaults, HELD_READS } = require('./options')
const { InvalidArgumentError, StoreUnavailableError } = require('../../core/errors')
const { contains } = require('../../core/ranges')

/** The service's own options, with their defaults from options.js. */
const SERVICE_DEFAULTS = Object.freeze({
  fencer: null,
  holdLapseMs: defaults.holdLapseMs,
  heldReadWaitMs: defaults.heldReadWaitMs,
  heldReads: defaults.heldReads,
  heldReadTimeoutMs: defaults.fenceTimeoutMs,
  batchWrites: defaults.batchWrites,
  pipelineReleases: defaults.pipelineReleases,
  serverId: defaults.serverId,
  replicaDropped: () => false,
  logger: defaults.logger
})

/**
 * The look-aside cache of paper 6.1, independent of HTTP, cut by role:
 * reads (kv-reader.js), writes (kv-writer.js) and the replica's side of a
 * replicated write (kv-replica.js). This facade holds what they share (the
 * stores, the key queue, the holds, the ownership epochs, the store reads in
 * flight) and the calls every role makes on them.
 *
 * A cache failure never fails a request: it costs a DynamoDB read, is
 * counted and logged, and distrusts whatever the cache may still hold. Cache
 * entries carry the version they hold, so a cache set never replaces a newer
 * entry. For a replicated slice a value is never served from any cache once
 * some read could have seen a newer one (linearizable), and fills that read
 * before a write can never land afterwards: docs/replication.md ("kv-cache")
 * has the protocol and its sequence diagram.
 */
class KvService {
  /**
   * @param {object} options
   * @param {import('./dynamo-store').DynamoStore} options.store
   * @param {import('./redis-cache').RedisCache|import('./memory-cache').MemoryCache} options.cache
   * @param {ReturnType<import('./metrics').createMetrics>} options.metrics
   * @param {import('./fence-client').FenceClient} [options.fencer] sends holds and releases to other replicas
   * @param {number} [options.holdLapseMs] a hold nobody lifts lapses after this long (KeyHolds)
   * @param {number} [options.heldReadWaitMs] a read of a held key waits this long for the write, then reads DynamoDB (wait) or asks the writer (ask)
   * @param {'ask'|'wait'} [options.heldReads] how reads of a key this server's writes hold on the other replicas are answered
   * @param {number} [options.heldReadTimeoutMs] heldReads ask: how long a read keeps asking a writer that does
   *   not answer (it waits up to heldReadWaitMs for the release between attempts), then fails with 503
   * @param {boolean} [options.batchWrites] group commit of a key's writes (write-batches.js); false: one at a time
   * @param {boolean} [options.pipelineReleases] the key's next write starts while the last one's releases
   *   are still on their way (answered writes only); false: it waits for them
   * @param {string} [options.serverId] names this server's write ids
   * @param {(id: string, sliceKey: number, generation: number) => boolean} [options.replicaDropped]
   *   whether a write admitted under `generation` may stop holding and fencing replica `id`:
   *   a newer map settled the key's slice without it (newest-map.js). Default: never
   */
  constructor (options) {
    const o = { ...SERVICE_DEFAULTS }
    for (const [k, v] of Object.entries(options)) if (v !== undefined) o[k] = v
    if (!HELD_READS.includes(o.heldReads)) throw new InvalidArgumentError(`invalid heldReads: expected one of ${HELD_READS.join(', ')}, got ${JSON.stringify(o.heldReads)}`)
    this.store = o.store
    this.cache = o.cache
    this.metrics = o.metrics
    this.fencer = o.fencer
    this.logger = o.logger
    this.replicaDropped = o.replicaDropped
    this.heldReadWaitMs = o.heldReadWaitMs
    this.heldReads = o.heldReads
    this.heldReadTimeoutMs = o.heldReadTimeoutMs
    this.epochs = new OwnershipEpochs()
    this.queue = new KeyQueue()
    this.holds = new KeyHolds({
      lapseMs: o.holdLapseMs,
      // What a release of an older write cached while this hold stood may be
      // older than DynamoDB now (this write's outcome is unknown): dropped
      // before the key is served from the cache again.
      onLapse: async (key, id, meta) => {
        const sliceKey = meta ? meta.sliceKey : undefined
        this.metrics.holdsLapsed.inc()
        this.logger.warn({ key, fenceId: id }, 'a write hold lapsed without being lifted: the key is cached again from DynamoDB')
        await this.dropEntry(key, sliceKey)
      }
    })
    this.storeReads = new Map() // key -> Set of store reads in flight (fills and held reads: { poisoned }); a hold poisons them
    this.drops = new Set() // background range drops still running
    this.reader = new KvReader(this)
    this.writer = new KvWriter(this, o)
    this.replica = new KvReplica(this)
    // Runs synchronously when Redis is usable again, before any command can
    // succeed on the new connection: a restarted Redis may hold an older
    // snapshot, and entries may have changed while we could not see them.
    this.cache.onReconnect(() => this.distrustAll('reconnect'))
  }

  /** @returns {Promise<{ value: Buffer, contentType: string, ver: bigint, cached: boolean } | null>} */
  get (key, sliceKey) { return this.reader.get(key, sliceKey) }
  /** The writer's side of a replica's ask (heldReads ask): its own read of `key`. */
  answerAsk (key, sliceKey) { return this.reader.answerAsk(key, sliceKey) }
  /** @returns {Promise<bigint>} the version, once no replica can serve an older value */
  put (key, sliceKey, value, contentType, options) { return this.writer.put(key, sliceKey, value, contentType, options) }
  /** @returns {Promise<bigint>} the tombstone's version */
  delete (key, sliceKey, options) { return this.writer.delete(key, sliceKey, options) }
  /** Replica side: hold `key` for write `fenceId` (kv-replica.js). */
  hold (key, sliceKey, fenceId, writer) { return this.replica.hold(key, sliceKey, fenceId, writer) }
  /** The server whose write `fenceId` holds `key` here, or undefined. */
  holdFrom (key, fenceId) { return this.replica.holdFrom(key, fenceId) }
  /** Replica side: a release sent late; drop the entry, then lift the hold. */
  lapse (key, sliceKey, fenceId) { return this.replica.lapse(key, sliceKey, fenceId) }
  /** Replica side: cache the written version (none: an abort), then lift the hold. */
  release (key, sliceKey, fenceId, version, written) { return this.replica.release(key, sliceKey, fenceId, version, written) }

  /**
   * Delete `key`'s cache entry. When Redis fails, distrust the whole cache
   * instead, so the entry we could not delete is never served.
   * @returns {Promise<boolean|null>} whether there was an entry; null when the delete failed
   */
  async dropEntry (key, sliceKey) {
    try {
      return await this.cache.del(key, sliceKey)
    } catch (err) {
      this.cacheFailed('del', err)
      this.distrustAll('cache_error')
      return null
    }
  }

  /** Run the DynamoDB call `fn`; a failure is counted and logged, and rethrown. */
  async storeOp (op, fn) {
    try {
      return await fn()
    } catch (err) {
      if (err instanceof StoreUnavailableError) {
        this.metrics.storeErrors.inc({ store: 'dynamodb', op })
        this.logger.warn({ err, op }, 'DynamoDB request failed')
      }
      throw err
    }
  }

  /** A cache call failed: counted; the request goes on from DynamoDB. */
  cacheFailed (op, err) {
    this.metrics.storeErrors.inc({ store: 'redis', op })
    // Health transitions are logged by the cache owner; per-request detail at debug.
    this.logger.debug({ err, op }, 'cache operation failed; serving from DynamoDB')
  }

  /** Distrust every entry cached before now; `reason` is cache_error or reconnect. */
  distrustAll (reason) {
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
    // Holds on keys there outlive the slice: a release that comes for one
    // later (once the slice is back) must not cache its value (release()).
    this.holds.each((key, id, meta) => { if (meta && contains(ranges, meta.sliceKey)) meta.orphaned = true })
    const drop = (async () => {
      try {
        const n = await this.cache.dropRanges(ranges)
        if (n > 0) this.metrics.invalidations.inc({ reason: 'release' }, n)
      } catch (err) {
        this.cacheFailed('drop', err)
      }
    })()
    this.drops.add(drop)
    drop.finally(() => this.drops.delete(drop))
  }

  /** Wait for background range drops and releases (before closing the cache); lift every hold. */
  async settle () {
    await Promise.all([...this.drops, ...this.writer.close()])
    this.holds.clear()
  }
}

module.exports = { KvService }
