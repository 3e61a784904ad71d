'use strict'

const { isSuccess } = require('./load')

/**
 * Pure figures over a phase's request records (see load.js): no I/O, no clock.
 * Times are milliseconds on the records' clock.
 */

/** Quantile of a sorted array (nearest rank); null when empty. */
function quantile (sorted, q) {
  if (sorted.length === 0) return null
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]
}

const round1 = (x) => (x === null || x === undefined ? x : Math.round(x * 10) / 10)

/**
 * Counts for one set of records: sent, failed (no answer, or any non-2xx
 * except a 404 to a GET), failures broken down by status / error code /
 * client error, and latency quantiles.
 * @param {object[]} records
 */
function summariseRequests (records) {
  const latencies = []
  const failures = { byStatus: {}, byCode: {}, byError: {}, byOp: {} }
  const servedBy = {}
  let failed = 0
  let gets = 0
  let puts = 0
  for (const r of records) {
    if (r.op === 'get') gets++
    else puts++
    if (r.ret !== null) latencies.push(r.ret - r.call)
    if (r.servedBy) servedBy[r.servedBy] = (servedBy[r.servedBy] || 0) + 1
    if (isSuccess(r)) continue
    failed++
    const inc = (o, k) => { o[k] = (o[k] || 0) + 1 }
    inc(failures.byOp, r.op)
    if (r.error) inc(failures.byError, r.error)
    else {
      inc(failures.byStatus, String(r.status))
      inc(failures.byCode, r.code || 'none')
    }
  }
  latencies.sort((a, b) => a - b)
  return {
    sent: records.length,
    gets,
    puts,
    failed,
    failedPct: records.length ? (100 * failed) / records.length : 0,
    failures,
    servedBy,
    latencyMs: { p50: round1(quantile(latencies, 0.5)), p99: round1(quantile(latencies, 0.99)), max: round1(latencies.length ? latencies[latencies.length - 1] : null) }
  }
}

/**
 * Time from a fault until each key the victim owned was served again: for
 * every key, the first request sent at or after the fault that counts as
 * served, measured to its answer. `maxMs` is over keys; keys with no such
 * request are listed as unresolved.
 * @param {object[]} records
 * @param {{ at: number, keys: string[] }} event
 */
function servedAgain (records, event) {
  const first = new Map()
  for (const r of records) {
    if (r.call < event.at || r.ret === null || !isSuccess(r)) continue
    const prev = first.get(r.key)
    if (prev === undefined || r.ret < prev) first.set(r.key, r.ret)
  }
  const delays = []
  const unresolved = []
  for (const key of event.keys) {
    const t = first.get(key)
    if (t === undefined) unresolved.push(key)
    else delays.push(t - event.at)
  }
  delays.sort((a, b) => a - b)
  return {
    keys: event.keys.length,
    maxMs: round1(delays.length ? delays[delays.length - 1] : null),
    p50Ms: round1(quantile(delays, 0.5)),
    unresolved
  }
}

/**
 * Failed requests per bucket of `bucketMs`, from `origin` on (only buckets
 * with failures), to see when failures happened relative to the faults.
 */
function failureTimeline (records, origin, bucketMs = 500) {
  const buckets = new Map()
  for (const r of records) {
    if (isSuccess(r)) continue
    const b = Math.floor((r.call - origin) / bucketMs) * bucketMs
    buckets.set(b, (buckets.get(b) || 0) + 1)
  }
  return [...buckets].sort((a, b) => a[0] - b[0]).map(([fromMs, failed]) => ({ fromMs, failed }))
}

/** A few failed requests as plain objects, times relative to `origin`. */
function failedSamples (records, origin, max = 20) {
  const out = []
  for (const r of records) {
    if (out.length >= max) break
    if (isSuccess(r)) continue
    out.push({
      atMs: round1(r.call - origin),
      latencyMs: r.ret === null ? null : round1(r.ret - r.call),
      op: r.op,
      key: r.key,
      frontend: r.fe,
      probe: r.probe,
      status: r.status,
      code: r.code,
      error: r.error,
      servedBy: r.servedBy
    })
  }
  return out
}

/**
 * Sum of a Prometheus counter or gauge (every label set) in a text exposition.
 * @param {string} text
 * @param {string} name
 * @param {(labels: string) => boolean} [match] filter on the raw label string
 */
function promValue (text, name, match = () => true) {
  let sum = 0
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue
    const rest = line.slice(name.length)
    let labels = ''
    let value
    if (rest.startsWith('{')) {
      const end = rest.indexOf('}')
      labels = rest.slice(1, end)
      value = rest.slice(end + 1)
    } else if (rest.startsWith(' ')) {
      value = rest
    } else continue
    if (match(labels)) sum += Number(value.trim().split(' ')[0]) || 0
  }
  return sum
}

/** Per-label-set values of a metric, keyed by the raw label string. */
function promSeries (text, name) {
  const out = {}
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue
    const end = line.indexOf('}')
    out[line.slice(name.length + 1, end)] = Number(line.slice(end + 1).trim().split(' ')[0]) || 0
  }
  return out
}

/** Difference of two { label: value } maps (only non-zero entries). */
function diffSeries (before, after) {
  const out = {}
  for (const [k, v] of Object.entries(after)) {
    const d = v - (before[k] || 0)
    if (d !== 0) out[k] = d
  }
  return out
}

module.exports = { summariseRequests, servedAgain, failureTimeline, failedSamples, promValue, promSeries, diffSeries, quantile }
