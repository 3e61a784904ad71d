'use strict'

const hdr = require('hdr-histogram-js')

/** Percentiles every summary reports (the paper's figures plot p50 to p99.9). */
const PERCENTILES = Object.freeze([50, 90, 99, 99.9])

/**
 * A latency histogram in microseconds. 3 significant digits (0.1 % error) and
 * auto-resize, so a 10 s stall and a 200 µs hit are both recorded exactly
 * enough. The pure-JS implementation is used: no WebAssembly init step.
 */
function createHistogram () {
  return hdr.build({ lowestDiscernibleValue: 1, numberOfSignificantValueDigits: 3, autoResize: true })
}

const round3 = (x) => Math.round(x * 1000) / 1000

/**
 * Summary of a µs histogram in milliseconds.
 * @returns {{ count: number, min: number|null, mean: number|null, p50: number|null, p90: number|null, p99: number|null, 'p99.9': number|null, max: number|null }}
 */
function summarize (h) {
  const count = h.totalCount
  const out = { count, min: null, mean: null }
  for (const p of PERCENTILES) out[`p${p}`] = null
  out.max = null
  if (count === 0) return out
  out.min = round3(h.minNonZeroValue / 1000)
  out.mean = round3(h.mean / 1000)
  // HdrHistogram reports a bucket's highest equivalent value; clamp so no percentile exceeds the max.
  const max = h.maxValue
  for (const p of PERCENTILES) out[`p${p}`] = round3(Math.min(h.getValueAtPercentile(p), max) / 1000)
  out.max = round3(max / 1000)
  return out
}

/** Base64 of the compressed HdrHistogram encoding (µs), mergeable across runs by any HdrHistogram library. */
function encode (h) {
  return h.totalCount === 0 ? null : hdr.encodeIntoCompressedBase64(h)
}

/** Error classes for requests that got no HTTP response. */
const FAILURE_CLASSES = Object.freeze(['timeout', 'connect', 'socket', 'other'])
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT', 'ABORT_ERR'])
const CONNECT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN'])
const SOCKET_CODES = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE', 'UND_ERR_CLOSED', 'UND_ERR_DESTROYED'])

/** Classify a request failure (no response) as timeout, connect, socket or other. */
function failureClass (err) {
  const code = err && (err.code || (err.cause && err.cause.code))
  if (TIMEOUT_CODES.has(code) || (err && err.name === 'TimeoutError')) return 'timeout'
  if (CONNECT_CODES.has(code)) return 'connect'
  if (SOCKET_CODES.has(code)) return 'socket'
  return 'other'
}

/** '2xx' ... '5xx'. */
function statusClass (status) {
  return `${Math.floor(status / 100)}xx`
}

/** An error-count object with every class present (zeros included), so consumers need no defaults. */
function emptyErrors () {
  return { '4xx': 0, '5xx': 0, timeout: 0, connect: 0, socket: 0, other: 0 }
}

function errorTotal (errors) {
  return Object.values(errors).reduce((a, b) => a + b, 0)
}

module.exports = { PERCENTILES, FAILURE_CLASSES, createHistogram, summarize, encode, failureClass, statusClass, emptyErrors, errorTotal }
