'use strict'

const crypto = require('node:crypto')
const { performance } = require('node:perf_hooks')
const { KeyQueue } = require('./key-queue')
const { WriteBatches, queueAnswered } = require('./write-batches')
const { ReadBatches } = require('./read-batches')
const { KeyHolds } = require('./key-holds')
const { OwnershipEpochs } = require('./ownership-epochs')
const { FencedWriteError, InvalidArgumentError, KeyHeldError, ReplicaUnavailableError, StoreUnavailableError, WriteIndeterminateError } = require('../../core/errors')
const { silent } = require('../../core/logger')
const { contains } = require('../../core/ranges')

/**
 * A fence entry's content type: a cache entry with a version and no value
 * ("nothing below this version"), a miss that still refuses older fills.
 * Real entries never have it: a value stored without a Content-Type gets
 * application/octet-stream, and HTTP has no empty media type.
 */
const FENCE_TYPE = ''
const EMPTY = Buffer.alloc(0)
/** How a replica answers a read of a key a write holds (the `heldReads` option). */
const HELD_READS = Object.freeze(['wait', 'ask'])
const NONE = Object.freeze([])

// #liftLater: the first attempt again after this long, then doubling up to the second.
const LATE_LIFT_FIRST_MS = 250
const LATE_LIFT_MAX_MS = 4000
/** The targets of a fencer.send result that did not take the phase (not 204). */
const untaken = (r) => [...r.notAdmitted, ...r.dropped, ...r.failed.map((f) => f.target)]
/** A failure of fencer.send that was an answer, a 4xx (421 is not_admitted): the replica refused. */
const refusal = (f) => f.status !== undefined && f.status < 500
/** The op of a batch's write `w` (#batched): 'put' for a put's value, 'delete' for null. */
const opOf = (w) => (w === null ? 'delete' : 'put')

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
 *
 * Replicated slices (docs/replication.md): every replica serves reads; the
 * primary writes, and first *holds* the key on every other replica: a held
 * key is never answered from that replica's cache on its own word nor filled
 * into it. Only then does it write DynamoDB and its own cache; then it lifts
 * the holds with the new version and value, which each replica caches first.
 * A hold makes no Redis call: the replica's entry stays, unserved while held.
 *
 * How a replica answers a read of a held key is the writer's choice (its
 * `heldReads`, sent with each hold as `X-KV-Held-Reads`), so servers with
 * different settings may share slices:
 * - `ask`: it waits up to `heldReadWaitMs` for the release, then asks the
 *   writer (fence-client.js `ask`), which
 *   answers from its own read of the key: 204 when the replica's cached
 *   version is the writer's, else the writer's value. The writer does not
 *   hold itself: until its DynamoDB write returned and its cache has the new
 *   value it serves the old one, and that moment is where the write takes
 *   effect. Nothing else may read the written value from DynamoDB before it:
 *   every other replica is held and asks the writer, a replica's fill that a
 *   hold overtook is not served (it asks too), and the writer's own fills
 *   queue behind its write. Only a writer that is gone (it refused the
 *   connection, does not admit the slice, or a newer map dropped it: it
 *   serves nothing of the key) lets a replica read DynamoDB. A write whose
 *   outcome is unknown holds the writer itself until the lapse, so it and
 *   whoever asks it read DynamoDB meanwhile; so does a write that a replica
 *   did not take the hold of (below, #replicated).
 * - `wait` (the default): a read of the held key on the replica waits up to
 *   `heldReadWaitMs` for the release and then reads DynamoDB (strongly
 *   consistent, linearizable by itself); the writer holds itself too, from
 *   its DynamoDB write until its own cache has the value, and sends the
 *   releases as soon as DynamoDB took the write, alongside that cache update.
 *
 * Reads wait for the writes before them, not after: either way a read waits
 * only for the holds that stood when it came. A write takes effect only once
 * every replica acknowledged its hold, so a hold that comes after a read is
 * of a write the read may be ordered before; once the earlier holds are
 * lifted (released into the cache, aborted, or lapsed and dropped), the
 * cache has every write that could have taken effect before the read. On a
 * hot key the next write's hold often overtakes the last one's release, and
 * a read that waited for the key to be free of holds could wait out a chain
 * of writes. `heldReadWaitMs` counts from the youngest of those holds'
 * arrival (#heldWaitMs), so a late release delays reads only until its hold
 * is that old.
 *
 * Either way a value is never served from any cache once some read could
 * have seen a newer one (linearizable), and fills that read before the write
 * can never land afterwards.
 */
class KvService {
  /**
   * @param {object} options
   * @param {import('./dynamo-store').DynamoStore} options.store
   * @param {import('./redis-cache').RedisCache|import('./memory-cache').MemoryCache} options.cache
   * @param {ReturnType<import('./metrics').createMetrics>} options.metrics
   */
  /**
   * @param {import('./fence-client').FenceClient} [options.fencer] sends holds and releases to other replicas
   * @param {number} [options.holdLapseMs] a hold nobody lifts lapses after this long (KeyHolds)
   * @param {boolean} [options.batchWrites] group commit of a key's writes (write-batches.js); false: one at a time
   * @param {boolean} [options.pipelineReleases] the key's next write starts while the last one's releases
   *   are still on their way (answered writes only); false: it waits for them
   * @param {string} [options.serverId] names this server's write ids
   * @param {(id: string, sliceKey: number, generation: number) => boolean} [options.replicaDropped]
   *   whether a write admitted under `generation` may stop holding and fencing replica `id`:
   *   a newer map settled the key's slice without it (newest-map.js). Default: never
   */
  /**
   * @param {'ask'|'wait'} [options.heldReads] how reads of a key this server's writes hold on the other replicas are answered (above)
   * @param {number} [options.heldReadTimeoutMs] heldReads ask: how long a read keeps asking a writer that does
   *   not answer (it waits up to heldReadWaitMs for the release between attempts), then fails with 503
   */
  constructor ({ store, cache, metrics, fencer = null, holdLapseMs = 30000, heldReadWaitMs = 500, heldReads = 'wait', heldReadTimeoutMs = 3000, batchWrites = true, pipelineReleases = true, serverId = 'kv', replicaDropped = () => false, logger = silent }) {
    if (!HELD_READS.includes(heldReads)) throw new InvalidArgumentError(`invalid heldReads: expected one of ${HELD_READS.join(', ')}, got ${JSON.stringify(heldReads)}`)
    this.store = store
    this.replicaDropped = replicaDropped
    this.heldReadWaitMs = heldReadWaitMs // a read of a held key waits this long for the write, then reads DynamoDB (wait) or asks the writer (ask)
    this.heldReads = heldReads
    this.heldReadTimeoutMs = heldReadTimeoutMs
    this.cache = cache
    this.metrics = metrics
    this.fencer = fencer
    this.logger = logger
    this.epochs = new OwnershipEpochs()
    this.queue = new KeyQueue()
    this.batches = new WriteBatches(this.queue, () => this.metrics.batchedWrites.inc())
    this.heldStoreReads = new ReadBatches() // held keys' store reads, shared only by reads that arrived before them
    this.writerAsks = new ReadBatches() // held keys' reads asked of their writer, shared likewise
    this.batchWrites = batchWrites
    this.pipelineReleases = pipelineReleases
    this.releases = new Set() // releases still going on after their writes were answered
    this.lateLifts = new Set() // timers of lifts sent again (#liftLater)
    this.closed = false // settle() ran: no more lifts are sent again
    this.holds = new KeyHolds({
      lapseMs: holdLapseMs,
      // What a release of an older write cached while this hold stood may be
      // older than DynamoDB now (this write's outcome is unknown): dropped
      // before the key is served from the cache again.
      onLapse: async (key, id, meta) => {
        const sliceKey = meta ? meta.sliceKey : undefined
        this.metrics.holdsLapsed.inc()
        this.logger.warn({ key, fenceId: id }, 'a write hold lapsed without being lifted: the key is cached again from DynamoDB')
        await this.#dropEntry(key, sliceKey)
      }
    })
    this.storeReads = new Map() // key -> Set of store reads in flight (fills and held reads: { poisoned }); a hold poisons them
    this.fenceIds = `${serverId}:${crypto.randomBytes(4).toString('hex')}:`
    this.fenceSeq = 0
    this.drops = new Set() // background range drops still running
    // Runs synchronously when Redis is usable again, before any command can
    // succeed on the new connection: a restarted Redis may hold an older
    // snapshot, and entries may have changed while we could not see them.
    cache.onReconnect(() => this.#distrustAll('reconnect'))
  }

  /**
   * @returns {Promise<{ value: Buffer, contentType: string, ver: bigint, cached: boolean } | null>}
   */
  get (key, sliceKey) {
    return this.#get(key, sliceKey, false)
  }

  /**
   * How long a read of held `key` still waits for the release before it
   * reads DynamoDB (wait) or asks the writer (ask): heldReadWaitMs counted
   * from the youngest hold's arrival, not from the read's. A hold whose
   * release is late (a stalled, slow or lost write) then delays the reads
   * that come under it only until it is heldReadWaitMs old, and the ones
   * after that not at all, so the wait can be long enough to ride out a
   * stall without every read paying it while a dead writer's hold lapses.
   */
  #heldWaitMs (key) {
    return this.heldReadWaitMs - Math.max(0, this.holds.age(key))
  }

  /**
   * KeyHolds.waitLifted, timed (chopper_kv_held_read_wait_seconds): by
   * default for the holds younger than heldReadWaitMs only. An older one (a lost release,
   * kept until holdLapseMs) is waited for by no read, so a read under it and
   * a fresh one waits for the fresh one's release alone, then reads DynamoDB.
   */
  async #waitLifted (key, ms, maxAgeMs = this.heldReadWaitMs) {
    const t0 = performance.now()
    try {
      return await this.holds.waitLifted(key, ms, maxAgeMs)
    } finally {
      this.metrics.heldReadWaits.observe((performance.now() - t0) / 1000)
    }
  }

  /** `waited`: (ask) this read already waited heldReadWaitMs for a release once; it asks at once now. */
  async #get (key, sliceKey, waited) {
    if (this.holds.held(key) && this.#asks(key)) return this.#askedRead(key, sliceKey, waited)
    // wait: a write holds the key for a few ms (its DynamoDB write and the
    // release round trip): wait for it rather than miss. After the release the
    // cache has the written value, so the read is a hit ordered after the write.
    // Only the holds standing now are waited for, not those of writes that
    // begin meanwhile: on a hot key a write's hold often comes before the last
    // one's release, and a read that waited for the key to be free of holds
    // could wait for a chain of writes (then miss, after heldReadWaitMs).
    if (this.holds.held(key)) {
      const wait = this.#heldWaitMs(key)
      if (!(wait > 0 && (await this.#waitLifted(key, wait))) || this.holds.heldLongerThan(key, this.heldReadWaitMs)) {
        if (this.#asks(key)) return this.#askedRead(key, sliceKey, true) // an ask write's hold came meanwhile
        this.metrics.heldReads.inc({ outcome: 'store' })
        return this.#heldRead(key, sliceKey)
      }
      this.metrics.heldReads.inc({ outcome: 'lifted' })
    }
    let entry = null
    try {
      entry = await this.cache.get(key, sliceKey)
    } catch (err) {
      this.#cacheFailed('get', err)
    }
    // A hold that arrived after this read did (while it waited for older ones,
    // or while the cache answered) does not matter: that write takes effect
    // only after this hold was acknowledged, so after this read began, and the
    // read may be ordered before it. The entry reflects every write that
    // could have taken effect before: their holds stood when the read came
    // and are lifted now (released into the cache, aborted, or lapsed and
    // dropped). A miss's fill checks the holds itself.
    if (entry && entry.contentType === FENCE_TYPE) {
      entry = null // a fence: nothing cached, but it refuses fills older than the write it fences
    } else if (entry) {
      if (this.epochs.trusts(entry.tag, sliceKey)) {
        this.metrics.hits.inc()
        return { value: entry.value, contentType: entry.contentType, ver: entry.ver, cached: true }
      }
      this.metrics.invalidations.inc({ reason: 'stale' })
    }
    this.metrics.misses.inc()
    const shared = this.queue.readJoins(key)
    if (shared) this.metrics.sharedReads.inc({ with: 'fill' })
    const { item, poisoned } = await this.queue.read(key, () => this.#fill(key, sliceKey, entry !== null))
    // An ask write's hold overtook the fill, whose DynamoDB read may have
    // seen that write before its writer serves it: the writer decides.
    if (poisoned === 'ask') return this.#askedRead(key, sliceKey, waited)
    return item && { value: item.value, contentType: item.contentType, ver: item.ver, cached: false, shared }
  }

  /**
   * heldReads ask: a read of a key another server's write holds here waits
   * up to heldReadWaitMs for the release (once: a read that waited asks at
   * once if it finds the key held again), and is then answered by that
   * writer (the newest hold's), which vouches for our cached version or
   * sends its value. Reads share an ask issued after they arrived
   * (read-batches.js). A writer that is gone lets us read DynamoDB; one that
   * does not answer is asked again after waiting up to heldReadWaitMs for the
   * release, until heldReadTimeoutMs (then 503). A hold of this server's own
   * (a write whose outcome is unknown) reads DynamoDB. `skip`: writers this
   * read found gone (their holds no longer count).
   */
  async #askedRead (key, sliceKey, waited, skip = NONE) {
    const first = waited ? 0 : this.#heldWaitMs(key)
    if (first > 0 && (await this.#waitLifted(key, first))) {
      this.metrics.heldReads.inc({ outcome: 'lifted' })
      return this.#get(key, sliceKey, true)
    }
    const deadline = performance.now() + this.heldReadTimeoutMs
    for (;;) {
      const hold = this.#askHold(key, skip)
      if (hold === undefined) {
        // only the gone writer's hold: DynamoDB; lifted, or only holds of wait writes left: as usual
        return skip.length > 0 && this.#asks(key) ? this.#heldRead(key, sliceKey, skip) : this.#get(key, sliceKey, true)
      }
      const left = deadline - performance.now()
      const { item: r } = await this.writerAsks.read(key, () => this.#askWriter(key, sliceKey, hold, Math.max(1, Math.round(left))))
      if (r.outcome === 'current' || r.outcome === 'value' || r.outcome === 'none') {
        this.metrics.heldReads.inc({ outcome: 'writer' })
        if (r.outcome === 'current') this.metrics.hits.inc()
        const item = r.item
        return item ? { value: item.value, contentType: item.contentType, ver: item.ver, cached: r.outcome === 'current', shared: r.outcome === 'value' } : null
      }
      if (r.outcome === 'gone') {
        this.metrics.heldReads.inc({ outcome: 'store' })
        return this.#heldRead(key, sliceKey, [...skip, hold.from])
      }
      const wait = deadline - performance.now()
      if (wait <= 0) {
        this.logger.warn({ key, writer: hold.from, reason: r.reason }, 'a read of a held key could not be answered: its writer did not answer')
        throw new StoreUnavailableError(`key ${JSON.stringify(key)} is held by a write of server ${hold.from}, which did not answer (${r.reason}); retry the request`)
      }
      await this.#waitLifted(key, Math.min(this.heldReadWaitMs, wait), Infinity) // between asks: every hold, old ones too
    }
  }

  /** One ask of `hold`'s writer for `key`, with the version cached here. */
  async #askWriter (key, sliceKey, hold, timeoutMs) {
    if (this.replicaDropped(hold.from, sliceKey, hold.generation)) return { outcome: 'gone' }
    const url = hold.url
    if (!url) return { outcome: 'unsure', reason: `no URL known for server ${hold.from}` }
    let have = null
    try {
      const entry = await this.cache.get(key, sliceKey)
      if (entry && entry.contentType !== FENCE_TYPE && this.epochs.trusts(entry.tag, sliceKey)) have = entry
    } catch (err) {
      this.#cacheFailed('get', err)
    }
    const r = await this.fencer.ask({ id: hold.from, url }, { key, generation: hold.generation, fenceId: hold.fenceId, have: have === null ? undefined : have.ver, timeoutMs })
    return r.outcome === 'current' ? { outcome: 'current', item: have } : r
  }

  /**
   * The writer's side of an ask (heldReads ask): its own read of `key`. A
   * server that another server's write holds refuses (KeyHeldError, 409):
   * answering would mean asking in turn, and two writers could ask each other.
   */
  async answerAsk (key, sliceKey) {
    const hold = this.holds.newest(key, (m) => m !== undefined && m.from !== null)
    if (hold !== undefined) throw new KeyHeldError(`key ${JSON.stringify(key)} is held here by a write of server ${hold.from}; ask again after its release`)
    return this.get(key, sliceKey)
  }

  /**
   * A read of a held key: to DynamoDB, nothing cached, no read shared with a
   * fill; it shares only a store read issued after it arrived (read-batches.js).
   * An ask write's hold that overtakes the store read sends the read to that
   * writer, as for a fill.
   */
  async #heldRead (key, sliceKey, skip = NONE) {
    this.metrics.misses.inc()
    const { item: r, shared } = await this.heldStoreReads.read(key, () => this.#poisonable(key, () => this.#storeOp('get', () => this.store.get(key)), skip))
    if (r.poisoned === 'ask') return this.#askedRead(key, sliceKey, true, skip)
    const item = r.item
    if (shared) this.metrics.sharedReads.inc({ with: 'held' })
    return item && { value: item.value, contentType: item.contentType, ver: item.ver, cached: false, shared }
  }

  /**
   * Run the store read `fn` of `key`, noting whether a hold arrived while it
   * ran: `poisoned` is false, 'wait', or 'ask' (a hold of an ask write came:
   * the read may have seen that write before its writer serves it).
   * @returns {Promise<{ item: object|null, poisoned: false|'wait'|'ask' }>}
   */
  async #poisonable (key, fn, skip = NONE) {
    // One that starts while an ask write holds the key (it waited its turn in a
    // queue or batch) is poisoned from the start: that write may land first.
    // `skip`: writers whose holds were found gone (they serve nothing of the key).
    if (this.#asks(key, skip)) return { item: null, poisoned: 'ask' } // nothing to read: it asks instead
    const read = { poisoned: false }
    let reads = this.storeReads.get(key)
    if (!reads) this.storeReads.set(key, (reads = new Set()))
    reads.add(read)
    try {
      return { item: await fn(), poisoned: read.poisoned }
    } finally {
      reads.delete(read)
      if (reads.size === 0 && this.storeReads.get(key) === reads) this.storeReads.delete(key)
    }
  }

  /** Whether a hold of an ask write (its reads ask the writer) holds `key` here, those of `skip` aside. */
  #asks (key, skip = NONE) {
    return this.#askHold(key, skip) !== undefined
  }

  /** The newest hold of an ask write on `key`, not of a server in `skip`. */
  #askHold (key, skip = NONE) {
    return this.holds.newest(key, (m) => isAsk(m) && !skip.includes(m.from))
  }

  async #fill (key, sliceKey, sawStale) {
    // The tag is taken before the read: if this server loses and regains the
    // slice while DynamoDB answers, the entry is born distrusted.
    const tag = this.epochs.now()
    // A hold that arrives while DynamoDB answers poisons the fill: the write it
    // announces may land before our (older) value would reach the cache.
    const done = await this.#poisonable(key, () => this.#storeOp('get', () => this.store.get(key)))
    if (done.poisoned) return done
    const item = done.item
    if (this.holds.held(key)) return done
    if (!this.cache.healthy) return done // degraded: the fill would only fail
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
    return done
  }

  /**
   * Store `value`; resolves with its version once DynamoDB accepted it (the
   * acknowledgement) and, for a replicated slice, no other replica can serve
   * an older value. Rejects with FencedWriteError when a newer generation
   * already wrote the key: nothing was written, so the front end may retry it
   * on the key's current owner.
   * @param {{ generation?: number, replicas?: { id: string, url?: string }[] }} [options]
   *   generation: the generation the request was admitted under; replicas:
   *   the slice's other servers, to hold and fence (none: a single owner)
   * @returns {Promise<bigint>}
   */
  put (key, sliceKey, value, contentType, { generation = 0, replicas = [] } = {}) {
    if (contentType === FENCE_TYPE) throw new InvalidArgumentError('invalid content type: expected a non-empty media type')
    return this.#batched(key, sliceKey, generation, replicas, { value, contentType })
  }

  /**
   * Delete `key` (deleting a missing key succeeds): a tombstone in DynamoDB,
   * under the same fence as put.
   * @param {{ generation?: number, replicas?: { id: string, url?: string }[] }} [options] as for put
   * @returns {Promise<bigint>} the tombstone's version
   */
  delete (key, sliceKey, { generation = 0, replicas = [] } = {}) {
    return this.#batched(key, sliceKey, generation, replicas, null)
  }

  /**
   * Queue a put (`written`: its value) or a delete (null) of `key`. Writes that
   * arrive while the key's earlier work runs, or while this batch holds its
   * replicas, go as one (write-batches.js).
   */
  #batched (key, sliceKey, generation, replicas, written) {
    const run = (seal, peek) => this.#replicated(key, sliceKey, generation, replicas, seal, peek)
    if (!this.batchWrites) return queueAnswered(this.queue, key, () => run(() => written, () => written))
    const group = `${generation} ${replicas.map((r) => `${r.id}=${r.url}`).join(' ')}`
    return this.batches.write(key, group, written, run)
  }

  /**
   * What writing `w` (a put's value, or null: a delete) does: its DynamoDB
   * call (`store`, resolving with the version) and this server's own cache
   * update after it (`cache`).
   */
  #operation (key, sliceKey, generation, w) {
    if (w === null) {
      return {
        store: () => this.#write('delete', key, sliceKey, () => this.store.delete(key, { generation })),
        cache: async () => {
          if ((await this.#dropEntry(key, sliceKey)) !== null) this.metrics.invalidations.inc({ reason: 'delete' })
        }
      }
    }
    const { value, contentType } = w
    let tag
    return {
      store: () => {
        tag = this.epochs.now()
        return this.#write('put', key, sliceKey, () => this.store.put(key, value, contentType, { generation }))
      },
      cache: async (ver) => {
        try {
          await this.cache.set(key, sliceKey, { tag, ver, contentType, value })
        } catch (err) {
          this.#cacheFailed('set', err)
          this.#distrustAll('cache_error')
        }
      }
    }
  }

  /**
   * Run the write (`store`, then this server's own `cache` update) between
   * holding the key on every other replica and lifting the holds with its
   * version. This server holds itself from its `store` call on (always with
   * wait; with ask only when a replica did not take the hold), not before:
   * until then the write has not begun and the cached value is the value.
   *
   * - A replica that cannot be held (unreachable once `fenceTimeoutMs` ran
   *   out) fails the write before DynamoDB is touched: 503
   *   CHOPPER_ERR_REPLICA_UNAVAILABLE, certainly not applied; holds already
   *   placed are aborted.
   * - A replica answering 421 does not admit the slice now: done (it
   *   distrusts its cache when it gains the slice, ownership-epochs.js).
   * - A replica that a newer map settled the slice without (`replicaDropped`:
   *   it acknowledged the revoke or its lease lapsed, so it serves nothing of
   *   the slice) is done too, in any phase, even while it does not answer: a
   *   dead replica stalls a write only until the map that drops it arrives,
   *   not for the whole `fenceTimeoutMs`.
   * - DynamoDB refused the write as fenced: not applied; holds aborted.
   * - DynamoDB failed (503): the write may still land, so the holds are left
   *   to lapse (holdLapseMs, longer than any DynamoDB write): until then
   *   every replica reads the key from DynamoDB.
   * - Once DynamoDB and this server's cache hold the value, this server lifts
   *   its own hold and the write is answered, before the releases are
   *   answered: every other replica still held reads DynamoDB or waits for
   *   its release, so no read anywhere can return the old value. A server
   *   that holds itself sends the releases as soon as DynamoDB took the
   *   write, alongside its own cache update (it serves nothing of the key
   *   from its cache meanwhile); one that does not (ask) sends them after it,
   *   as its cache update is where the write takes effect. The releases
   *   go on in the background (`this.releases`). With `pipelineReleases`
   *   the key's next write starts meanwhile, so its hold may reach a replica
   *   before this write's release, which still caches the value, unserved
   *   while that hold stands (see `release`). Without it they go in
   *   `after`, which the key's queue waits for before the next write.
   *   This needs every hold still in place when the write landed: a write
   *   answered within `holdLapseMs` of its first hold has that, as holds
   *   lapse no sooner.
   * - A release that does not reach a replica leaves it held until the lapse,
   *   which is safe when the write was acknowledged before the lapse: logged
   *   and counted. A write that reaches that point only past the lapse (never
   *   with the default options) waits for its releases, and if one failed it
   *   answers 503 CHOPPER_ERR_WRITE_INDETERMINATE.
   * @returns {Promise<{ value: bigint, after: Promise<void>|null }>} the version, and the releases (never rejects)
   */
  async #replicated (key, sliceKey, generation, replicas, seal, peek) {
    if (replicas.length === 0 || this.fencer === null) {
      const { store, cache } = this.#operation(key, sliceKey, generation, seal())
      const ver = await store()
      await cache(ver)
      return { value: ver, after: null }
    }
    // Until the batch is sealed, right before its DynamoDB write, writes of the key
    // that arrive join it (write-batches.js): the holds carry no value. `op` is its
    // last write's so far, for the logs and metrics of a hold that fails.
    let op = opOf(peek())
    const fenceId = this.fenceIds + (this.fenceSeq++).toString(36)
    const ask = this.heldReads === 'ask'
    const what = { key, generation, fenceId, dropped: (target) => this.replicaDropped(target.id, sliceKey, generation) }
    if (ask) what.heldReads = 'ask'
    const t0 = performance.now()
    const held = await this.fencer.send('hold', replicas, what)
    const tHeld = performance.now()
    this.metrics.writePhases.observe({ phase: 'hold' }, (tHeld - t0) / 1000)
    const abort = async () => {
      if (held.ok.length > 0) {
        const r = await this.fencer.send('abort', held.ok, what)
        // An abort that does not arrive is harmless: that hold lapses, unless a later one lifts it.
        if (r.failed.length > 0) this.logger.warn({ key, op, fenceId, replicas: r.failed.map((f) => f.target.id) }, 'abort of a write hold did not reach every replica; sent again until those holds would lapse')
        this.#liftLater('abort', untaken(r), what, t0)
      }
      this.holds.remove(key, fenceId)
    }
    if (held.failed.length > 0) {
      const detail = held.failed.map((f) => `${f.target.id} (${f.reason})`).join(', ')
      this.metrics.replicatedWriteFailures.inc({ op, phase: 'hold' })
      this.logger.warn({ key, op, fenceId, replicas: held.failed.map((f) => f.target.id) }, 'write refused: a replica could not be held')
      await abort()
      throw new ReplicaUnavailableError(`write to key ${JSON.stringify(key)} not applied: replica ${detail} could not be reached to hold the key; retry the request`)
    }
    // From its DynamoDB write on, this server holds itself: with wait, a held replica may read
    // the new value from DynamoDB (after heldReadWaitMs), and its release comes before our own
    // cache has the value (below). Until then the write has not started and the old value is
    // still the value: our reads keep being served from the cache through the hold phase.
    // ask: the writer serves the old value until its write took effect here (class comment),
    // unless a replica did not take the hold (421: it does not admit the slice now, or a newer
    // map dropped it): it may still finish a read it admitted before and fill it from DynamoDB
    // after our write landed, so this write does not serve the old value meanwhile either.
    const selfHeld = !ask || held.notAdmitted.length > 0 || held.dropped.length > 0
    if (selfHeld) this.hold(key, sliceKey, fenceId)
    const written = seal()
    op = opOf(written)
    const { store, cache } = this.#operation(key, sliceKey, generation, written)
    let ver
    try {
      ver = await store()
      this.metrics.writePhases.observe({ phase: 'store' }, (performance.now() - tHeld) / 1000)
    } catch (err) {
      if (err instanceof FencedWriteError) await abort() // certainly not applied
      // Otherwise the write may still land: every hold stays until it lapses,
      // and this server holds itself (ask: from now on): its cache is not served meanwhile.
      else if (!selfHeld) this.hold(key, sliceKey, fenceId)
      throw err
    }
    // A put hands the replicas its value, cached at the new version (write-through: the
    // next read there is a hit); a delete leaves a bare fence (a miss that refuses older fills).
    const lift = { ...what, version: ver, ...(written || {}) }
    const release = () => {
      const tr = performance.now()
      return this.fencer.send('release', held.ok, lift).then(
        (r) => {
          this.metrics.writePhases.observe({ phase: 'release' }, (performance.now() - tr) / 1000)
          this.#liftLater('release', untaken(r), lift, t0)
          return r.failed.length === 0 ? null : r.failed
        },
        (err) => {
          this.logger.error({ err, key, op, fenceId }, 'release of a write hold failed; the replicas stay held until their holds lapse')
          return held.ok.map((target) => ({ target, reason: err.message }))
        })
    }
    // While this server holds itself (it serves nothing of the key from its cache, and
    // its reads of the key wait), the replicas may serve the value as soon as DynamoDB
    // holds it: the releases go now, alongside our own cache update. Otherwise (ask)
    // this server serves the old value until its cache has the new one, which is where
    // the write takes effect: no replica may serve the new value before that.
    let released = selfHeld ? release() : null
    await cache(ver)
    // DynamoDB and our cache hold the value: our own reads may serve it now.
    this.holds.remove(key, fenceId)
    if (released === null) released = release()
    const early = performance.now() - t0 < this.holds.lapseMs
    const outcome = released.then((failed) => {
      if (failed === null) return null
      const ids = failed.map((f) => f.target.id)
      this.metrics.replicatedWriteFailures.inc({ op, phase: 'release' })
      if (early) this.logger.warn({ key, op, fenceId, replicas: ids, reasons: failed.map((f) => f.reason) }, 'write applied; a replica could not be fenced and stays held (reads from DynamoDB) until its hold lapses')
      return ids
    })
    if (early) {
      const after = outcome.then(() => {})
      this.releases.add(after)
      after.finally(() => this.releases.delete(after))
      return { value: ver, after: this.pipelineReleases ? null : after }
    }
    const failed = await outcome
    if (failed) {
      const ms = performance.now() - t0
      this.logger.error({ key, op, fenceId, replicas: failed, ms }, 'write applied, but a replica could be neither fenced nor was it still held: it may serve the previous value')
      throw new WriteIndeterminateError(`write to key ${JSON.stringify(key)} was applied, but replica ${failed.join(', ')} could not be fenced within its hold (${Math.round(ms)} ms) and may serve the previous value until its cache entry expires`)
    }
    return { value: ver, after: null }
  }

  /**
   * A replica that took a write's hold but not its release or abort keeps the
   * hold until it lapses (holdLapseMs). It answered 421 because it stopped
   * admitting the slice in between (a newer map), a newer map dropped it, or
   * it could not be reached. Should it admit the slice again before the
   * lapse, every read of the key there would go to DynamoDB until then
   * (measured in scenario 1: 170 reads on one server, a 97.8 % hit rate). So
   * the lift goes again, after 250 ms and then at doubling intervals up to
   * 4 s, to each such replica until one takes it (204), refuses it for good
   * (a 4xx other than 421: it no longer lists this server for the slice), or
   * the hold would have lapsed anyway. A release goes as a `lapse`: the
   * replica drops its entry and lifts the hold, as if the hold had lapsed
   * (which is safe once the write was acknowledged: DynamoDB has it). It does not cache the
   * written value: while it did not admit the slice, newer writes may have
   * landed without holding it. An abort goes again as an abort (nothing was
   * written; the entry stays). Attempts ignore newer maps (a replica they
   * drop may come back); each is one fence request.
   * @param {'release'|'abort'} phase
   * @param {object[]} targets replicas that did not take it
   * @param {object} what the phase's fields, as first sent
   * @param {number} heldAt when the holds were sent (performance.now())
   */
  #liftLater (phase, targets, what, heldAt) {
    if (targets.length === 0 || this.closed) return // closed: settle() cleared the timers already
    const until = heldAt + this.holds.lapseMs
    const sent = phase === 'release' ? 'lapse' : phase
    const again = { key: what.key, generation: what.generation, fenceId: what.fenceId }
    let left = targets
    let waitMs = LATE_LIFT_FIRST_MS
    const schedule = () => {
      const timer = setTimeout(async () => {
        this.lateLifts.delete(timer)
        let r
        try {
          r = await this.fencer.send(sent, left, again)
        } catch (err) {
          r = { ok: [], failed: left.map((target) => ({ target, reason: err.message })), notAdmitted: [], dropped: [] }
        }
        if (r.ok.length > 0) this.metrics.lateLifts.inc({ phase, outcome: 'ok' }, r.ok.length)
        // A 4xx other than 421 is a refusal that will not change (the replica no
        // longer lists this server for the slice, or a signature check): stop there.
        const refused = r.failed.filter(refusal)
        if (refused.length > 0) this.metrics.lateLifts.inc({ phase, outcome: 'refused' }, refused.length)
        left = untaken({ notAdmitted: r.notAdmitted, dropped: r.dropped, failed: r.failed.filter((f) => !refusal(f)) })
        if (left.length === 0 || this.closed) return
        waitMs = Math.min(waitMs * 2, LATE_LIFT_MAX_MS)
        if (performance.now() + waitMs < until) return schedule()
        this.metrics.lateLifts.inc({ phase, outcome: 'expired' }, left.length)
      }, waitMs)
      timer.unref()
      this.lateLifts.add(timer)
    }
    schedule()
  }

  /**
   * Replica side, first phase (and the primary's own): hold `key` for write
   * `fenceId` of server `from` (null: this server's own write). From now on
   * this server neither serves `key` from its cache on its own word nor fills
   * it. Its cached entry stays (unserved): an ask write's writer may vouch
   * for it; a release replaces it with the newer version, an abort leaves it
   * (that write was not applied), and a lapse drops it before the key is
   * served again (KeyHolds' onLapse). Synchronous: no Redis call stands
   * between a hold's arrival and its answer.
   * @param {{ from?: string|null, url?: string, generation?: number, heldReads?: 'wait'|'ask' }} [writer] the writing
   *   server, its data URL (where a held read asks it), the generation its write was admitted under, and how it
   *   wants reads of the key answered while held (X-KV-Held-Reads)
   */
  hold (key, sliceKey, fenceId, { from = null, url, generation = 0, heldReads = 'wait' } = {}) {
    const ask = heldReads === 'ask' && from !== null
    this.holds.add(key, fenceId, { sliceKey, from, url, generation, fenceId, heldReads: ask ? 'ask' : 'wait' })
    this.#poisonReads(key, ask ? 'ask' : 'wait')
  }

  /** The server whose write `fenceId` holds `key` here, or undefined when none does. */
  holdFrom (key, fenceId) {
    const meta = this.holds.metaOf(key, fenceId)
    return meta === undefined ? undefined : meta.from
  }

  /**
   * Store reads of `key` in flight (fills, held reads) may predate a write:
   * they are not cached (`poisoned`), and later reads do not share them.
   */
  #poisonReads (key, kind) {
    const reads = this.storeReads.get(key)
    if (reads) for (const r of reads) if (r.poisoned !== 'ask') r.poisoned = kind
    this.queue.cut(key)
  }

  /**
   * Replica side, a release sent late (`X-KV-Fence: lapse`, the writer's
   * #liftLater): the write was acknowledged, but this replica did not admit
   * the slice when its release came, and writes since may not have held it.
   * So, as when a hold lapses, its cached entry is dropped before the hold
   * is lifted (the next read fills from DynamoDB), and fills in flight are
   * not cached: one that began under the hold may have read DynamoDB before
   * the write landed (a timed lapse comes too late for that; this one may
   * not). Nothing to do when the hold no longer stands.
   */
  async lapse (key, sliceKey, fenceId) {
    if (!this.holds.has(key, fenceId)) return
    this.#poisonReads(key, 'wait')
    await this.#dropEntry(key, sliceKey)
    this.holds.remove(key, fenceId)
  }

  /**
   * Delete `key`'s cache entry. When Redis fails, distrust the whole cache
   * instead, so the entry we could not delete is never served.
   * @returns {Promise<boolean|null>} whether there was an entry; null when the delete failed
   */
  async #dropEntry (key, sliceKey) {
    try {
      return await this.cache.del(key, sliceKey)
    } catch (err) {
      this.#cacheFailed('del', err)
      this.#distrustAll('cache_error')
      return null
    }
  }

  /**
   * Replica side, second phase: cache the written value at `version` (a put
   * that sent it), or a fence entry at `version` ("nothing below it", refused
   * to older fills), then lift the hold. Either way the version-checked set
   * never replaces a newer entry. Without a version (an abort: the write was
   * not applied) only the hold is lifted.
   *
   * While another write still holds the key here (the primary's next write,
   * whose hold overtook this release, or a second writer during a change of
   * primary), the value is cached all the same: nothing is served from the
   * cache while the key is held; that write's release replaces it (a newer
   * version), its abort leaves it (that write was not applied), and its
   * lapse (outcome unknown: DynamoDB may hold a newer value) drops it before
   * the hold is lifted (KeyHolds' onLapse). So releases that arrive out of
   * order still leave the newest value cached, where a bare fence would make
   * the next read a miss.
   * @param {bigint} [version]
   * @param {{ value: Buffer, contentType: string }} [written] the value DynamoDB now holds at `version`
   */
  async release (key, sliceKey, fenceId, version, written) {
    // This server lost the slice after it took the hold (onRelease): writes
    // while it was out did not hold it, so the value may be overwritten by
    // now, and caching it would outlive them (it is tagged as of now). Lift
    // the hold as a lapse would instead.
    const meta = this.holds.metaOf(key, fenceId)
    if (meta && meta.orphaned) return this.lapse(key, sliceKey, fenceId)
    if (version !== undefined) {
      const entry = written
        ? { tag: this.epochs.now(), ver: version, contentType: written.contentType, value: written.value }
        : { tag: this.epochs.now(), ver: version, contentType: FENCE_TYPE, value: EMPTY }
      try {
        await this.cache.set(key, sliceKey, entry)
      } catch (err) {
        this.#cacheFailed('fence', err)
        this.#distrustAll('cache_error')
      }
    }
    this.holds.remove(key, fenceId)
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
        if ((await this.#dropEntry(key, sliceKey)) && fenced) this.metrics.invalidations.inc({ reason: 'fenced' })
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
    // Holds on keys there outlive the slice: a release that comes for one
    // later (once the slice is back) must not cache its value (release()).
    this.holds.each((key, id, meta) => { if (meta && contains(ranges, meta.sliceKey)) meta.orphaned = true })
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

  /** Wait for background range drops and releases (before closing the cache); lift every hold. */
  async settle () {
    this.closed = true
    for (const timer of this.lateLifts) clearTimeout(timer)
    this.lateLifts.clear()
    await Promise.all([...this.drops, ...this.releases])
    this.holds.clear()
  }
}

/** A hold whose writer's reads ask it (kv-service.js heldReads: ask). */
function isAsk (meta) {
  return meta !== undefined && meta !== null && meta.heldReads === 'ask'
}

module.exports = { KvService, FENCE_TYPE, HELD_READS }
