'use strict'

const crypto = require('node:crypto')
const { performance } = require('node:perf_hooks')
const { WriteBatches, queueAnswered } = require('./write-batches')
const { FENCE_TYPE } = require('./kv-replica')
const { FencedWriteError, InvalidArgumentError, ReplicaUnavailableError, StoreUnavailableError, WriteIndeterminateError } = require('../../core/errors')

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
 * kv-cache's writes: DynamoDB first (the source of truth), acknowledged only
 * once it accepted them, then this server's cache. Writes carry the
 * generation they were admitted under; DynamoDB refuses a write older than
 * what it holds (dynamo-store.js, version.js). For a replicated slice the
 * write first holds the key on every other replica and lifts the holds with
 * the written version afterwards (docs/replication.md has the sequence).
 */
class KvWriter {
  /**
   * @param {import('./kv-service').KvService} kv the state the roles share
   * @param {{ batchWrites: boolean, pipelineReleases: boolean, serverId: string }} options
   */
  constructor (kv, { batchWrites, pipelineReleases, serverId }) {
    this.kv = kv
    this.batchWrites = batchWrites
    this.pipelineReleases = pipelineReleases
    this.batches = new WriteBatches(kv.queue, () => kv.metrics.batchedWrites.inc())
    this.releases = new Set() // releases still going on after their writes were answered
    this.lateLifts = new Set() // timers of lifts sent again (#liftLater)
    this.closed = false // close() ran: no more lifts are sent again
    this.fenceIds = `${serverId}:${crypto.randomBytes(4).toString('hex')}:`
    this.fenceSeq = 0
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
    if (!this.batchWrites) return queueAnswered(this.kv.queue, key, () => run(() => written, () => written))
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
        store: () => this.#write('delete', key, sliceKey, () => this.kv.store.delete(key, { generation })),
        cache: async () => {
          if ((await this.kv.dropEntry(key, sliceKey)) !== null) this.kv.metrics.invalidations.inc({ reason: 'delete' })
        }
      }
    }
    const { value, contentType } = w
    let tag
    return {
      store: () => {
        tag = this.kv.epochs.now()
        return this.#write('put', key, sliceKey, () => this.kv.store.put(key, value, contentType, { generation }))
      },
      cache: async (ver) => {
        try {
          await this.kv.cache.set(key, sliceKey, { tag, ver, contentType, value })
        } catch (err) {
          this.kv.cacheFailed('set', err)
          this.kv.distrustAll('cache_error')
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
    if (replicas.length === 0 || this.kv.fencer === null) {
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
    const ask = this.kv.heldReads === 'ask'
    const what = { key, generation, fenceId, dropped: (target) => this.kv.replicaDropped(target.id, sliceKey, generation) }
    if (ask) what.heldReads = 'ask'
    const t0 = performance.now()
    const held = await this.kv.fencer.send('hold', replicas, what)
    const tHeld = performance.now()
    this.kv.metrics.writePhases.observe({ phase: 'hold' }, (tHeld - t0) / 1000)
    const abort = async () => {
      if (held.ok.length > 0) {
        const r = await this.kv.fencer.send('abort', held.ok, what)
        // An abort that does not arrive is harmless: that hold lapses, unless a later one lifts it.
        if (r.failed.length > 0) this.kv.logger.warn({ key, op, fenceId, replicas: r.failed.map((f) => f.target.id) }, 'abort of a write hold did not reach every replica; sent again until those holds would lapse')
        this.#liftLater('abort', untaken(r), what, t0)
      }
      this.kv.holds.remove(key, fenceId)
    }
    if (held.failed.length > 0) {
      const detail = held.failed.map((f) => `${f.target.id} (${f.reason})`).join(', ')
      this.kv.metrics.replicatedWriteFailures.inc({ op, phase: 'hold' })
      this.kv.logger.warn({ key, op, fenceId, replicas: held.failed.map((f) => f.target.id) }, 'write refused: a replica could not be held')
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
    if (selfHeld) this.kv.hold(key, sliceKey, fenceId)
    const written = seal()
    op = opOf(written)
    const { store, cache } = this.#operation(key, sliceKey, generation, written)
    let ver
    try {
      ver = await store()
      this.kv.metrics.writePhases.observe({ phase: 'store' }, (performance.now() - tHeld) / 1000)
    } catch (err) {
      if (err instanceof FencedWriteError) await abort() // certainly not applied
      // Otherwise the write may still land: every hold stays until it lapses,
      // and this server holds itself (ask: from now on): its cache is not served meanwhile.
      else if (!selfHeld) this.kv.hold(key, sliceKey, fenceId)
      throw err
    }
    // A put hands the replicas its value, cached at the new version (write-through: the
    // next read there is a hit); a delete leaves a bare fence (a miss that refuses older fills).
    const lift = { ...what, version: ver, ...(written || {}) }
    const release = () => {
      const tr = performance.now()
      return this.kv.fencer.send('release', held.ok, lift).then(
        (r) => {
          this.kv.metrics.writePhases.observe({ phase: 'release' }, (performance.now() - tr) / 1000)
          this.#liftLater('release', untaken(r), lift, t0)
          return r.failed.length === 0 ? null : r.failed
        },
        (err) => {
          this.kv.logger.error({ err, key, op, fenceId }, 'release of a write hold failed; the replicas stay held until their holds lapse')
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
    this.kv.holds.remove(key, fenceId)
    if (released === null) released = release()
    const early = performance.now() - t0 < this.kv.holds.lapseMs
    const outcome = released.then((failed) => {
      if (failed === null) return null
      const ids = failed.map((f) => f.target.id)
      this.kv.metrics.replicatedWriteFailures.inc({ op, phase: 'release' })
      if (early) this.kv.logger.warn({ key, op, fenceId, replicas: ids, reasons: failed.map((f) => f.reason) }, 'write applied; a replica could not be fenced and stays held (reads from DynamoDB) until its hold lapses')
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
      this.kv.logger.error({ key, op, fenceId, replicas: failed, ms }, 'write applied, but a replica could be neither fenced nor was it still held: it may serve the previous value')
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
    const until = heldAt + this.kv.holds.lapseMs
    const sent = phase === 'release' ? 'lapse' : phase
    const again = { key: what.key, generation: what.generation, fenceId: what.fenceId }
    let left = targets
    let waitMs = LATE_LIFT_FIRST_MS
    const schedule = () => {
      const timer = setTimeout(async () => {
        this.lateLifts.delete(timer)
        let r
        try {
          r = await this.kv.fencer.send(sent, left, again)
        } catch (err) {
          r = { ok: [], failed: left.map((target) => ({ target, reason: err.message })), notAdmitted: [], dropped: [] }
        }
        if (r.ok.length > 0) this.kv.metrics.lateLifts.inc({ phase, outcome: 'ok' }, r.ok.length)
        // A 4xx other than 421 is a refusal that will not change (the replica no
        // longer lists this server for the slice, or a signature check): stop there.
        const refused = r.failed.filter(refusal)
        if (refused.length > 0) this.kv.metrics.lateLifts.inc({ phase, outcome: 'refused' }, refused.length)
        left = untaken({ notAdmitted: r.notAdmitted, dropped: r.dropped, failed: r.failed.filter((f) => !refusal(f)) })
        if (left.length === 0 || this.closed) return
        waitMs = Math.min(waitMs * 2, LATE_LIFT_MAX_MS)
        if (performance.now() + waitMs < until) return schedule()
        this.kv.metrics.lateLifts.inc({ phase, outcome: 'expired' }, left.length)
      }, waitMs)
      timer.unref()
      this.lateLifts.add(timer)
    }
    schedule()
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
      return await this.kv.storeOp(op, fn)
    } catch (err) {
      const fenced = err instanceof FencedWriteError
      if (fenced) {
        this.kv.metrics.fencedWrites.inc({ op })
        this.kv.logger.warn({ err, op }, 'write fenced off: a newer owner wrote the key')
      }
      if (fenced || err instanceof StoreUnavailableError) {
        if ((await this.kv.dropEntry(key, sliceKey)) && fenced) this.kv.metrics.invalidations.inc({ reason: 'fenced' })
      }
      throw err
    }
  }

  /** Send no more lifts again; returns the releases still going on. */
  close () {
    this.closed = true
    for (const timer of this.lateLifts) clearTimeout(timer)
    this.lateLifts.clear()
    return [...this.releases]
  }
}

module.exports = { KvWriter }
