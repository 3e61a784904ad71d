'use strict'

/**
 * Stale-read checking for KV workloads (`checkStaleReads`): which GETs
 * returned a value that had already been overwritten before they were sent.
 *
 * Every PUT's value starts with a tag naming its run and request
 * (`~<run>.<id>~`, characters the driver's alphanumeric values never use), so a
 * GET's answer names the write it came from. A read R that returned the value
 * of write W is **stale** when some other write W2 of the key started after W
 * was acknowledged and was itself acknowledged before R was sent: in real
 * time W2 followed W and R followed W2, so a linearizable store must not
 * answer R with W's value. That is the part of a linearizability check that
 * needs no search: it has no false positives, and concurrent writes and reads
 * (either answer is right) are never flagged.
 *
 * - A tag of an earlier run (a preload) is a value written before this run
 *   began: stale once this run has an acknowledged write of the key before
 *   the read.
 * - A 404 is the absence of a value, which the key had before this run (if
 *   it was never written) and after each DELETE: it is stale only when even
 *   the latest of those was followed, as above.
 * - A write that was not acknowledged (an error, a timeout) may still land at
 *   any time: a read that returns it is never called stale.
 * - A value without a tag (written by someone else, or a PUT too short for
 *   one) is not checked.
 *
 * Times are the driver's clock (performance.now()): a write is sent at its
 * start and acknowledged at the end of its response; a read starts when it
 * is sent. Each is a little wider than the request's true span (a request may
 * wait for a connection; a response takes time to read), which can only hide
 * a stale read, never invent one. It assumes that no one else writes the keys
 * during the run: another writer's value would count as one from before it.
 */

const { InvalidArgumentError } = require('../core/errors')

const TAG = 0x7e // '~'
const ABSENT = -2 // a read answered 404
let runs = 0

class StaleReads {
  /** @param {{ runId?: string }} [options] runId: unique among the runs whose values may be read (default: pid and a counter) */
  constructor ({ runId = `${process.pid.toString(36)}x${(++runs).toString(36)}` } = {}) {
    if (typeof runId !== 'string' || !/^[a-z0-9]{1,24}$/.test(runId)) throw new InvalidArgumentError(`runId: expected 1 to 24 lower-case letters and digits, got ${JSON.stringify(runId)}`)
    this.runId = runId
    this.writes = new Map() // key -> [{ start, end, absent }] by id (end Infinity until acknowledged; absent: a DELETE)
    this.byId = [] // id -> write
    this.reads = [] // { key, start, id }: id -1 = a value from before this run, ABSENT = a 404
    this.unchecked = 0
  }

  #record (key, start, absent) {
    const id = this.byId.length
    const w = { key, start, end: Infinity, absent }
    this.byId.push(w)
    let list = this.writes.get(key)
    if (!list) this.writes.set(key, (list = []))
    list.push(w)
    return id
  }

  /** A DELETE of `key` sent at `start`: its handle, for `acknowledged`. */
  remove (key, start) {
    return this.#record(key, start, true)
  }

  /**
   * Tag `value` for a write of `key` sent at `start`: returns the value to
   * send (same length; untagged when too short) and the write's handle.
   * @param {string} key
   * @param {Buffer} value
   * @param {number} start
   * @returns {{ body: Buffer, id: number }}
   */
  write (key, value, start) {
    const id = this.#record(key, start, false)
    const tag = Buffer.from(`~${this.runId}.${id.toString(36)}~`, 'latin1')
    if (value.length < tag.length) return { body: value, id }
    const body = Buffer.allocUnsafe(value.length)
    tag.copy(body, 0)
    value.copy(body, tag.length, tag.length)
    return { body, id }
  }

  /** The write `id` was acknowledged (2xx) at `end`. Unacknowledged writes stay unbounded. */
  acknowledged (id, end) {
    const w = this.byId[id]
    if (w) w.end = end
  }

  /**
   * A GET of `key` sent at `start` answered with `body` (a Buffer, or at
   * least its first bytes), or null for a 404 (no value).
   */
  read (key, start, body) {
    if (body === null) {
      this.reads.push({ key, start, id: ABSENT })
      return
    }
    const tag = parseTag(body)
    if (tag === null) {
      this.unchecked++
      return
    }
    if (tag.run !== this.runId) {
      this.reads.push({ key, start, id: -1 })
      return
    }
    const w = this.byId[tag.id]
    if (!w || w.key !== key) {
      this.unchecked++
      return
    }
    this.reads.push({ key, start, id: tag.id })
  }

  /**
   * @param {number} [examples] how many stale reads to describe
   * @returns {{ checked: number, stale: number, share: number, unchecked: number, examples: object[] }}
   */
  summary (examples = 5) {
    // Per key: acknowledged writes by acknowledgement time, with the latest
    // start among those acknowledged so far (a prefix maximum), and when the
    // latest DELETE was acknowledged (Infinity when one was not; -Infinity
    // for none: the key as before the run).
    const acked = new Map()
    for (const [key, list] of this.writes) {
      const done = list.filter((w) => w.end !== Infinity).sort((a, b) => a.end - b.end)
      const ends = done.map((w) => w.end)
      const latestStart = []
      let m = -Infinity
      for (const w of done) latestStart.push((m = Math.max(m, w.start)))
      let absentEnd = -Infinity
      for (const w of list) if (w.absent && w.end > absentEnd) absentEnd = w.end
      acked.set(key, { ends, latestStart, absentEnd })
    }
    let stale = 0
    const found = []
    for (const r of this.reads) {
      const a = acked.get(r.key)
      if (!a) continue
      const n = countBelow(a.ends, r.start) // writes acknowledged before the read was sent
      if (n === 0) continue
      const followed = a.latestStart[n - 1] // the latest of their starts
      // the write the answer came from; for a 404, the latest that left the key without a value
      const end = r.id === ABSENT ? a.absentEnd : r.id === -1 ? -Infinity : this.byId[r.id].end
      if (followed > end) {
        stale++
        if (found.length < examples) found.push({ key: r.key, sentAtMs: round(r.start), returned: describe(r.id, end), overwrittenBy: `a write sent at ${round(followed)} ms and acknowledged before the read` })
      }
    }
    const checked = this.reads.length
    return { checked, stale, share: checked ? stale / checked : 0, unchecked: this.unchecked, examples: found }
  }
}

function describe (id, end) {
  if (id === ABSENT) return end === -Infinity ? 'no value (404), as before the run' : `no value (404), as after a delete acknowledged at ${round(end)} ms`
  return id === -1 ? 'a value from before the run' : `write ${id}, acknowledged at ${round(end)} ms`
}

/** `{ run, id }` from a value's leading `~run.id~`, or null. */
function parseTag (body) {
  if (body.length < 5 || body[0] !== TAG) return null
  const close = body.indexOf(TAG, 1)
  if (close === -1 || close > 40) return null
  const m = /^([a-z0-9]+)\.([a-z0-9]+)$/.exec(body.toString('latin1', 1, close))
  return m ? { run: m[1], id: parseInt(m[2], 36) } : null
}

/** Number of entries of the ascending `a` below `x`. */
function countBelow (a, x) {
  let lo = 0
  let hi = a.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (a[mid] < x) lo = mid + 1
    else hi = mid
  }
  return lo
}

function round (ms) {
  return Math.round(ms * 10) / 10
}

module.exports = { StaleReads, parseTag }
