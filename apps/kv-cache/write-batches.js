'use strict'

/**
 * Group commit for one key's writes. Writes of a key run one at a time
 * (KeyQueue), and on a replicated slice each one holds every replica, writes
 * DynamoDB and releases the replicas. On a hot key the writes that arrive
 * while one runs would each wait for all of that in turn, so their wait grows
 * with the queue. Instead, the writes that arrive while a write runs join one
 * batch, and the batch runs once, as its last write: one hold, one DynamoDB
 * write, one release. Every write of the batch settles with its outcome.
 *
 * A batch stays open after its turn came, until its runner seals it: the
 * runner first holds the replicas, which needs no value, and seals right
 * before its DynamoDB write, the first step that needs one. So a write that
 * arrives while the running batch still holds its replicas joins it, rather
 * than waiting for the whole of it and then running a batch of its own.
 *
 * That is linearizable: the writes of a batch are all in flight together (none
 * has been answered), so they may take effect in arrival order at the moment
 * the batch's write lands, each overwritten at once by the next. No read can
 * see the ones before the last. A batch that fails fails every write in it:
 * fenced or not applied for all, or, when the outcome is unknown, unknown for
 * all (either the last write landed, and with it every earlier one, or none).
 *
 * Only writes admitted alike may join: same `group` (kv-writer.js: the
 * generation the request was admitted under and the replicas to hold), since
 * the batch runs under its last write's.
 */
class WriteBatches {
  /**
   * @param {import('./key-queue').KeyQueue} queue the key's operations, in order
   * @param {() => void} [onJoined] a write joined a waiting or running batch
   */
  constructor (queue, onJoined = () => {}) {
    this.queue = queue
    this.onJoined = onJoined
    this.waiting = new Map() // key -> the key's open batch: queued, or running and not yet sealed
  }

  /**
   * Queue write `w` of `key`.
   * @template W, R
   * @param {string} key
   * @param {string} group writes join an open batch only of the same group
   * @param {W} w
   * @param {(seal: () => W, peek: () => W) => Promise<{ value: R, after: Promise<void>|null }>} run
   *   runs a batch as its last write (see queueAnswered): `seal()` closes the
   *   batch to later writes and returns its last write, the one to apply (call
   *   it before anything that needs the write); `peek()` returns the last write
   *   so far without closing it. A batch is closed when its run settles, sealed or not.
   * @returns {Promise<R>}
   */
  write (key, group, w, run) {
    const open = this.waiting.get(key)
    if (open && open.group === group) {
      open.last = w
      this.onJoined()
      return open.promise
    }
    const batch = { group, last: w, promise: null }
    this.waiting.set(key, batch)
    // later writes of the key start the next batch, behind this one
    const seal = () => {
      if (this.waiting.get(key) === batch) this.waiting.delete(key)
      return batch.last
    }
    const peek = () => batch.last
    batch.promise = queueAnswered(this.queue, key, async () => {
      try {
        return await run(seal, peek)
      } finally {
        seal()
      }
    })
    return batch.promise
  }

  /** Keys with an open batch (for tests). */
  get size () {
    return this.waiting.size
  }
}

/**
 * Run `fn` in `key`'s turn of `queue`. `fn` resolves with the write's answer
 * (`value`) and what must still finish before the key's next operation
 * (`after`, which never rejects; null: nothing): the returned promise settles
 * with the answer at once, while the queue waits for `after` too.
 * @template R
 * @param {import('./key-queue').KeyQueue} queue
 * @param {string} key
 * @param {() => Promise<{ value: R, after: Promise<void>|null }>} fn
 * @returns {Promise<R>}
 */
function queueAnswered (queue, key, fn) {
  return new Promise((resolve, reject) => {
    queue.write(key, async () => {
      let r
      try {
        r = await fn()
      } catch (err) {
        reject(err)
        return
      }
      resolve(r.value)
      if (r.after) await r.after
    })
  })
}

module.exports = { WriteBatches, queueAnswered }
