'use strict'

const noop = () => {}

/**
 * Runs the store-and-cache sequences of one key one at a time, in arrival
 * order, so the order in which Redis is updated always matches the order in
 * which DynamoDB accepted the writes. Without it, two concurrent PUTs (or a
 * miss fill racing a PUT) can leave an older value in Redis, and since entries
 * expire 10 s after the last *access*, a hot key would serve it indefinitely.
 *
 * Only the owner of a key touches its cache, so in-process ordering suffices.
 * A read that arrives while the queue's tail is a read joins it instead of
 * issuing another DynamoDB read (no write sits between them), which also
 * absorbs the miss storm on a hot key right after its slice moves.
 */
class KeyQueue {
  constructor () {
    this.tails = new Map() // key -> { kind, promise }
  }

  /** Run `fn` after every queued operation on `key`; reads coalesce. */
  read (key, fn) {
    const tail = this.tails.get(key)
    if (this.readJoins(key)) return tail.promise
    return this.#enqueue(key, 'read', fn, tail)
  }

  /** Whether a read of `key` now would join a queued read instead of running its own. */
  readJoins (key) {
    const tail = this.tails.get(key)
    return tail !== undefined && tail.kind === 'read'
  }

  /** Run `fn` after every queued operation on `key`. */
  write (key, fn) {
    return this.#enqueue(key, 'write', fn, this.tails.get(key))
  }

  /**
   * Reads that arrive from now on do not join the read in flight on `key`
   * (they queue behind it and read again): a write elsewhere may land
   * between that read and theirs (kv-replica.js, holds).
   */
  cut (key) {
    const tail = this.tails.get(key)
    if (!tail || tail.kind !== 'read') return
    const entry = { kind: 'cut', promise: tail.promise }
    this.tails.set(key, entry)
    tail.promise.catch(noop).then(() => {
      if (this.tails.get(key) === entry) this.tails.delete(key)
    })
  }

  /** Keys with queued work (for tests and metrics). */
  get size () {
    return this.tails.size
  }

  #enqueue (key, kind, fn, tail) {
    const run = () => fn()
    const promise = tail ? tail.promise.then(run, run) : run()
    const entry = { kind, promise }
    this.tails.set(key, entry)
    promise.catch(noop).then(() => {
      if (this.tails.get(key) === entry) this.tails.delete(key)
    })
    return promise
  }
}

module.exports = { KeyQueue }
