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
 * spreadLoads (core/assignment.js) over one field of the report entries:
 * `count` for 'requests', `cost` for 'cost'.
 * @returns {Float64Array} load per slice of `a`
 */
function spreadMetric (a, entries, metric) {
  if (metric === 'requests') return spreadLoads(a, entries)
  return spreadLoads(a, entries.map((e) => ({ start: e.start, end: e.end, count: e.cost })))
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
