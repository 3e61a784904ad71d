'use strict'

const crypto = require('node:crypto')
const { mergeVotes } = require('../core/hot-keys')

/**
 * Per-range request counts and cost (busy milliseconds) that a read never
 * loses (issue: "load reports that lose nothing and lie about nothing").
 *
 * Counts and costs accumulate in frames. Every read closes the open frame under the next
 * sequence number and returns every frame the controller has not acknowledged,
 * merged. The controller acknowledges a sequence number only after it has used
 * that report (`ack` on its next read), so a read whose answer is lost (a
 * timeout, a dropped connection) is simply read again, with the newer counts
 * added: nothing is lost and nothing is counted twice. `frames` tells the
 * controller how many collection periods a report spans, so a server whose
 * earlier reads failed does not look twice as hot.
 *
 * `instance` changes with every process, so an acknowledgement meant for an
 * earlier incarnation of this server id is ignored.
 */
class LoadLedger {
  /** @param {{ maxFrames?: number }} [options] unacknowledged frames kept; older ones are folded together */
  constructor ({ maxFrames = 64 } = {}) {
    this.instance = crypto.randomBytes(6).toString('base64url')
    this.maxFrames = maxFrames
    this.seq = 0
    this.open = [] // { start, end, count, cost } of the open frame
    this.frames = [] // { seq, entries } closed, unacknowledged
  }

  /**
   * Add one slice's requests and their cost (ms) to the open frame. Either may
   * be 0: a request's cost can arrive after its count was flushed (it finished
   * after a map change or a report). `hot`: the slice's majority vote over its
   * requests' keys (core/hot-keys.js), when it has a candidate.
   */
  add (start, end, count, cost = 0, done = 0, hot = undefined) {
    if (!(count > 0 || cost > 0 || done > 0)) return
    const e = { start, end, count, cost, done }
    if (hot !== undefined) e.hot = hot
    this.open.push(e)
  }

  /**
   * Close the open frame and return everything not yet acknowledged.
   * @param {{ instance?: string, seq?: number }} [ack] the controller's last used report
   * @returns {{ instance: string, seq: number, frames: number, entries: {start,end,count,cost,done?,hot?}[] }}
   */
  read (ack = {}) {
    if (ack.instance === this.instance && Number.isSafeInteger(ack.seq)) {
      this.frames = this.frames.filter((f) => f.seq > ack.seq)
    }
    this.frames.push({ seq: ++this.seq, entries: this.open })
    this.open = []
    if (this.frames.length > this.maxFrames) {
      // The controller has not acknowledged for a long time: keep the counts, lose the framing.
      const folded = this.frames.splice(0, this.frames.length - this.maxFrames + 1)
      this.frames.unshift({ seq: folded[folded.length - 1].seq, entries: folded.flatMap((f) => f.entries), folded: folded.reduce((n, f) => n + (f.folded || 1), 0) })
    }
    const entries = []
    let frames = 0
    for (const f of this.frames) {
      for (const e of f.entries) entries.push(e)
      frames += f.folded || 1
    }
    return { instance: this.instance, seq: this.seq, frames, entries: coalesce(entries) }
  }
}

/**
 * Sum entries with identical ranges, so repeated reads stay small, and merge
 * their hot-key votes. Costs are rounded to the microsecond.
 */
function coalesce (entries) {
  const byRange = new Map()
  for (const e of entries) {
    const k = `${e.start}:${e.end}`
    const prev = byRange.get(k)
    if (prev) {
      prev.count += e.count
      prev.cost += e.cost
      prev.done += e.done || 0
      prev.hot = mergeVotes(prev.hot, e.hot)
    } else {
      byRange.set(k, { start: e.start, end: e.end, count: e.count, cost: e.cost, done: e.done || 0, hot: mergeVotes(null, e.hot) })
    }
  }
  const out = [...byRange.values()].sort((a, b) => a.start - b.start || a.end - b.end)
  for (const e of out) {
    e.cost = Math.round(e.cost * 1000) / 1000
    if (e.done === 0) delete e.done // requests that finished here (carried their cost): only when some did
    if (e.hot === null) delete e.hot // a majority candidate: only when there is one
  }
  return out
}

module.exports = { LoadLedger }
