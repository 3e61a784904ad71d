'use strict'

/** Imbalance target for recovery (paper 5.2.3's move ratio; bench/experiments uses the same). */
const RECOVERY_TARGET = 1.25
/** Periods the imbalance must stay under the target to count as recovered. */
const RECOVERY_HOLD = 2
/** periodsToSettle: within this fraction above the phase's steady state. */
const SETTLE_TOLERANCE = 0.05

/**
 * Periods to recover after a shift: counting from `fromPeriod` (the first
 * period that starts at or after the phase change), the number of periods
 * until the first period p whose imbalance is < target and stays < target
 * for `hold` periods in a row (p .. p + hold - 1), all before `toPeriod`.
 * 0 means it never left the target; null means it did not recover in time.
 * @param {number[]} series per-period imbalance
 * @param {number} fromPeriod
 * @param {number} [toPeriod] exclusive; defaults to the series' end
 * @param {{ target?: number, hold?: number }} [o]
 * @returns {number|null}
 */
function periodsToRecover (series, fromPeriod, toPeriod = series.length, { target = RECOVERY_TARGET, hold = RECOVERY_HOLD } = {}) {
  for (let p = fromPeriod; p + hold <= toPeriod; p++) {
    let ok = true
    for (let q = p; q < p + hold; q++) {
      if (!(series[q] < target)) { ok = false; break }
    }
    if (ok) return p - fromPeriod
  }
  return null
}

/**
 * Periods to settle after a shift: like periodsToRecover, but the target is
 * the phase's own steady state (`steady` x (1 + tol)) instead of a fixed
 * level, so a strategy that never gets below 1.25 still shows how fast it
 * converges to where it ends up.
 * @param {number[]} series per-period imbalance
 * @param {number} fromPeriod
 * @param {number} toPeriod exclusive
 * @param {number} steady the phase's steady-state imbalance
 * @param {{ tol?: number, hold?: number }} [o]
 * @returns {number|null}
 */
function periodsToSettle (series, fromPeriod, toPeriod, steady, { tol = SETTLE_TOLERANCE, hold = RECOVERY_HOLD } = {}) {
  return periodsToRecover(series, fromPeriod, toPeriod, { target: steady * (1 + tol) + 1e-9, hold })
}

/** Mean of the values (null for none). */
function mean (values) {
  if (values.length === 0) return null
  let s = 0
  for (const v of values) s += v
  return s / values.length
}

/** Nearest-rank percentile of numbers (q in [0, 1]); null for none. */
function percentile (values, q) {
  if (values.length === 0) return null
  const sorted = Float64Array.from(values).sort()
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]
}

/** min / p50 / p99 / max / mean of numbers, rounded for JSON. */
function summary (values, digits = 4) {
  if (values.length === 0) return null
  const r = (x) => (x === null ? null : Number(x.toFixed(digits)))
  return { min: r(percentile(values, 0)), p50: r(percentile(values, 0.5)), p99: r(percentile(values, 0.99)), max: r(percentile(values, 1)), mean: r(mean(values)) }
}

module.exports = { RECOVERY_TARGET, RECOVERY_HOLD, SETTLE_TOLERANCE, periodsToRecover, periodsToSettle, mean, percentile, summary }
