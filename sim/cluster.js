'use strict'

const { performance } = require('node:perf_hooks')
const hdr = require('hdr-histogram-js')
const { getStrategy } = require('../controller/strategies')
const { SliceMap } = require('../core/slice-map')
const { KEYSPACE_SIZE } = require('../core/keyspace')
const { validateAssignment, keyChurn, sameLayout, cutEvenly } = require('../core/assignment')
const { createRng, deriveSeed } = require('../loadgen/prng')
const { InvalidArgumentError } = require('../core/errors')
const { choose, checkPolicy, ReplicaLoad } = require('../core/replica-choice')
const { vote, hotKeysFromVotes } = require('../core/hot-keys')
const { createEngine } = require('./engine')
const { SimServer, resolveServerOptions } = require('./server')
const { compileWorkload } = require('./workload')
const { periodsToRecover, mean, summary, RECOVERY_TARGET, RECOVERY_HOLD } = require('./metrics')

/** Every default of a simulation, in one visible place. */
const SIM_DEFAULTS = Object.freeze({
  strategy: 'chopper',
  strategyOptions: Object.freeze({}),
  servers: 3,
  serverIds: undefined, // the servers' ids (strings; `servers` of them); s0, s1, ... when not given. Ids matter to hashing strategies
  replicaChoice: 'p2c', // which admitter of a replicated slice takes a request (core/replica-choice.js, as the front end)
  slicesPerServer: 1, // the initial assignment is cut so each server starts with about this many slices
  periodMs: 500, // controller period (bench/experiments' default)
  seed: 1, // the simulator's own streams (arrivals, keys, service times); the spec's seed is left alone
  mode: 'requests', // 'requests': every request is an event; 'fluid': per-period expected counts (scale runs; no latency)
  arrivals: 'poisson', // 'poisson' | 'constant' (open loop at the phase's rate)
  rateScale: 1, // multiplies every phase's rate
  durationMs: undefined, // cut the workload short
  fluidNoise: true, // fluid mode: per-key counts get Poisson noise (normal approximation) instead of exact expectations
  hotKeys: true, // pass each slice's majority vote over its request keys to the strategy (inputs.hotKeys), as the controller does
  server: Object.freeze({}), // sim/server.js options: capacity, service, missCost, warmAfter, warmKeys
  onProgress: undefined, // (done: number, total: number) => void, called once a period
  clock: undefined // () => ms for timing strategy calls; performance.now when not given (tests pass a fake for identical JSON)
})
const MODES = ['requests', 'fluid']

/**
 * Run one simulation in virtual time against the real strategy code.
 *
 * Every `periodMs` the modelled controller takes the period's per-slice
 * request counts, calls `getStrategy(name).rebalance` (the same pure function
 * the controller runs), and installs the result. Handoff is modelled as
 * instantaneous: arrivals after the round route by the new SliceMap; requests
 * already queued finish where they are. Loads are counted per slice of the
 * current assignment at arrival (the controller's spreadLoads of server
 * reports gives the same figures when the assignment did not change within
 * the period, which holds here since it changes only at round boundaries).
 *
 * @param {object} spec loadgen workload spec
 * @param {object} [options] see SIM_DEFAULTS
 * @returns {object} JSON-ready result
 */
function simulate (spec, options = {}) {
  const o = resolveSimOptions(options)
  const strategy = getStrategy(o.strategy)
  const workload = compileWorkload(spec, { rateScale: o.rateScale, arrivals: o.arrivals, durationMs: o.durationMs })
  const ids = o.serverIds ? o.serverIds.slice() : Array.from({ length: o.servers }, (_, i) => `s${String(i).padStart(String(o.servers - 1).length, '0')}`)
  const serverIndex = new Map(ids.map((id, i) => [id, i]))
  const members = {}
  for (const id of ids) members[id] = { url: `http://sim.invalid/${id}` }
  let assignment = refine(strategy.initial(members, o.strategyOptions), o.servers * o.slicesPerServer)
  let map = new SliceMap(assignment)
  let routes = routeTable(map, serverIndex)

  const engine = createEngine()
  const clock = o.clock || (() => performance.now())
  const rngArrivals = createRng(deriveSeed(o.seed, 'arrivals'))
  const rngKeys = createRng(deriveSeed(o.seed, 'keys'))
  // Replica choice, as the front end makes it (core/replica-router.js): its
  // view is its own in-flight count per server, here the modelled servers'.
  const rngChoice = createRng(deriveSeed(o.seed, 'replica-choice'))
  const nextChoice = () => rngChoice.next()
  const inflight = new ReplicaLoad({ capacity: o.servers })
  let replicated = 0 // requests to slices with several admitters this period
  const histogram = () => hdr.build({ lowestDiscernibleValue: 1, numberOfSignificantValueDigits: 3, autoResize: true })
  const total = histogram()
  const phaseHist = workload.phases.map(() => histogram())
  let periodHist = histogram()
  let periodMisses = 0
  const perServerRequests = new Float64Array(o.servers)
  let periodServer = new Float64Array(o.servers) // this period's requests per server, as routed

  const servers = o.mode === 'requests'
    ? ids.map((id) => new SimServer({ id, engine, rng: createRng(deriveSeed(o.seed, 'service', id)), onComplete, ...o.server }))
    : []
  function onComplete (req) {
    inflight.end(req.server, 1)
    const us = Math.max(1, Math.round((req.doneAt - req.arrivedAt) * 1000)) // sojourn, microseconds
    total.recordValue(us)
    phaseHist[req.phase].recordValue(us)
    periodHist.recordValue(us)
    if (req.miss) periodMisses++
  }

  let loads = new Float64Array(assignment.slices.length)
  // per slice, the app servers' majority vote over request keys (core/hot-keys.js)
  let hotK = new Float64Array(assignment.slices.length).fill(-1)
  let hotV = new Float64Array(assignment.slices.length)
  const periods = []
  const nPeriods = Math.ceil(workload.durationMs / o.periodMs)

  if (o.mode === 'requests') {
    // one arrival process over all phases: each arrival schedules the next
    const arrive = (phase) => {
      const ph = workload.phases[phase]
      const k = ph.sample(rngKeys)
      const sk = ph.sliceKeys[k]
      const slice = map.indexOf(sk)
      loads[slice]++
      vote(hotK, hotV, slice, sk)
      const c = routes.candidates[slice]
      let s = routes.target[slice]
      if (c !== null) {
        s = c[choose(o.replicaChoice, c, inflight, 1, nextChoice)]
        replicated++
      }
      perServerRequests[s]++
      periodServer[s]++
      inflight.begin(s, 1)
      servers[s].arrive({ key: ph.keyName(k), phase, arrivedAt: engine.now, server: s })
      scheduleNext(phase, engine.now)
    }
    const scheduleNext = (phase, from) => {
      let ph = workload.phases[phase]
      let t = from + gap(ph)
      while (t >= ph.endMs) { // next phase: its process starts at its own start
        phase++
        ph = workload.phases[phase]
        if (!ph) return
        t = ph.startMs + gap(ph) * (o.arrivals === 'constant' ? 0 : 1)
      }
      engine.at(t, arrive, phase)
    }
    const gap = (ph) => (o.arrivals === 'constant' ? 1000 / ph.rate : -Math.log(1 - rngArrivals.next()) * 1000 / ph.rate)
    if (workload.phases.length) {
      const first = workload.phases[0]
      engine.at(o.arrivals === 'constant' ? first.startMs : first.startMs + gap(first), arrive, 0)
    }
  }

  const rngFluid = createRng(deriveSeed(o.seed, 'fluid'))
  for (let p = 0; p < nPeriods; p++) {
    const t0 = p * o.periodMs
    const t1 = Math.min(workload.durationMs, t0 + o.periodMs)
    if (o.mode === 'requests') engine.run(t1)
    else fluidLoads(workload, map, routes, loads, perServerRequests, periodServer, t0, t1, o.fluidNoise ? rngFluid : null, hotK, hotV)

    // the round: measure the period under the assignment that served it (each
    // server's requests as routed; with one server per slice that is
    // serverLoads of the per-slice counts), then rebalance
    const imb = imbalanceOf(periodServer)
    const reqs = loads.reduce((a, b) => a + b, 0)
    const w0 = clock()
    const next = o.hotKeys
      ? strategy.rebalance(assignment, loads, o.strategyOptions, { hotKeys: hotKeysFromVotes(hotK, hotV, loads, loads) })
      : strategy.rebalance(assignment, loads, o.strategyOptions)
    const roundMs = clock() - w0
    const churn = keyChurn(assignment, next) / KEYSPACE_SIZE
    const changed = !sameLayout(assignment, next)
    const row = {
      period: p,
      t: t0,
      phase: phaseAt(workload, t0),
      requests: reqs,
      imbalance: round(imb),
      churn: round(churn, 6),
      roundMs: round(roundMs, 3),
      slices: next.slices.length
    }
    if (routes.replicatedSlices > 0) {
      row.replicatedSlices = routes.replicatedSlices
      if (o.mode === 'requests') row.replicatedRequests = replicated
    }
    if (o.mode === 'requests') {
      row.p50Ms = periodHist.totalCount ? round(periodHist.getValueAtPercentile(50) / 1000, 3) : null
      row.p99Ms = periodHist.totalCount ? round(periodHist.getValueAtPercentile(99) / 1000, 3) : null
      row.misses = periodMisses
      periodHist = histogram()
      periodMisses = 0
    }
    periods.push(row)
    if (changed) {
      assignment = { ...next, generation: assignment.generation + 1 }
      map = new SliceMap(assignment)
      routes = routeTable(map, serverIndex)
    }
    loads = new Float64Array(assignment.slices.length)
    hotK = new Float64Array(assignment.slices.length).fill(-1)
    hotV = new Float64Array(assignment.slices.length)
    periodServer = new Float64Array(o.servers)
    replicated = 0
    if (o.onProgress) o.onProgress(p + 1, nPeriods)
  }
  if (o.mode === 'requests') engine.run() // drain: requests in queues still finish

  return report({ o, workload, periods, perServerRequests, ids, total, phaseHist, servers, engine })
}

/** Per-phase and whole-run figures from the period rows. */
function report ({ o, workload, periods, perServerRequests, ids, total, phaseHist, servers, engine }) {
  const series = periods.map((r) => r.imbalance)
  const phases = workload.phases.map((ph, i) => {
    const from = periods.findIndex((r) => r.t >= ph.startMs)
    let to = periods.findIndex((r) => r.t >= ph.endMs)
    if (to < 0) to = periods.length
    const rows = from < 0 ? [] : periods.slice(from, to)
    const steady = rows.slice(Math.floor(rows.length / 2)) // second half of the phase
    const out = {
      name: ph.name,
      startMs: ph.startMs,
      endMs: ph.endMs,
      rate: ph.rate,
      firstPeriod: from,
      periodsToRecover: from < 0 ? null : periodsToRecover(series, from, to),
      steadyImbalance: round(mean(steady.map((r) => r.imbalance))),
      meanChurn: round(mean(rows.slice(1).map((r) => r.churn)), 6)
    }
    if (o.mode === 'requests') out.latencyMs = latency(phaseHist[i])
    return out
  })
  const sum = perServerRequests.reduce((a, b) => a + b, 0)
  const shares = Array.from(perServerRequests, (v) => (sum ? v / sum : 0))
  const rounds = periods.map((r) => r.roundMs)
  const shifts = phases.slice(1).map((p) => p.periodsToRecover)
  const result = {
    tool: 'chopper-sim',
    workload: workload.name ?? null,
    options: {
      workloadSeed: workload.seed,
      strategy: o.strategy,
      strategyOptions: o.strategyOptions,
      servers: o.servers,
      replicaChoice: o.replicaChoice,
      slicesPerServer: o.slicesPerServer,
      periodMs: o.periodMs,
      seed: o.seed,
      mode: o.mode,
      arrivals: o.arrivals,
      rateScale: o.rateScale,
      server: o.mode === 'requests' ? resolveServerOptions(o.server) : null,
      handoff: 'instantaneous',
      recovery: { target: RECOVERY_TARGET, hold: RECOVERY_HOLD }
    },
    summary: {
      periods: periods.length,
      requests: sum,
      steadyImbalance: round(mean(phases.map((p) => p.steadyImbalance).filter((v) => v !== null))),
      periodsToRecover: shifts, // one per phase change
      maxPeriodsToRecover: shifts.length === 0 ? null : shifts.some((v) => v === null) ? null : Math.max(...shifts),
      churnPerRound: summary(periods.slice(1).map((r) => r.churn), 6),
      roundMs: summary(rounds, 3), // wall clock of the strategy call: a report figure only
      serverShare: summary(shares, 6),
      latencyMs: o.mode === 'requests' ? latency(total) : null,
      misses: o.mode === 'requests' ? servers.reduce((a, s) => a + s.misses, 0) : null,
      events: engine.executed
    },
    phases,
    periods
  }
  // per-server shares only for small clusters (keeps reports small)
  if (ids.length <= 100) result.serverShares = Object.fromEntries(ids.map((id, i) => [id, round(shares[i], 6)]))
  return result
}

/**
 * Fluid mode: add each key's expected requests in [t0, t1) (optionally with
 * Poisson noise) to its slice. Keys are walked in slice-key order against the
 * slice starts, so a period costs O(keys + slices) and no events.
 */
/**
 * Fluid mode's period: expected (or Poisson) counts per key added to `loads`
 * and the servers' figures. `hotK`/`hotV` get each slice's heaviest key with
 * the votes a majority vote is sure to leave it, 2c - n (its count c against
 * the slice's n), when it has more than half of the slice's requests.
 */
function fluidLoads (workload, map, routes, loads, perServer, periodServer, t0, t1, rng, hotK, hotV) {
  const top = new Float64Array(loads.length)
  for (const ph of workload.phases) {
    const overlap = Math.min(t1, ph.endMs) - Math.max(t0, ph.startMs)
    if (overlap <= 0) continue
    const n = (ph.rate * overlap) / 1000
    if (!ph.order) ph.order = Uint32Array.from({ length: ph.keyCount }, (_, i) => i).sort((a, b) => ph.sliceKeys[a] - ph.sliceKeys[b])
    const starts = map.starts
    let s = 0
    for (let j = 0; j < ph.order.length; j++) {
      const k = ph.order[j]
      const sk = ph.sliceKeys[k]
      while (s + 1 < starts.length && starts[s + 1] <= sk) s++
      let c = ph.pmf[k] * n
      if (rng && c > 0) c = poisson(c, rng)
      loads[s] += c
      if (c > top[s]) {
        top[s] = c
        hotK[s] = sk
      }
      const cand = routes.candidates[s]
      if (cand === null) {
        perServer[routes.target[s]] += c
        periodServer[routes.target[s]] += c
      } else {
        // no per-request choice in fluid mode: an even split (what p2c tends
        // to over equally loaded admitters, and the controller's own model)
        const share = c / cand.length
        for (let q = 0; q < cand.length; q++) { perServer[cand[q]] += share; periodServer[cand[q]] += share }
      }
    }
  }
  for (let s = 0; s < loads.length; s++) {
    hotV[s] = Math.max(0, 2 * top[s] - loads[s])
    if (hotV[s] === 0) hotK[s] = -1
  }
}

/** A Poisson draw: Knuth below 30, else the normal approximation (rounded, >= 0). */
function poisson (lambda, rng) {
  if (lambda < 30) {
    const l = Math.exp(-lambda)
    let k = 0
    let p = rng.next()
    while (p > l) { k++; p *= rng.next() }
    return k
  }
  // Box-Muller
  const z = Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next())
  return Math.max(0, Math.round(lambda + z * Math.sqrt(lambda)))
}

/**
 * Cut every slice of `a` into equal parts so the assignment has about
 * `target` slices (same owners, so no key changes hands). Strategies whose
 * initial layout already has that many (consistent hashing's vnodes) are
 * left alone.
 */
function refine (a, target) {
  const parts = Math.max(1, Math.round(target / a.slices.length))
  if (parts === 1) return a
  return validateAssignment({ ...a, slices: a.slices.flatMap((s) => cutEvenly(s, parts)) })
}

/**
 * Per slice of `map`: `target`, the server index a request goes to when one
 * server admits it (the primary; the first holder when the primary does not
 * admit it yet; the primary when nobody does), and `candidates`, the
 * admitters' indices when several admit it (primary first), else null: the
 * same tables core/replica-router.js builds. Every request is treated as
 * a read (the simulator does not model the get/set mix), so a replicated
 * slice's requests are spread by the replica-choice policy.
 */
function routeTable (map, serverIndex) {
  const target = new Int32Array(map.size)
  const candidates = new Array(map.size).fill(null)
  let replicatedSlices = 0
  for (let i = 0; i < map.size; i++) {
    const owner = map.owners[i]
    const admitters = map.admitters[i]
    target[i] = serverIndex.get(admitters.length === 0 || admitters.includes(owner) ? owner : admitters[0])
    if (admitters.length > 1) {
      candidates[i] = Int32Array.from(admitters, (id) => serverIndex.get(id))
      replicatedSlices++
    }
  }
  return { target, candidates, replicatedSlices }
}

/** max / mean of per-server loads (core/assignment.js imbalance over a typed array); 1 when idle. */
function imbalanceOf (perServer) {
  let max = 0
  let sum = 0
  for (let i = 0; i < perServer.length; i++) { sum += perServer[i]; if (perServer[i] > max) max = perServer[i] }
  return sum === 0 ? 1 : max / (sum / perServer.length)
}

function phaseAt (workload, t) {
  for (let i = workload.phases.length - 1; i >= 0; i--) if (t >= workload.phases[i].startMs) return i
  return 0
}

function latency (h) {
  if (!h.totalCount) return null
  const at = (q) => round(h.getValueAtPercentile(q) / 1000, 3)
  return { count: h.totalCount, p50: at(50), p90: at(90), p99: at(99), p999: at(99.9), max: round(h.maxValue / 1000, 3), mean: round(h.mean / 1000, 3) }
}

function round (v, digits = 4) {
  return v === null || v === undefined ? null : Number(v.toFixed(digits))
}

/** Merge options over SIM_DEFAULTS and validate; each error names the option. */
function resolveSimOptions (options) {
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError('simulation options must be an object')
  for (const k of Object.keys(options)) {
    if (!Object.hasOwn(SIM_DEFAULTS, k)) throw new InvalidArgumentError(`unknown simulation option ${k} (valid options: ${Object.keys(SIM_DEFAULTS).join(', ')})`)
  }
  const o = { ...SIM_DEFAULTS, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) }
  const bad = (k, expected) => { throw new InvalidArgumentError(`invalid simulation option ${k}: expected ${expected}, got ${JSON.stringify(o[k])}`) }
  if (o.serverIds !== undefined) {
    if (!Array.isArray(o.serverIds) || o.serverIds.length === 0 || o.serverIds.some((id) => typeof id !== 'string' || id === '') || new Set(o.serverIds).size !== o.serverIds.length) bad('serverIds', 'an array of distinct non-empty strings')
    if (options.servers === undefined) o.servers = o.serverIds.length
    else if (o.servers !== o.serverIds.length) bad('servers', `serverIds.length (${o.serverIds.length})`)
  }
  if (!Number.isInteger(o.servers) || o.servers < 1 || o.servers > 100000) bad('servers', 'an integer in [1, 100000]')
  try { checkPolicy(o.replicaChoice, 'simulation option replicaChoice') } catch (err) { bad('replicaChoice', err.message.split(': ')[1]) }
  if (!Number.isInteger(o.slicesPerServer) || o.slicesPerServer < 1 || o.slicesPerServer > 10000) bad('slicesPerServer', 'an integer in [1, 10000]')
  if (!(typeof o.periodMs === 'number' && o.periodMs > 0 && Number.isFinite(o.periodMs))) bad('periodMs', 'a number of ms > 0')
  if (!Number.isInteger(o.seed) || o.seed < 0 || o.seed >= 2 ** 32) bad('seed', 'an integer in [0, 2^32)')
  if (!MODES.includes(o.mode)) bad('mode', MODES.join(' or '))
  if (typeof o.fluidNoise !== 'boolean') bad('fluidNoise', 'true or false')
  if (typeof o.hotKeys !== 'boolean') bad('hotKeys', 'true or false')
  if (!o.strategyOptions || typeof o.strategyOptions !== 'object') bad('strategyOptions', 'an object')
  if (!o.server || typeof o.server !== 'object') bad('server', 'an object of server options')
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function') bad('onProgress', 'a function')
  if (o.clock !== undefined && typeof o.clock !== 'function') bad('clock', 'a function returning ms')
  resolveServerOptions(o.server)
  return o
}

module.exports = { simulate, SIM_DEFAULTS, refine, periodsToRecover }
