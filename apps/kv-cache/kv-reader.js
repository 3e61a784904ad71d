'use strict'

const { performance } = require('node:perf_hooks')
const { ReadBatches } = require('./read-batches')
const { FENCE_TYPE } = require('./kv-replica')
const { KeyHeldError, StoreUnavailableError } = require('../../core/errors')

const NONE = Object.freeze([])

/** A hold whose writer's reads ask it (the `heldReads: 'ask'` option). */
function isAsk (meta) {
  return meta !== undefined && meta !== null && meta.heldReads === 'ask'
}

/**
 * kv-cache's reads (paper 6.1): the cache first; on a miss a strongly
 * consistent DynamoDB read that fills the cache. A key that a write holds
 * here (docs/replication.md, "kv-cache") is not answered from the cache on
 * this server's own word: the read waits for the release and then reads
 * DynamoDB (`heldReads: 'wait'`), or asks the writer (`'ask'`).
 *
 * Reads wait for the writes before them, not after: a read waits only for
 * the holds that stood when it came. A write takes effect only once every
 * replica acknowledged its hold, so a hold that comes after a read is of a
 * write the read may be ordered before. `heldReadWaitMs` counts from the
 * youngest of those holds' arrival (#heldWaitMs), so a late release delays
 * reads only until its hold is that old.
 */
class KvReader {
  /** @param {import('./kv-service').KvService} kv the state the roles share */
  constructor (kv) {
    this.kv = kv
    this.heldStoreReads = new ReadBatches() // held keys' store reads, shared only by reads that arrived before them
    this.writerAsks = new ReadBatches() // held keys' reads asked of their writer, shared likewise
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
    return this.kv.heldReadWaitMs - Math.max(0, this.kv.holds.age(key))
  }

  /**
   * KeyHolds.waitLifted, timed (chopper_kv_held_read_wait_seconds): by
   * default for the holds younger than heldReadWaitMs only. An older one (a lost release,
   * kept until holdLapseMs) is waited for by no read, so a read under it and
   * a fresh one waits for the fresh one's release alone, then reads DynamoDB.
   */
  async #waitLifted (key, ms, maxAgeMs = this.kv.heldReadWaitMs) {
    const t0 = performance.now()
    try {
      return await this.kv.holds.waitLifted(key, ms, maxAgeMs)
    } finally {
      this.kv.metrics.heldReadWaits.observe((performance.now() - t0) / 1000)
    }
  }

  /** `waited`: (ask) this read already waited heldReadWaitMs for a release once; it asks at once now. */
  async #get (key, sliceKey, waited) {
    if (this.kv.holds.held(key) && this.#asks(key)) return this.#askedRead(key, sliceKey, waited)
    // wait: a write holds the key for a few ms (its DynamoDB write and the
    // release round trip): wait for it rather than miss. After the release the
    // cache has the written value, so the read is a hit ordered after the write.
    // Only the holds standing now are waited for, not those of writes that
    // begin meanwhile: on a hot key a write's hold often comes before the last
    // one's release, and a read that waited for the key to be free of holds
    // could wait for a chain of writes (then miss, after heldReadWaitMs).
    if (this.kv.holds.held(key)) {
      const wait = this.#heldWaitMs(key)
      if (!(wait > 0 && (await this.#waitLifted(key, wait))) || this.kv.holds.heldLongerThan(key, this.kv.heldReadWaitMs)) {
        if (this.#asks(key)) return this.#askedRead(key, sliceKey, true) // an ask write's hold came meanwhile
        this.kv.metrics.heldReads.inc({ outcome: 'store' })
        return this.#heldRead(key, sliceKey)
      }
      this.kv.metrics.heldReads.inc({ outcome: 'lifted' })
    }
    let entry = null
    try {
      entry = await this.kv.cache.get(key, sliceKey)
    } catch (err) {
      this.kv.cacheFailed('get', err)
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
      if (this.kv.epochs.trusts(entry.tag, sliceKey)) {
        this.kv.metrics.hits.inc()
        return { value: entry.value, contentType: entry.contentType, ver: entry.ver, cached: true }
      }
      this.kv.metrics.invalidations.inc({ reason: 'stale' })
    }
    this.kv.metrics.misses.inc()
    const shared = this.kv.queue.readJoins(key)
    if (shared) this.kv.metrics.sharedReads.inc({ with: 'fill' })
    const { item, poisoned } = await this.kv.queue.read(key, () => this.#fill(key, sliceKey, entry !== null))
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
      this.kv.metrics.heldReads.inc({ outcome: 'lifted' })
      return this.#get(key, sliceKey, true)
    }
    const deadline = performance.now() + this.kv.heldReadTimeoutMs
    for (;;) {
      const hold = this.#askHold(key, skip)
      if (hold === undefined) {
        // only the gone writer's hold: DynamoDB; lifted, or only holds of wait writes left: as usual
        return skip.length > 0 && this.#asks(key) ? this.#heldRead(key, sliceKey, skip) : this.#get(key, sliceKey, true)
      }
      const left = deadline - performance.now()
      const { item: r } = await this.writerAsks.read(key, () => this.#askWriter(key, sliceKey, hold, Math.max(1, Math.round(left))))
      if (r.outcome === 'current' || r.outcome === 'value' || r.outcome === 'none') {
        this.kv.metrics.heldReads.inc({ outcome: 'writer' })
        if (r.outcome === 'current') this.kv.metrics.hits.inc()
        const item = r.item
        return item ? { value: item.value, contentType: item.contentType, ver: item.ver, cached: r.outcome === 'current', shared: r.outcome === 'value' } : null
      }
      if (r.outcome === 'gone') {
        this.kv.metrics.heldReads.inc({ outcome: 'store' })
        return this.#heldRead(key, sliceKey, [...skip, hold.from])
      }
      const wait = deadline - performance.now()
      if (wait <= 0) {
        this.kv.logger.warn({ key, writer: hold.from, reason: r.reason }, 'a read of a held key could not be answered: its writer did not answer')
        throw new StoreUnavailableError(`key ${JSON.stringify(key)} is held by a write of server ${hold.from}, which did not answer (${r.reason}); retry the request`)
      }
      await this.#waitLifted(key, Math.min(this.kv.heldReadWaitMs, wait), Infinity) // between asks: every hold, old ones too
    }
  }

  /** One ask of `hold`'s writer for `key`, with the version cached here. */
  async #askWriter (key, sliceKey, hold, timeoutMs) {
    if (this.kv.replicaDropped(hold.from, sliceKey, hold.generation)) return { outcome: 'gone' }
    const url = hold.url
    if (!url) return { outcome: 'unsure', reason: `no URL known for server ${hold.from}` }
    let have = null
    try {
      const entry = await this.kv.cache.get(key, sliceKey)
      if (entry && entry.contentType !== FENCE_TYPE && this.kv.epochs.trusts(entry.tag, sliceKey)) have = entry
    } catch (err) {
      this.kv.cacheFailed('get', err)
    }
    const r = await this.kv.fencer.ask({ id: hold.from, url }, { key, generation: hold.generation, fenceId: hold.fenceId, have: have === null ? undefined : have.ver, timeoutMs })
    return r.outcome === 'current' ? { outcome: 'current', item: have } : r
  }

  /**
   * The writer's side of an ask (heldReads ask): its own read of `key`. A
   * server that another server's write holds refuses (KeyHeldError, 409):
   * answering would mean asking in turn, and two writers could ask each other.
   */
  async answerAsk (key, sliceKey) {
    const hold = this.kv.holds.newest(key, (m) => m !== undefined && m.from !== null)
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
    this.kv.metrics.misses.inc()
    const { item: r, shared } = await this.heldStoreReads.read(key, () => this.#poisonable(key, () => this.kv.storeOp('get', () => this.kv.store.get(key)), skip))
    if (r.poisoned === 'ask') return this.#askedRead(key, sliceKey, true, skip)
    const item = r.item
    if (shared) this.kv.metrics.sharedReads.inc({ with: 'held' })
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
    let reads = this.kv.storeReads.get(key)
    if (!reads) this.kv.storeReads.set(key, (reads = new Set()))
    reads.add(read)
    try {
      return { item: await fn(), poisoned: read.poisoned }
    } finally {
      reads.delete(read)
      if (reads.size === 0 && this.kv.storeReads.get(key) === reads) this.kv.storeReads.delete(key)
    }
  }

  /** Whether a hold of an ask write (its reads ask the writer) holds `key` here, those of `skip` aside. */
  #asks (key, skip = NONE) {
    return this.#askHold(key, skip) !== undefined
  }

  /** The newest hold of an ask write on `key`, not of a server in `skip`. */
  #askHold (key, skip = NONE) {
    return this.kv.holds.newest(key, (m) => isAsk(m) && !skip.includes(m.from))
  }

  async #fill (key, sliceKey, sawStale) {
    // The tag is taken before the read: if this server loses and regains the
    // slice while DynamoDB answers, the entry is born distrusted.
    const tag = this.kv.epochs.now()
    // A hold that arrives while DynamoDB answers poisons the fill: the write it
    // announces may land before our (older) value would reach the cache.
    const done = await this.#poisonable(key, () => this.kv.storeOp('get', () => this.kv.store.get(key)))
    if (done.poisoned) return done
    const item = done.item
    if (this.kv.holds.held(key)) return done
    if (!this.kv.cache.healthy) return done // degraded: the fill would only fail
    try {
      // KeyQueue runs this after every earlier write of this server to the key,
      // and DynamoDB versions only grow, so the item is never older than an
      // entry we wrote; the cache's version check makes sure of it anyway.
      if (item) await this.kv.cache.set(key, sliceKey, { tag, ver: item.ver, contentType: item.contentType, value: item.value })
      // A distrusted entry for a deleted key would otherwise be kept alive by
      // every GETEX that reads (and refuses) it.
      else if (sawStale) await this.kv.cache.del(key, sliceKey)
    } catch (err) {
      // A failed fill leaves nothing newer than DynamoDB behind: no need to distrust.
      this.kv.cacheFailed('fill', err)
    }
    return done
  }
}

module.exports = { KvReader }
