'use strict'

/**
 * A fence entry's content type: a cache entry with a version and no value
 * ("nothing below this version"), a miss that still refuses older fills.
 * Real entries never have it: a value stored without a Content-Type gets
 * application/octet-stream, and HTTP has no empty media type.
 */
const FENCE_TYPE = ''
const EMPTY = Buffer.alloc(0)

/**
 * The replica's side of a replicated write (docs/replication.md): a hold
 * from the writer stops this server serving or filling the key from its
 * cache; the release caches the written version and lifts it; an abort
 * lifts it; a late release (`lapse`) drops the entry first. The writer
 * holds itself through the same calls.
 */
class KvReplica {
  /** @param {import('./kv-service').KvService} kv the state the roles share */
  constructor (kv) {
    this.kv = kv
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
    this.kv.holds.add(key, fenceId, { sliceKey, from, url, generation, fenceId, heldReads: ask ? 'ask' : 'wait' })
    this.#poisonReads(key, ask ? 'ask' : 'wait')
  }

  /** The server whose write `fenceId` holds `key` here, or undefined when none does. */
  holdFrom (key, fenceId) {
    const meta = this.kv.holds.metaOf(key, fenceId)
    return meta === undefined ? undefined : meta.from
  }

  /**
   * Store reads of `key` in flight (fills, held reads) may predate a write:
   * they are not cached (`poisoned`), and later reads do not share them.
   */
  #poisonReads (key, kind) {
    const reads = this.kv.storeReads.get(key)
    if (reads) for (const r of reads) if (r.poisoned !== 'ask') r.poisoned = kind
    this.kv.queue.cut(key)
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
    if (!this.kv.holds.has(key, fenceId)) return
    this.#poisonReads(key, 'wait')
    await this.kv.dropEntry(key, sliceKey)
    this.kv.holds.remove(key, fenceId)
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
    const meta = this.kv.holds.metaOf(key, fenceId)
    if (meta && meta.orphaned) return this.lapse(key, sliceKey, fenceId)
    if (version !== undefined) {
      const entry = written
        ? { tag: this.kv.epochs.now(), ver: version, contentType: written.contentType, value: written.value }
        : { tag: this.kv.epochs.now(), ver: version, contentType: FENCE_TYPE, value: EMPTY }
      try {
        await this.kv.cache.set(key, sliceKey, entry)
      } catch (err) {
        this.kv.cacheFailed('fence', err)
        this.kv.distrustAll('cache_error')
      }
    }
    this.kv.holds.remove(key, fenceId)
  }
}

module.exports = { KvReplica, FENCE_TYPE }
