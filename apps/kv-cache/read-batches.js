'use strict'

const noop = () => {}

/**
 * Shared DynamoDB reads of one key for reads that may not join a read already
 * in flight: those of a key a write holds (kv-reader.js). While a write is
 * in progress somewhere, a store read issued before a reader arrived may
 * predate a write acknowledged before it arrived (the writer answers before
 * its releases reach the replicas), so a reader may only share a store read
 * issued after it arrived.
 *
 * So: a reader that finds no store read of its key running starts one; one
 * that finds one running joins the next, which starts as soon as the running
 * one settles and answers every reader that joined it. Each reader of a batch
 * arrived before the batch's strongly consistent read was issued and is
 * answered after it returned, so the answer falls within each reader's
 * interval: linearizable, however many join. A key has at most two store
 * reads of this kind at a time (one running, one waiting) however many
 * readers wait on it, which is what keeps a starved server from turning a
 * slow write into a flood of DynamoDB reads.
 *
 * A batch whose read fails fails every reader in it.
 */
class ReadBatches {
  constructor () {
    this.keys = new Map() // key -> { running: Promise|null, next: Promise|null }
  }

  /**
   * Read `key` with `fn` (a store read), or share the next read of it.
   * @template T
   * @param {string} key
   * @param {() => Promise<T>} fn
   * @returns {Promise<{ item: T, shared: boolean }>} shared: answered by a read another reader started
   */
  read (key, fn) {
    let state = this.keys.get(key)
    if (!state) this.keys.set(key, (state = { running: null, next: null }))
    if (state.next) return state.next.then((item) => ({ item, shared: true }))
    if (!state.running) return this.#start(key, state, fn).then((item) => ({ item, shared: false }))
    const next = state.running.then(noop, noop).then(() => {
      state.next = null
      return this.#start(key, state, fn)
    })
    state.next = next
    return next.then((item) => ({ item, shared: false }))
  }

  /** Keys with a store read running or waiting (for tests). */
  get size () {
    return this.keys.size
  }

  #start (key, state, fn) {
    const running = new Promise((resolve) => resolve(fn()))
    state.running = running
    running.then(noop, noop).then(() => {
      if (state.running !== running) return
      state.running = null
      if (state.next === null && this.keys.get(key) === state) this.keys.delete(key)
    })
    return running
  }
}

module.exports = { ReadBatches }
