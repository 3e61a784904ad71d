'use strict'

const { choose, checkPolicy, DEFER, ReplicaLoad } = require('../core/replica-choice')
const { createRng, deriveSeed } = require('../loadgen/prng')
const { InvalidArgumentError } = require('../core/errors')
const { PARETO_ALPHA } = require('./service-time')

/**
 * Seed 004 (Ungureanu, Melamed, Katehakis, "The LC* Assignment Policy for
 * Cluster-Based Servers") on the simulator: a front-end dispatcher in front
 * of K back-end servers, every job placed by the front end's own replica
 * choice (core/replica-choice.js `choose` over a ReplicaLoad, exactly as
 * core/replica-router.js calls it), on a heavy-tailed trace of our own
 * making, under light, medium and heavy load, with preemption (processor
 * sharing: a server's jobs run at once, each at 1/n speed, the limit of the
 * paper's round-robin quantum) and without (FIFO, one job at a time).
 * Metric: mean slowdown, response time / job size, as in the paper.
 *
 * The trace. The paper's World Cup trace has < 3 % of requests at or above
 * the 30 KB cutoff carrying > 50 % of the bytes. A plain Pareto with
 * α = 1.37 puts only ~39 % of the work in its top 3 %, so the trace is a
 * spliced Pareto, α = 1.37 on both sides of the cutoff c (the unit of size):
 * a share `longJobShare` of jobs is long, Pareto from c up to
 * `maxSizeRatio` x c; the rest is short, Pareto from b up to c, with b
 * solved so that the long jobs carry `longWorkShare` of the expected work.
 * Service time = size (the paper's size-proportional estimate without its
 * constant connection cost). Arrivals are Poisson; each load level is a
 * contiguous stretch of `jobsPerLevel` arrivals at the rate that gives its
 * utilisation, light, then medium, then heavy, as in the paper's trace.
 *
 * JSQ comes twice. `jsq` is the module's: outstanding work as the front end
 * knows it, the sum of the sizes of the jobs it dispatched that have not
 * finished. `jsq-residual` is the paper's: the servers' true residual work
 * (what is left of every job), the same `choose('jsq', ...)` over an oracle
 * view a real front end does not have.
 */
const DISPATCH_DEFAULTS = Object.freeze({
  servers: 4, // the paper's cluster
  policies: Object.freeze(['jsq', 'jsq-residual', 'lc', 'lcstar', 'p2c', 'random']),
  disciplines: Object.freeze(['ps', 'fifo']), // ps: with preemption; fifo: without
  alpha: PARETO_ALPHA,
  longJobShare: 0.03, // jobs at or above the cutoff (the paper: < 3 %)
  longWorkShare: 0.5, // their share of the work (the paper: > 50 %)
  maxSizeRatio: 100, // the largest job, x the cutoff (a bounded trace: the paper's files are finite)
  levels: Object.freeze([
    Object.freeze({ name: 'light', utilisation: 0.4 }), // the paper: ≈ 40 %
    Object.freeze({ name: 'medium', utilisation: 0.6 }), // the paper: "intermediate"
    Object.freeze({ name: 'heavy', utilisation: 0.75 }) // the paper: ≈ 75 %
  ]),
  jobsPerLevel: 100000,
  seed: 1
})

/** The paper's figures (Table 1 and Table 2, mean slowdown). */
const PAPER = Object.freeze({
  table1: Object.freeze({ jsq: Object.freeze({ fifo: 4.69, ps: 7.7 }), lc: Object.freeze({ fifo: 5.58, ps: 3.53 }) }),
  table2: Object.freeze({
    lc: Object.freeze({ light: 1.06, medium: 1.9, heavy: 6.17, overall: 3.53 }),
    lcstar: Object.freeze({ light: 1.06, medium: 1.59, heavy: 3.22, overall: 2.16 })
  })
})

const EXTRA_POLICIES = ['jsq-residual']
const DISCIPLINES = ['ps', 'fifo']

/** Expected size of a Pareto(α) bounded to [lo, hi]. */
function boundedParetoMean (alpha, lo, hi) {
  const r = lo / hi
  return (lo * alpha / (alpha - 1)) * (1 - r ** (alpha - 1)) / (1 - r ** alpha)
}

/** Inverse-CDF draw of a Pareto(α) bounded to [lo, hi]. */
function boundedPareto (alpha, lo, hi, u) {
  return lo / (1 - u * (1 - (lo / hi) ** alpha)) ** (1 / alpha)
}

/**
 * The spliced-Pareto size model for the options (cutoff = 1).
 * @returns {{ cutoff: number, shortMin: number, maxSize: number, meanShort: number, meanLong: number, mean: number }}
 */
function sizeModel ({ alpha, longJobShare: p, longWorkShare: w, maxSizeRatio }) {
  const meanLong = boundedParetoMean(alpha, 1, maxSizeRatio)
  const target = (p * meanLong * (1 - w)) / (w * (1 - p)) // the short jobs' mean for the shares
  if (!(target < 1)) throw new InvalidArgumentError(`invalid longWorkShare: the short jobs would need a mean >= the cutoff (${target.toFixed(3)})`)
  // the bounded mean grows with the lower bound: bisect on it
  let lo = 1e-12
  let hi = 1
  for (let i = 0; i < 200; i++) {
    const mid = (lo + hi) / 2
    if (boundedParetoMean(alpha, mid, 1) < target) lo = mid
    else hi = mid
  }
  const shortMin = (lo + hi) / 2
  return { cutoff: 1, shortMin, maxSize: maxSizeRatio, meanShort: target, meanLong, mean: p * meanLong + (1 - p) * target }
}

/**
 * The trace: arrival times and sizes, deterministic for a seed.
 * @returns {{ arrivals: Float64Array, sizes: Float64Array, level: Uint8Array, model: object, levels: object[] }}
 */
function makeTrace (o) {
  const model = sizeModel(o)
  const n = o.levels.length * o.jobsPerLevel
  const arrivals = new Float64Array(n)
  const sizes = new Float64Array(n)
  const level = new Uint8Array(n)
  const rngSize = createRng(deriveSeed(o.seed, 'dispatch', 'sizes'))
  const rngGap = createRng(deriveSeed(o.seed, 'dispatch', 'arrivals'))
  let t = 0
  let j = 0
  const levels = o.levels.map((l, li) => {
    const rate = (l.utilisation * o.servers) / model.mean // jobs per unit time
    const start = t
    let work = 0
    for (let k = 0; k < o.jobsPerLevel; k++, j++) {
      t += -Math.log(1 - rngGap.next()) / rate
      const long = rngSize.next() < o.longJobShare
      const u = rngSize.next()
      const s = long ? boundedPareto(o.alpha, 1, model.maxSize, u) : boundedPareto(o.alpha, model.shortMin, 1, u)
      arrivals[j] = t
      sizes[j] = s
      level[j] = li
      work += s
    }
    return { name: l.name, utilisation: l.utilisation, rate, start, end: t, realisedUtilisation: work / (o.servers * (t - start)) }
  })
  return { arrivals, sizes, level, model, levels }
}

/** A binary min-heap of [key, job] pairs (processor sharing: finish tags). */
class MinHeap {
  constructor () { this.keys = []; this.vals = [] }
  get size () { return this.keys.length }
  peekKey () { return this.keys[0] }
  push (k, v) {
    const { keys, vals } = this
    let i = keys.length
    keys.push(k); vals.push(v)
    while (i > 0) {
      const p = (i - 1) >> 1
      if (keys[p] <= k) break
      keys[i] = keys[p]; vals[i] = vals[p]; i = p
    }
    keys[i] = k; vals[i] = v
  }

  pop () {
    const { keys, vals } = this
    const top = vals[0]
    const k = keys.pop()
    const v = vals.pop()
    const n = keys.length
    if (n > 0) {
      let i = 0
      for (;;) {
        let c = 2 * i + 1
        if (c >= n) break
        if (c + 1 < n && keys[c + 1] < keys[c]) c++
        if (keys[c] >= k) break
        keys[i] = keys[c]; vals[i] = vals[c]; i = c
      }
      keys[i] = k; vals[i] = v
    }
    return top
  }
}

/**
 * A processor-sharing server: n jobs each run at 1/n speed. Virtual time v
 * advances at 1/n per unit of time; a job of size s admitted at v0 ends when
 * v reaches v0 + s (its finish tag), so the next completion is the smallest
 * tag, and the residual work is sum(tags) - n v.
 */
class PsServer {
  constructor () { this.heap = new MinHeap(); this.v = 0; this.t = 0; this.tagSum = 0 }
  get n () { return this.heap.size }
  advance (t) {
    if (this.heap.size > 0) this.v += (t - this.t) / this.heap.size
    this.t = t
  }

  add (job, size, t) {
    this.advance(t)
    const tag = this.v + size
    this.tagSum += tag
    this.heap.push(tag, job)
  }

  nextCompletion () {
    return this.heap.size === 0 ? Infinity : this.t + (this.heap.peekKey() - this.v) * this.heap.size
  }

  complete (t) {
    this.advance(t)
    this.tagSum -= this.heap.peekKey()
    const job = this.heap.pop()
    if (this.heap.size === 0) { this.v = 0; this.tagSum = 0 } // reset: no float drift across busy periods
    return job
  }

  residual (t) {
    this.advance(t)
    return Math.max(0, this.tagSum - this.heap.size * this.v)
  }
}

/** A FIFO server: one job at a time, in arrival order. */
class FifoServer {
  constructor (sizes) { this.sizes = sizes; this.queue = []; this.head = 0; this.finishAt = Infinity; this.queued = 0 }
  get n () { return this.queue.length - this.head }
  add (job, size, t) {
    this.queue.push(job)
    if (this.n === 1) this.finishAt = t + size
    else this.queued += size
  }

  nextCompletion () { return this.finishAt }
  complete (t) {
    const job = this.queue[this.head++]
    if (this.head > 4096 && this.head * 2 > this.queue.length) { this.queue = this.queue.slice(this.head); this.head = 0 }
    if (this.n > 0) {
      const s = this.sizes[this.queue[this.head]]
      this.queued -= s
      this.finishAt = t + s
    } else {
      this.finishAt = Infinity
      this.queued = 0
    }
    return job
  }

  residual (t) { return this.n === 0 ? 0 : this.finishAt - t + Math.max(0, this.queued) }
}

/**
 * Run one policy on one discipline over the trace.
 * @returns {{ policy, discipline, meanSlowdown: object, deferred: number, maxDeferred: number }}
 */
function runPolicy (trace, policy, discipline, o) {
  const { arrivals, sizes, level } = trace
  const K = o.servers
  const n = arrivals.length
  const servers = Array.from({ length: K }, () => (discipline === 'ps' ? new PsServer() : new FifoServer(sizes)))
  const load = new ReplicaLoad({ capacity: K, longThreshold: trace.model.cutoff })
  const candidates = Int32Array.from({ length: K }, (_, i) => i)
  const rng = createRng(deriveSeed(o.seed, 'dispatch', 'choice', policy, discipline))
  const next = () => rng.next()
  // jsq-residual: the module's jsq over an oracle view of true residual work
  const oracle = policy === 'jsq-residual' ? { inflight: load.inflight, long: load.long, longThreshold: load.longThreshold, work: new Float64Array(K) } : null
  const base = oracle ? 'jsq' : policy
  const start = new Float64Array(n) // arrival at the dispatcher
  const sum = new Float64Array(o.levels.length)
  const count = new Float64Array(o.levels.length)
  const deferred = [] // LC*: long jobs waiting for a server without one, oldest first
  let deferredHead = 0
  let deferrals = 0
  let maxDeferred = 0

  const place = (j, t) => {
    let view = load
    if (oracle) {
      for (let s = 0; s < K; s++) oracle.work[s] = servers[s].residual(t)
      view = oracle
    }
    const pos = choose(base, candidates, view, sizes[j], next)
    if (pos === DEFER) return false
    load.begin(pos, sizes[j])
    servers[pos].add(j, sizes[j], t)
    return true
  }

  let i = 0
  let done = 0
  while (done < n) {
    let s = -1
    let tc = Infinity
    for (let k = 0; k < K; k++) {
      const c = servers[k].nextCompletion()
      if (c < tc) { tc = c; s = k }
    }
    const ta = i < n ? arrivals[i] : Infinity
    if (ta <= tc) {
      start[i] = ta
      if (!place(i, ta)) {
        deferred.push(i)
        deferrals++
        maxDeferred = Math.max(maxDeferred, deferred.length - deferredHead)
      }
      i++
      continue
    }
    const j = servers[s].complete(tc)
    load.end(s, sizes[j])
    const slowdown = (tc - start[j]) / sizes[j]
    sum[level[j]] += slowdown
    count[level[j]]++
    done++
    // a long job ended: the oldest deferred long jobs choose again
    if (sizes[j] >= trace.model.cutoff) {
      while (deferredHead < deferred.length && place(deferred[deferredHead], tc)) deferredHead++
      if (deferredHead > 1024 && deferredHead * 2 > deferred.length) { deferred.splice(0, deferredHead); deferredHead = 0 }
    }
  }
  const meanSlowdown = {}
  o.levels.forEach((l, li) => { meanSlowdown[l.name] = round(sum[li] / count[li]) })
  meanSlowdown.overall = round(sum.reduce((a, b) => a + b, 0) / n)
  return { policy, discipline, meanSlowdown, deferred: deferrals, maxDeferred }
}

/**
 * The whole study: every policy on every discipline, the tables and the
 * ratios next to the paper's.
 * @param {object} [options] DISPATCH_DEFAULTS overrides
 */
function runDispatch (options = {}) {
  const o = resolveDispatchOptions(options)
  const trace = makeTrace(o)
  let longJobs = 0
  let longWork = 0
  let work = 0
  for (let j = 0; j < trace.sizes.length; j++) {
    work += trace.sizes[j]
    if (trace.sizes[j] >= trace.model.cutoff) { longJobs++; longWork += trace.sizes[j] }
  }
  const runs = []
  for (const discipline of o.disciplines) for (const policy of o.policies) runs.push(runPolicy(trace, policy, discipline, o))
  const get = (policy, discipline, level = 'overall') => runs.find((r) => r.policy === policy && r.discipline === discipline)?.meanSlowdown[level] ?? null
  const heavy = o.levels.at(-1).name
  const ratio = (a, b) => (a === null || b === null ? null : round(a / b, 2))
  // the paper's comparisons, slowdown of the loser / slowdown of LC* (or LC)
  const ratios = [
    { label: 'JSQ / LC*, with preemption (overall)', measured: ratio(get('jsq', 'ps'), get('lcstar', 'ps')), measuredResidual: ratio(get('jsq-residual', 'ps'), get('lcstar', 'ps')), paper: ratio(PAPER.table1.jsq.ps, PAPER.table2.lcstar.overall), paperSays: 'about 3x' },
    { label: 'JSQ without preemption / LC* with preemption (overall; the paper\'s "without")', measured: ratio(get('jsq', 'fifo'), get('lcstar', 'ps')), measuredResidual: ratio(get('jsq-residual', 'fifo'), get('lcstar', 'ps')), paper: ratio(PAPER.table1.jsq.fifo, PAPER.table2.lcstar.overall), paperSays: 'about 2x' },
    { label: 'JSQ / LC*, both without preemption (overall)', measured: ratio(get('jsq', 'fifo'), get('lcstar', 'fifo')), measuredResidual: ratio(get('jsq-residual', 'fifo'), get('lcstar', 'fifo')), paper: null, paperSays: 'not measured' },
    { label: `LC / LC*, with preemption (${heavy} load)`, measured: ratio(get('lc', 'ps', heavy), get('lcstar', 'ps', heavy)), paper: ratio(PAPER.table2.lc.heavy, PAPER.table2.lcstar.heavy), paperSays: 'almost 2x' },
    { label: 'JSQ / LC, with preemption (overall)', measured: ratio(get('jsq', 'ps'), get('lc', 'ps')), measuredResidual: ratio(get('jsq-residual', 'ps'), get('lc', 'ps')), paper: ratio(PAPER.table1.jsq.ps, PAPER.table1.lc.ps), paperSays: 'LC better (Table 1)' },
    { label: 'JSQ / LC, without preemption (overall)', measured: ratio(get('jsq', 'fifo'), get('lc', 'fifo')), measuredResidual: ratio(get('jsq-residual', 'fifo'), get('lc', 'fifo')), paper: ratio(PAPER.table1.jsq.fifo, PAPER.table1.lc.fifo), paperSays: 'JSQ better (Table 1)' }
  ]
  return {
    tool: 'chopper-sim-dispatch',
    options: { ...o },
    trace: {
      jobs: trace.sizes.length,
      cutoff: trace.model.cutoff,
      shortMin: round(trace.model.shortMin, 5),
      maxSize: trace.model.maxSize,
      meanSize: round(trace.model.mean, 5),
      longJobShare: round(longJobs / trace.sizes.length, 4),
      longWorkShare: round(longWork / work, 4),
      levels: trace.levels.map((l) => ({ name: l.name, utilisation: l.utilisation, realisedUtilisation: round(l.realisedUtilisation, 3), rate: round(l.rate, 3) }))
    },
    runs,
    paper: PAPER,
    ratios
  }
}

/**
 * How the headline ratios move with the heavy level's utilisation, over
 * several seeds (heavy-tailed traces vary a lot from seed to seed): the
 * study again with only the heavy level changed, ratios averaged.
 * @param {object} [options] DISPATCH_DEFAULTS overrides, plus heavy (utilisations) and seeds
 */
function runDispatchSweep ({ heavy = [0.75, 0.85, 0.9], seeds = [1, 2, 3], ...options } = {}) {
  const base = resolveDispatchOptions({ ...options, policies: ['jsq', 'lc', 'lcstar'] })
  const rows = []
  for (const u of heavy) {
    const levels = base.levels.map((l, i) => (i === base.levels.length - 1 ? { ...l, utilisation: u } : l))
    const per = seeds.map((seed) => runDispatch({ ...options, policies: ['jsq', 'lc', 'lcstar'], levels, seed }).ratios)
    const avg = (k) => round(mean(per.map((rs) => rs[k].measured)), 2)
    const all = (k, pred) => per.every((rs) => pred(rs[k].measured))
    rows.push({
      heavyUtilisation: u,
      seeds,
      jsqOverLcstarPs: avg(0),
      jsqFifoOverLcstarPs: avg(1),
      jsqOverLcstarFifo: avg(2),
      lcOverLcstarHeavyPs: avg(3),
      lcstarBeatsLcHeavyEverySeed: all(3, (v) => v > 1),
      lcstarBeatsJsqFifoEverySeed: all(2, (v) => v > 1)
    })
  }
  return { levels: base.levels.map((l) => l.name), rows }
}

function mean (xs) {
  return xs.reduce((a, b) => a + b, 0) / xs.length
}

function round (v, d = 3) {
  return v === null || !Number.isFinite(v) ? null : Number(v.toFixed(d))
}

/** Merge options over DISPATCH_DEFAULTS and validate; each error names the option. */
function resolveDispatchOptions (options) {
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError('dispatch options must be an object')
  for (const k of Object.keys(options)) {
    if (!Object.hasOwn(DISPATCH_DEFAULTS, k)) throw new InvalidArgumentError(`unknown dispatch option ${k} (valid options: ${Object.keys(DISPATCH_DEFAULTS).join(', ')})`)
  }
  const o = { ...DISPATCH_DEFAULTS, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) }
  const bad = (k, expected) => { throw new InvalidArgumentError(`invalid dispatch option ${k}: expected ${expected}, got ${JSON.stringify(o[k])}`) }
  if (!Number.isInteger(o.servers) || o.servers < 1 || o.servers > 1024) bad('servers', 'an integer in [1, 1024]')
  if (!Array.isArray(o.policies) || o.policies.length === 0) bad('policies', 'a non-empty array of policies')
  for (const p of o.policies) if (!EXTRA_POLICIES.includes(p)) checkPolicy(p, 'dispatch option policies')
  if (!Array.isArray(o.disciplines) || o.disciplines.length === 0 || o.disciplines.some((d) => !DISCIPLINES.includes(d))) bad('disciplines', `a non-empty array of ${DISCIPLINES.join(', ')}`)
  if (!(typeof o.alpha === 'number' && o.alpha > 1)) bad('alpha', 'a number > 1')
  if (!(typeof o.longJobShare === 'number' && o.longJobShare > 0 && o.longJobShare < 1)) bad('longJobShare', 'a fraction in (0, 1)')
  if (!(typeof o.longWorkShare === 'number' && o.longWorkShare > 0 && o.longWorkShare < 1)) bad('longWorkShare', 'a fraction in (0, 1)')
  if (!(typeof o.maxSizeRatio === 'number' && o.maxSizeRatio > 1)) bad('maxSizeRatio', 'a number > 1')
  if (!Array.isArray(o.levels) || o.levels.length === 0 || o.levels.some((l) => !l || typeof l.name !== 'string' || !(l.utilisation > 0 && l.utilisation < 1))) bad('levels', 'a non-empty array of { name, utilisation in (0, 1) }')
  if (!Number.isInteger(o.jobsPerLevel) || o.jobsPerLevel < 1) bad('jobsPerLevel', 'an integer >= 1')
  if (!Number.isInteger(o.seed) || o.seed < 0 || o.seed >= 2 ** 32) bad('seed', 'an integer in [0, 2^32)')
  return o
}

module.exports = { runDispatch, runDispatchSweep, runPolicy, makeTrace, sizeModel, boundedParetoMean, PsServer, FifoServer, DISPATCH_DEFAULTS, PAPER }
