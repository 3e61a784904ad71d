'use strict'

const hdr = require('hdr-histogram-js')

/** Percentiles of the latency curves in the report (x axis: 1 / (1 - p), as in HdrHistogram plots). */
const CURVE_PERCENTILES = Object.freeze([0, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100])

const round = (x, d = 4) => (x === null || x === undefined || !Number.isFinite(x) ? null : Math.round(x * 10 ** d) / 10 ** d)

/** Latency at each of CURVE_PERCENTILES (ms) from a loadgen base64 histogram (µs). */
function percentileCurve (base64) {
  if (!base64) return []
  const h = hdr.decodeFromCompressedBase64(base64)
  const max = h.maxValue
  const out = CURVE_PERCENTILES.map((p) => ({ p, ms: round(Math.min(p === 100 ? max : h.getValueAtPercentile(p), max) / 1000, 3) }))
  h.destroy()
  return out
}

/**
 * Affinity (issue 5): the share of each key's requests served by its usual
 * server, i.e. the server that served most of them, per phase. Summed over
 * keys, weighted by requests. 1 = every key always on one server.
 * @param {{ servers: string[], counts: Record<string, number[]> }} table loadgen phase.keys
 */
function affinityOf (table) {
  if (!table) return { usual: 0, total: 0 }
  let usual = 0
  let total = 0
  const attributed = table.servers.map((s) => s !== '(none)')
  for (const counts of Object.values(table.counts)) {
    let max = 0
    for (let i = 0; i < counts.length; i++) {
      if (!attributed[i]) continue
      total += counts[i]
      if (counts[i] > max) max = counts[i]
    }
    usual += max
  }
  return { usual, total }
}

/**
 * Periods after a phase change until the per-window imbalance is below
 * `target` and stays there for `hold` windows (or until the phase ends).
 * Windows are the loadgen's (windowMs = periodMs). null when it never happens
 * within the phase.
 */
function recoveryPeriods (windows, phase, { periodMs, windowMs, target, hold = 2 }) {
  const start = phase.startMs
  const end = phase.startMs + phase.durationMs
  const inPhase = windows.filter((w) => w.t * 1000 >= start && w.t * 1000 + windowMs <= end && w.imbalance !== null)
  for (let i = 0; i < inPhase.length; i++) {
    const run = inPhase.slice(i, i + hold)
    if (run.every((w) => w.imbalance < target)) return round((inPhase[i].t * 1000 + windowMs - start) / periodMs, 2)
  }
  return null
}

/**
 * The same from the controller's own per-round imbalance (loads by arrival, as
 * the front ends report them), for contenders with a controller. A round at
 * time t covers the period before t, so the first round counted ends at least
 * one period after the change.
 */
function controllerRecoveryPeriods (rounds, phase, { periodMs, target, hold = 2 }) {
  const start = phase.startMs / 1000
  const end = start + phase.durationMs / 1000
  const inPhase = rounds.filter((x) => x.t >= start + periodMs / 1000 - 0.05 && x.t <= end + 0.05)
  for (let i = 0; i < inPhase.length; i++) {
    const run = inPhase.slice(i, i + hold)
    if (run.every((x) => x.imbalance < target)) return Math.ceil((inPhase[i].t - start) / (periodMs / 1000) - 0.1)
  }
  return null
}

/**
 * Cache hit/miss counters summed over the app servers' stats (app-child.js
 * `stats`); null for apps without a cache.
 * @param {({ cache: { hits, misses }|null }|null)[]} stats
 */
function sumCacheCounters (stats) {
  const withCache = stats.filter((s) => s && s.cache)
  if (withCache.length === 0) return null
  return withCache.reduce((a, s) => ({ hits: a.hits + s.cache.hits, misses: a.misses + s.cache.misses }), { hits: 0, misses: 0 })
}

/**
 * Errors of a loadgen phase or total, with `missingKeys: 'miss'` (a GET for a
 * key nobody wrote is a cache miss that found nothing, not a failure): 404s
 * are taken out of the errors and counted as `notFound`.
 */
function errorsOf (x, experiment) {
  const notFound = experiment.missingKeys === 'miss' ? (x.status && x.status['404']) || 0 : 0
  const byClass = { ...x.errors }
  if (notFound) byClass['4xx'] = (byClass['4xx'] || 0) - notFound
  return { count: x.errorCount - notFound, byClass, notFound }
}

/** A loadgen latency summary in the report's shape. */
const lat = (l) => ({ p50: l.p50, p90: l.p90, p99: l.p99, 'p99.9': l['p99.9'], mean: l.mean, max: l.max })

/** Per HTTP method: its count and latencies, in the report's shape. */
function latByMethod (byMethod) {
  return Object.fromEntries(Object.entries(byMethod || {}).map(([m, l]) => [m, { count: l.count, ...lat(l) }]))
}

/** The load generator's time outside the servers, in the report's latency shape (null when no response stated its server time). */
function outsideOf (o) {
  if (!o) return null
  return { count: o.count, ...lat(o), byMethod: latByMethod(o.byMethod) }
}

/**
 * Everything the report needs about one contender's run, from the loadgen
 * result, the controller's round history and the app servers' counters.
 * @param {object} r loadgen result
 * @param {object} ctx
 * @param {object} ctx.experiment normalised experiment block
 * @param {object[]|null} ctx.rounds controller rounds during the run (null without a controller)
 * @param {{ hits, misses }|null} ctx.cache counter deltas over the run
 * @param {number} ctx.runStartedAt epoch ms of the loadgen's t0 (for round times)
 */
function contenderMetrics (r, { experiment, rounds, cache, runStartedAt }) {
  const windowMs = r.options.windowMs
  let usual = 0
  let total = 0
  const phases = r.phases.map((p, i) => {
    const a = affinityOf(p.keys)
    usual += a.usual
    total += a.total
    const responses = Object.values(p.servers).reduce((x, y) => x + y, 0)
    const errors = errorsOf(p, experiment)
    return {
      name: p.name,
      startS: p.startMs / 1000,
      durationS: p.durationMs / 1000,
      targetRate: p.targetRate,
      achievedRate: p.achievedRate,
      latencyMs: lat(p.latencyMs),
      errors: errors.count,
      errorRate: round(p.scheduled ? errors.count / p.scheduled : 0),
      notFound: errors.notFound,
      imbalance: p.imbalance,
      meanImbalance: p.meanImbalance,
      serverShare: Object.fromEntries(Object.entries(p.servers).map(([id, n]) => [id, round(responses ? n / responses : 0)])),
      affinity: a.total ? round(a.usual / a.total) : null,
      // The first phase measures convergence from the initial layout; later ones, recovery after a phase change.
      recoveryPeriods: recoveryPeriods(r.windows, p, { periodMs: experiment.periodMs, windowMs, target: experiment.imbalanceTarget }),
      sustained: p.achievedRate >= experiment.sustainedShare * p.targetRate && p.latencyMs.p99 !== null && p.latencyMs.p99 <= experiment.sloMs && errors.count <= 0.01 * p.scheduled,
      lateShare: p.schedule.lateShare
    }
  })
  const sustained = phases.filter((p) => p.sustained)
  const errors = errorsOf(r.totals, experiment)
  const churnRounds = rounds
    ? rounds.map((x) => ({ round: x.round, t: round((x.at - runStartedAt) / 1000, 3), imbalance: round(x.imbalance), churnFraction: round(x.churnFraction, 6), changed: x.changed, slices: x.slices }))
    : null
  return {
    latencyMs: lat(r.totals.latencyMs),
    // reads and writes apart: a KV write goes to the slice's primary and holds its replicas
    latencyByMethod: latByMethod(r.totals.latencyByMethod),
    // latency minus the app server's own time (its Server-Timing, bench/lib/capacity.js): the time
    // in the client, the router (front end or HAProxy) and on the network; null without the capacity model
    outsideServerMs: outsideOf(r.totals.outsideServerMs),
    percentileCurve: percentileCurve(r.totals.histogram),
    throughput: {
      targetRate: r.totals.targetRate,
      achievedRate: r.totals.achievedRate,
      scheduled: r.totals.scheduled,
      responses: r.totals.responses,
      errors: errors.count,
      errorRate: round(r.totals.scheduled ? errors.count / r.totals.scheduled : 0),
      errorsByClass: errors.byClass,
      notFound: errors.notFound, // missingKeys: 'miss': GETs of keys nobody wrote (404), not errors
      // rising: the best step that held the rate within the latency objective
      maxSustainedRate: sustained.length ? Math.max(...sustained.map((p) => p.achievedRate)) : null
    },
    imbalance: {
      mean: r.totals.meanImbalance,
      series: r.windows.map((w) => ({ t: w.t, phase: w.phase, imbalance: w.imbalance, responses: w.responses, p99: w.latencyMs.p99 }))
    },
    churn: churnRounds && {
      rounds: churnRounds,
      meanFraction: churnRounds.length ? round(churnRounds.reduce((a, x) => a + x.churnFraction, 0) / churnRounds.length, 6) : 0,
      maxFraction: churnRounds.length ? Math.max(...churnRounds.map((x) => x.churnFraction)) : 0
    },
    affinity: total ? round(usual / total) : null,
    cache: cache && { ...cache, hitRate: cache.hits + cache.misses ? round(cache.hits / (cache.hits + cache.misses)) : null },
    // KV: GETs that returned a value overwritten before they were sent (loadgen/stale-reads.js)
    staleReads: r.staleReads ? { checked: r.staleReads.checked, stale: r.staleReads.stale, share: round(r.staleReads.share, 6), unchecked: r.staleReads.unchecked, examples: r.staleReads.examples } : null,
    recovery: phases.slice(1).map((p, i) => ({
      phase: p.name,
      periods: p.recoveryPeriods,
      controllerPeriods: churnRounds ? controllerRecoveryPeriods(churnRounds, r.phases[i + 1], { periodMs: experiment.periodMs, target: experiment.imbalanceTarget }) : null
    })),
    phases,
    client: { heldRate: r.client.heldRate, problems: r.client.problems, eventLoopUtilization: r.client.eventLoopUtilization, peakInFlight: r.client.peakInFlight }
  }
}

/** contender ÷ base for each headline figure (null when either is missing or the base is 0). */
function ratios (c, base) {
  const div = (a, b) => (a === null || a === undefined || b === null || b === undefined || b === 0 ? null : round(a / b, 3))
  return {
    p50: div(c.latencyMs.p50, base.latencyMs.p50),
    p90: div(c.latencyMs.p90, base.latencyMs.p90),
    p99: div(c.latencyMs.p99, base.latencyMs.p99),
    'p99.9': div(c.latencyMs['p99.9'], base.latencyMs['p99.9']),
    achievedRate: div(c.throughput.achievedRate, base.throughput.achievedRate),
    maxSustainedRate: div(c.throughput.maxSustainedRate, base.throughput.maxSustainedRate),
    meanImbalance: div(c.imbalance.mean, base.imbalance.mean),
    affinity: div(c.affinity, base.affinity),
    hitRate: div(c.cache && c.cache.hitRate, base.cache && base.cache.hitRate)
  }
}

module.exports = { CURVE_PERCENTILES, percentileCurve, affinityOf, recoveryPeriods, controllerRecoveryPeriods, sumCacheCounters, errorsOf, contenderMetrics, ratios }
