'use strict'

const { spreadLoads } = require('./assignment')
const { InvalidArgumentError } = require('./errors')

/**
 * What the controller balances (issue 10, "load measured as cost"). App
 * servers report, per key range, `count` (requests) and `cost` (busy ms:
 * wall or CPU time in the handler, or what the app stated). 'cost' is the
 * default: a cache miss or a heavy computation weighs what it costs, not one
 * request. 'requests' is the paper's measure.
 */
const LOAD_METRICS = Object.freeze(['cost', 'requests'])

/** Throws InvalidArgumentError naming `name` unless `metric` is one of LOAD_METRICS. */
function validateLoadMetric (metric, name = 'loadMetric') {
  if (!LOAD_METRICS.includes(metric)) {
    throw new InvalidArgumentError(`invalid ${name}: expected one of ${LOAD_METRICS.map((m) => JSON.stringify(m)).join(', ')}, got ${JSON.stringify(metric)}`)
  }
  return metric
}

/**
 * Per-slice load of `a` from report entries: 'requests' spreads `count`
 * (requests admitted); 'cost' is requests admitted x the slice's mean cost per
 * finished request (`cost` / `done`; the mean over every slice where one has
 * no finished request yet; entries without `done`, from older servers, count
 * requests as finished). Admissions, not busy time, carry the volume: an
 * overloaded server finishes only what its capacity allows, so its busy time
 * stops at its capacity while the requests it admits keep growing. Measured:
 * balancing on busy time alone left the hot-key KV experiment at a served
 * imbalance of 1.2-1.4 while the controller saw 1.04-1.10.
 * @returns {Float64Array} load per slice of `a`
 */
function spreadMetric (a, entries, metric) {
  const counts = spreadLoads(a, entries)
  if (metric === 'requests') return counts
  const cost = spreadLoads(a, entries, (e) => e.cost)
  const done = spreadLoads(a, entries, (e) => (e.done === undefined ? e.count : e.done))
  let costSum = 0
  let doneSum = 0
  for (let i = 0; i < cost.length; i++) {
    costSum += cost[i]
    doneSum += done[i]
  }
  const mean = doneSum > 0 ? costSum / doneSum : 1
  const out = new Float64Array(counts.length)
  for (let i = 0; i < out.length; i++) out[i] = counts[i] * (done[i] > 0 ? cost[i] / done[i] : mean)
  return out
}

/** Requests and cost summed over report entries. */
function totals (entries) {
  let requests = 0
  let cost = 0
  for (const e of entries) {
    requests += e.count
    cost += e.cost
  }
  return { requests, cost }
}

module.exports = { LOAD_METRICS, validateLoadMetric, spreadMetric, totals }
