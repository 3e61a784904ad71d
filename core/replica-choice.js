'use strict'

const { InvalidArgumentError } = require('./errors')

/**
 * Replica choice: which of a replicated slice's servers takes one request
 * (docs/replication.md, issue 10 item 2). Pure: no I/O, no clock; randomness
 * only from the `rng` passed in. The front end (core/replica-router.js)
 * and the simulator use the same functions over the same counters.
 *
 * Servers are small integer indices into the counters of a ReplicaLoad;
 * `candidates` is an array (or typed array) of such indices, primary first.
 * `choose` answers a *position* in `candidates` (so the caller knows whether
 * the primary was taken), or DEFER. It allocates nothing.
 *
 * What "in flight" means: the caller's own requests on a server, plus, while
 * a fresh report from the server says so, the requests other clients (other
 * front ends, other cluster workers) have there. Seed 003's caveat is that
 * uncoordinated front ends each see only their own share; a server's answer
 * carries how many requests it holds (appserver-lib's X-Chopper-Inflight),
 * and `ReplicaLoad.report` keeps the difference as `others` until it goes
 * stale (`reportTtlMs`). A load nobody reports to is the caller's own count.
 * A report is a snapshot, and the server works through what it held: with
 * `reportDecay` the others count as done linearly over one of the caller's
 * recent answer times from that server (an exponential average of the time
 * from sending a request to its answer), the time a request joining that
 * queue took to get through it. Without it, a burst the server reported keeps
 * it looking busy, and a lull idle, until the caller's next answer from it;
 * in a model of scenario 5 (3 servers, 2 front ends) p2c's p99 went from
 * 12.5 to 10.4 ms with it.
 *
 * Policies:
 * - `p2c` (default): power of two choices on in-flight requests (seed 003,
 *   "RandomTwoChoice"): two distinct random candidates, the one with fewer in
 *   flight. Ties go to the one listed first, for cache affinity. With two
 *   candidates both are compared, so no randomness is drawn.
 * - `jsq`: join the shortest queue by outstanding work (the caller's own: reports carry a count), the sum of the
 *   estimated sizes in flight (seed 004).
 * - `lc`: least connected, fewest in flight (seed 004).
 * - `lcstar`: LC* (seed 004, section 4). A job of size >= the load's
 *   `longThreshold` is long. A short job goes to the least connected; a long
 *   one to the least connected server not running a long job, and when every
 *   candidate runs one, the answer is DEFER: the caller holds the job until a
 *   long job on a candidate ends (at most one long job per server).
 * - `random`: uniform. `first`: always the first listed (no balancing).
 * Every tie goes to the candidate listed first.
 */

const POLICIES = Object.freeze(['p2c', 'jsq', 'lc', 'lcstar', 'random', 'first'])
const ANSWER_WEIGHT = 0.2 // of a new answer time in the average (about the last 5 answers)
const DEFER = -1

/**
 * Throws InvalidArgumentError unless `name` is a policy.
 * @param {string} name
 * @param {string} [option] the option's name for the message
 * @returns {string} name
 */
function checkPolicy (name, option = 'policy') {
  if (!POLICIES.includes(name)) {
    throw new InvalidArgumentError(`invalid ${option}: expected one of ${POLICIES.join(', ')}, got ${JSON.stringify(name)}`)
  }
  return name
}

/**
 * Per-server counters the policies read: requests in flight, outstanding work
 * (sum of sizes in flight) and long jobs in flight, all the caller's own; and
 * the other clients' requests at each server as it last reported them. The
 * caller calls begin() when it dispatches a job and end() exactly once when
 * that job is over, with the same size; report() when a server says how many
 * requests it holds; and sets `now` (ms, the clock of its report() calls)
 * before choosing, so stale reports are ignored. Typed arrays, grown on
 * demand: a hot path allocates nothing.
 */
class ReplicaLoad {
  /**
   * @param {{ capacity?: number, longThreshold?: number, reportTtlMs?: number, reportDecay?: boolean }} [options]
   *   longThreshold: sizes at or above it are long jobs (LC*); Infinity: none are.
   *   reportTtlMs: how long a server's report counts (0: reports are ignored).
   *   reportDecay: a report's others count as done linearly over the server's answer time (see above)
   */
  constructor ({ capacity = 16, longThreshold = Infinity, reportTtlMs = 250, reportDecay = true } = {}) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new InvalidArgumentError('invalid capacity: expected an integer >= 1')
    if (typeof longThreshold !== 'number' || !(longThreshold > 0)) throw new InvalidArgumentError('invalid longThreshold: expected a number > 0')
    if (typeof reportTtlMs !== 'number' || !Number.isFinite(reportTtlMs) || reportTtlMs < 0) throw new InvalidArgumentError('invalid reportTtlMs: expected a number of ms >= 0')
    if (typeof reportDecay !== 'boolean') throw new InvalidArgumentError('invalid reportDecay: expected true or false')
    this.longThreshold = longThreshold
    this.reportTtlMs = reportTtlMs
    this.reportDecay = reportDecay
    this.now = 0
    this.inflight = new Int32Array(capacity)
    this.work = new Float64Array(capacity)
    this.long = new Int32Array(capacity)
    this.others = new Int32Array(capacity) // other clients' requests at the server, as it last reported
    this.othersAt = new Float64Array(capacity) // when it reported them
    this.othersUntil = new Float64Array(capacity) // when that report stops counting
    this.answerMs = new Float64Array(capacity) // average time from sending a request there to its answer (0: none yet)
  }

  get capacity () {
    return this.inflight.length
  }

  /** Make room for server indices below `n`. */
  ensure (n) {
    if (n <= this.inflight.length) return
    let cap = this.inflight.length
    while (cap < n) cap *= 2
    const grow = (old, Type) => { const a = new Type(cap); a.set(old); return a }
    this.inflight = grow(this.inflight, Int32Array)
    this.work = grow(this.work, Float64Array)
    this.long = grow(this.long, Int32Array)
    this.others = grow(this.others, Int32Array)
    this.othersAt = grow(this.othersAt, Float64Array)
    this.othersUntil = grow(this.othersUntil, Float64Array)
    this.answerMs = grow(this.answerMs, Float64Array)
  }

  /**
   * `server` answered one of our requests saying it holds `inSystem` requests
   * (that one included) at time `now`, `answerMs` after we sent it (0:
   * unknown): the ones beyond our own in flight there are other clients'.
   * Ignored with reportTtlMs 0, or when `inSystem` is not a count.
   */
  report (server, inSystem, now, answerMs = 0) {
    if (this.reportTtlMs === 0 || !(inSystem >= 0)) return
    const mine = this.inflight[server]
    this.others[server] = inSystem > mine ? Math.min(inSystem - mine, 0x3fffffff) : 0
    this.othersAt[server] = now
    this.othersUntil[server] = now + this.reportTtlMs
    if (answerMs > 0 && answerMs < Infinity) {
      const avg = this.answerMs[server]
      this.answerMs[server] = avg === 0 ? answerMs : avg + ANSWER_WEIGHT * (answerMs - avg)
    }
  }

  /**
   * Requests in flight on `server` (at `this.now`): ours, plus others' while
   * its last report is fresh; with reportDecay, less the share of those that
   * one answer time has worked off since (a fraction, so not always an integer).
   */
  seen (server) {
    const mine = this.inflight[server]
    if (!(this.othersUntil[server] > this.now)) return mine
    const others = this.others[server]
    const span = this.answerMs[server]
    if (!this.reportDecay || others === 0 || span === 0) return mine + others
    const left = 1 - (this.now - this.othersAt[server]) / span
    return left > 0 ? mine + others * left : mine
  }

  /** Whether a job of `size` is long (LC*). */
  isLong (size) {
    return size >= this.longThreshold
  }

  /** A job of `size` was dispatched to `server`. */
  begin (server, size) {
    this.inflight[server]++
    this.work[server] += size
    if (size >= this.longThreshold) this.long[server]++
  }

  /** A job of `size` on `server` is over (answered, failed or aborted). */
  end (server, size) {
    this.inflight[server]--
    const w = this.work[server] - size
    // Float sums of mixed sizes drift; an idle server has no work.
    this.work[server] = this.inflight[server] === 0 || w < 0 ? 0 : w
    if (size >= this.longThreshold) this.long[server]--
  }

  /** Zero one server's counters (a slot handed to a new server). */
  reset (server) {
    this.inflight[server] = 0
    this.work[server] = 0
    this.long[server] = 0
    this.others[server] = 0
    this.othersAt[server] = 0
    this.othersUntil[server] = 0
    this.answerMs[server] = 0
  }
}

/** Position of the candidate with the fewest in flight (ReplicaLoad.seen); ties to the first listed. */
function leastConnected (candidates, load) {
  let best = 0
  let min = load.seen(candidates[0])
  for (let p = 1; p < candidates.length; p++) {
    const v = load.seen(candidates[p])
    if (v < min) { min = v; best = p }
  }
  return best
}

/**
 * Choose a replica for one job.
 * @param {string} policy one of POLICIES
 * @param {ArrayLike<number>} candidates server indices into `load`, primary first; not empty
 * @param {ReplicaLoad} load the counters
 * @param {number} size the job's estimated size (jsq, lcstar); 1 when unknown
 * @param {() => number} [rng] uniform in [0, 1); Math.random by default
 * @returns {number} a position in `candidates`, or DEFER (-1; lcstar only)
 */
function choose (policy, candidates, load, size, rng = Math.random) {
  const n = candidates.length
  switch (policy) {
    case 'p2c': {
      if (n === 1) return 0
      if (n === 2) return load.seen(candidates[1]) < load.seen(candidates[0]) ? 1 : 0
      let a = Math.floor(rng() * n)
      let b = Math.floor(rng() * (n - 1))
      if (b >= a) b++ // two distinct positions, each pair equally likely
      if (b < a) { const t = a; a = b; b = t } // a listed first: it wins ties
      return load.seen(candidates[b]) < load.seen(candidates[a]) ? b : a
    }
    case 'lc':
      return n === 1 ? 0 : leastConnected(candidates, load)
    case 'jsq': {
      const work = load.work
      let best = 0
      let min = work[candidates[0]]
      for (let p = 1; p < n; p++) {
        const v = work[candidates[p]]
        if (v < min) { min = v; best = p }
      }
      return best
    }
    case 'lcstar': {
      if (size < load.longThreshold) return n === 1 ? 0 : leastConnected(candidates, load)
      const long = load.long
      let best = DEFER
      let min = Infinity
      for (let p = 0; p < n; p++) {
        const s = candidates[p]
        if (long[s] !== 0) continue
        const v = load.seen(s)
        if (v < min) { min = v; best = p }
      }
      return best
    }
    case 'random':
      return n === 1 ? 0 : Math.floor(rng() * n)
    case 'first':
      return 0
    default:
      checkPolicy(policy)
  }
}

module.exports = { POLICIES, DEFER, checkPolicy, choose, leastConnected, ReplicaLoad }
