'use strict'

const { InvalidArgumentError } = require('../core/errors')

/**
 * A discrete-event engine in virtual time: a binary min-heap of events
 * ordered by (time, insertion sequence). Ties run in the order they were
 * scheduled, so a run is a pure function of its inputs. Times are
 * milliseconds as doubles (any resolution finer than ms is kept). No I/O,
 * no clock.
 */
class Engine {
  constructor () {
    this.now = 0
    this.executed = 0
    this._heap = [] // { t, s, fn, arg }
    this._seq = 0
  }

  /** Number of pending events. */
  get size () { return this._heap.length }

  /**
   * Run `fn(arg, engine)` at virtual time `time` (ms). Scheduling in the past is an error.
   * @param {number} time
   * @param {(arg: *, engine: Engine) => void} fn
   * @param {*} [arg]
   */
  at (time, fn, arg) {
    if (!(time >= this.now)) throw new InvalidArgumentError(`cannot schedule at ${time}: before now (${this.now})`)
    const h = this._heap
    const ev = { t: time, s: this._seq++, fn, arg }
    let i = h.length
    h.push(ev)
    while (i > 0) { // sift up
      const p = (i - 1) >> 1
      const q = h[p]
      if (q.t < time || (q.t === time && q.s < ev.s)) break
      h[i] = q
      i = p
    }
    h[i] = ev
  }

  /** Run `fn` `delay` ms from now. */
  after (delay, fn, arg) { this.at(this.now + delay, fn, arg) }

  /**
   * Run events in order until the queue is empty or the next event is after `until`.
   * The clock ends at `until` when given (else at the last event).
   * @param {number} [until]
   * @returns {number} events executed
   */
  run (until = Infinity) {
    let n = 0
    const h = this._heap
    while (h.length > 0 && h[0].t <= until) {
      const ev = this._pop()
      this.now = ev.t
      ev.fn(ev.arg, this)
      n++
    }
    if (until !== Infinity && until > this.now) this.now = until
    this.executed += n
    return n
  }

  _pop () {
    const h = this._heap
    const top = h[0]
    const last = h.pop()
    const n = h.length
    if (n === 0) return top
    let i = 0
    for (;;) { // sift `last` down from the root
      const l = 2 * i + 1
      if (l >= n) break
      const r = l + 1
      let c = l
      if (r < n && (h[r].t < h[l].t || (h[r].t === h[l].t && h[r].s < h[l].s))) c = r
      const x = h[c]
      if (last.t < x.t || (last.t === x.t && last.s < x.s)) break
      h[i] = x
      i = c
    }
    h[i] = last
    return top
  }
}

/** @returns {Engine} */
function createEngine () { return new Engine() }

module.exports = { Engine, createEngine }
