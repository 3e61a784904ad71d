'use strict'

const { simulate } = require('./cluster')
const { scaleSpec, RATE_SCALE } = require('./scale')
const { periodsToSettle, mean, SETTLE_TOLERANCE, RECOVERY_TARGET, RECOVERY_HOLD } = require('./metrics')

/**
 * Seed 001's sensitivity analysis of the neighbour-offload buckets, on the
 * simulator: every (N buckets, T offload %) cell of a grid runs the real
 * `neighbour-offload` strategy (controller/strategies/neighbour-offload.js)
 * on the scale set's skewed, shifting workload, in fluid mode. The seed
 * measured throughput of one server on a laptop for N in {3, 6, 9} and T in
 * {10, 25, 45} %; throughput is not what a balancer changes in a simulator,
 * so each cell reports what issue 14 asks of every strategy: steady-state
 * imbalance, periods to recover after a shift, and churn per round.
 */
const SENSITIVITY_DEFAULTS = Object.freeze({
  buckets: Object.freeze([3, 6, 9, 12, 20]), // N: the seed's 3, 6, 9 and two more
  offloadPercent: Object.freeze([10, 25, 45, 60]), // T: the seed's 10, 25, 45 and one more
  servers: 100,
  periodMs: 1000,
  phases: 3,
  periodsPerPhase: 12,
  seed: 1
})

/**
 * Run the grid.
 * @param {object} [o] SENSITIVITY_DEFAULTS overrides, plus onCell(cell) and clock (see cluster.js)
 * @returns {{ settings: object, workload: string, cells: object[] }} one cell per (N, T), rows of N
 */
function runSensitivity (o = {}) {
  const s = { ...SENSITIVITY_DEFAULTS, ...Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) }
  const spec = scaleSpec(s.servers, s)
  const cells = []
  for (const buckets of s.buckets) {
    for (const offloadPercent of s.offloadPercent) {
      const r = simulate(spec, {
        strategy: 'neighbour-offload',
        strategyOptions: { buckets, offloadPercent },
        servers: s.servers,
        slicesPerServer: 1, // the strategy cuts each server's range into N buckets itself
        periodMs: s.periodMs,
        seed: s.seed,
        mode: 'fluid',
        rateScale: RATE_SCALE,
        clock: s.clock
      })
      const cell = summariseCell(r, { buckets, offloadPercent })
      cells.push(cell)
      if (s.onCell) s.onCell(cell)
    }
  }
  return {
    settings: { ...s, onCell: undefined, clock: undefined, settleTolerance: SETTLE_TOLERANCE, recovery: { target: RECOVERY_TARGET, hold: RECOVERY_HOLD } },
    workload: spec.name,
    cells
  }
}

/** One cell's figures from a simulation result. */
function summariseCell (r, { buckets, offloadPercent }) {
  const series = r.periods.map((p) => p.imbalance)
  const shifts = r.phases.slice(1)
  const settle = shifts.map((p, i) => {
    const to = i + 2 < r.phases.length ? r.phases[i + 2].firstPeriod : series.length
    return periodsToSettle(series, p.firstPeriod, to, p.steadyImbalance)
  })
  const recover = r.summary.periodsToRecover
  const known = (xs) => xs.every((v) => v !== null)
  return {
    buckets,
    offloadPercent,
    steadyImbalance: r.summary.steadyImbalance,
    // to imbalance < 1.25 (the scale report's figure); null: not within the phase
    periodsToRecover: recover,
    meanPeriodsToRecover: known(recover) && recover.length ? round(mean(recover)) : null,
    // to within 5 % of the phase's own steady state
    periodsToSettle: settle,
    meanPeriodsToSettle: known(settle) && settle.length ? round(mean(settle)) : null,
    churnPerRound: r.summary.churnPerRound ? r.summary.churnPerRound.mean : null,
    imbalance: series
  }
}

const round = (v, d = 2) => Number(v.toFixed(d))

module.exports = { SENSITIVITY_DEFAULTS, runSensitivity }
