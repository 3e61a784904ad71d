'use strict'

const { InvalidArgumentError } = require('../../core/errors')

/**
 * Repeated runs of one scenario (`--repeat N`): which run stands for a
 * contender, and the order the contenders run in.
 *
 * One run of a scenario on a shared machine is one draw: on the 2-core Xeon,
 * Chopper's scenario 1 p99 came out between 68 and 168 ms over a morning of
 * identical single runs, and bounded loads' between 62 and 99. With N runs
 * per contender, the contender's figures (and so every check of the headline)
 * are those of its median run, a real run whose figures all agree with each
 * other, rather than medians of each figure taken from different runs. Its
 * other runs are kept as summaries (`repeats.runs`).
 *
 * The median is by the figure the scenario is about: the p99 at a fixed rate,
 * the maximum sustained throughput on a rising rate. With an even N it is the
 * worse of the two middle runs. A run that failed ranks after every run that
 * did not, so a contender's median run fails only when half its runs or more
 * failed.
 */

/** Most runs per contender and scenario. */
const MAX_REPEATS = 9

/** Whether `n` runs per contender can be asked for: an integer from 1 to MAX_REPEATS. */
function isRepeatCount (n) {
  return Number.isInteger(n) && n >= 1 && n <= MAX_REPEATS
}

function checkRepeats (n) {
  if (!isRepeatCount(n)) throw new InvalidArgumentError(`invalid repeats: expected an integer from 1 to ${MAX_REPEATS}, got ${JSON.stringify(n)}`)
  return n
}

/** What a run is ranked by: `maxSustainedRate` (higher is better) on rising scenarios, else `p99` (lower is better). */
function rankedBy (experiment) {
  return experiment.kind === 'rising' ? 'maxSustainedRate' : 'p99'
}

/** The figures of one run kept for every repeat; a failed run keeps its error message instead. */
function runSummary (entry, index) {
  if (!entry.ok) return { run: index + 1, ok: false, error: entry.error ? entry.error.message : 'failed' }
  return {
    run: index + 1,
    ok: true,
    p50: entry.latencyMs.p50,
    p90: entry.latencyMs.p90,
    p99: entry.latencyMs.p99,
    achievedRate: entry.throughput.achievedRate,
    maxSustainedRate: entry.throughput.maxSustainedRate ?? null,
    errors: entry.throughput.errors,
    hitRate: entry.cache ? entry.cache.hitRate : null,
    imbalance: entry.imbalance.mean
  }
}

/**
 * A run's rank key, smaller is better; failed runs (and a rising run that
 * sustained no step) rank last, in run order.
 */
function rankKey (entry, by) {
  if (!entry.ok) return Infinity
  if (by === 'maxSustainedRate') {
    const v = entry.throughput.maxSustainedRate
    return typeof v === 'number' ? -v : Infinity
  }
  const v = entry.latencyMs.p99
  return typeof v === 'number' ? v : Infinity
}

/**
 * The run that stands for a contender: the median of `entries` (its runs, in
 * the order they ran) by `by`, the worse middle one for an even count.
 * @param {object[]} entries contender results (harness.js), one per run
 * @param {'p99'|'maxSustainedRate'} by
 * @returns {number} the index of the chosen run in `entries`
 */
function medianRun (entries, by) {
  if (!Array.isArray(entries) || entries.length === 0) throw new InvalidArgumentError('medianRun: expected at least one run')
  if (by !== 'p99' && by !== 'maxSustainedRate') throw new InvalidArgumentError(`medianRun: invalid by ${JSON.stringify(by)}`)
  const order = entries.map((e, i) => i).sort((a, b) => (rankKey(entries[a], by) - rankKey(entries[b], by)) || (a - b))
  return order[Math.floor(entries.length / 2)]
}

/**
 * Contender order for repeat `r` (0-based): the list rotated by r, so that no
 * contender always runs first (cold machine caches) or always right after the
 * same neighbour.
 */
function runOrder (names, r) {
  const k = r % names.length
  return [...names.slice(k), ...names.slice(0, k)]
}

/**
 * Fold a contender's runs into one entry: the median run's, with
 * `repeats: { count, by, chosen (1-based run number), runs: [runSummary] }`.
 * A single run is returned unchanged (no `repeats` field).
 */
function foldRuns (entries, by) {
  if (entries.length === 1) return entries[0]
  const i = medianRun(entries, by)
  return { ...entries[i], repeats: { count: entries.length, by, chosen: i + 1, runs: entries.map(runSummary) } }
}

module.exports = { MAX_REPEATS, isRepeatCount, checkRepeats, rankedBy, medianRun, runOrder, foldRuns, runSummary }
