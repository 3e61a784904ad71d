'use strict'

const { performance } = require('node:perf_hooks')
const { setTimeout: delay } = require('node:timers/promises')
const { Pool } = require('undici')
const { HistoryRecorder } = require('../../history')
const { baseWeights, aliasSampler } = require('../../loadgen/distributions')
const { InvalidArgumentError } = require('../../core/errors')

/** Every option of the KV client and the open-loop load, and its default. */
const defaults = Object.freeze({
  rate: 300, // requests per second, open loop
  putRatio: 0.2,
  zipfS: 0.6, // key skew: rank r has weight r^-s (over ~200 keys the hottest key gets ~5%, the coldest ~0.2%)
  timeoutMs: 10000, // per request, whole exchange; past it the outcome is unknown
  connections: 128, // per front end
  maxInFlight: 4000, // beyond this the client counts a request as skipped instead of sending it
  tickMs: 2,
  maxOperations: 1_000_000 // per phase history
})

const now = () => performance.now()

/** True when the answer counts as served: any 2xx, or a 404 to a GET (not found). */
function isSuccess (r) {
  if (r.error) return false
  if (r.status >= 200 && r.status < 300) return true
  return r.op === 'get' && r.status === 404 && r.code === 'CHOPPER_ERR_NOT_FOUND'
}

/**
 * One phase's log: the linearizability history and one record per request
 * ({ op, key, fe, probe, call, ret, status, code, error, servedBy, generation }),
 * on the same clock (performance.now, ms).
 */
function createPhaseLog (name, { maxOperations = defaults.maxOperations } = {}) {
  return { name, history: new HistoryRecorder({ maxOperations, now }), records: [], now }
}

/**
 * A KV client over undici pools, one per front end, used in turn.
 * `execute` never throws: every outcome is recorded.
 */
function createKvClient ({ targets, timeoutMs = defaults.timeoutMs, connections = defaults.connections }) {
  if (!Array.isArray(targets) || targets.length === 0) throw new InvalidArgumentError('invalid targets: expected front end URLs')
  const pools = targets.map((url) => new Pool(url, { connections, headersTimeout: timeoutMs, bodyTimeout: timeoutMs }))
  let turn = 0

  /**
   * Send one operation through the next front end and record it in `log`.
   * @param {ReturnType<typeof createPhaseLog>} log
   * @param {{ op: 'get'|'put', key: string, probe?: boolean }} operation
   * @returns {Promise<object>} the record
   */
  async function execute (log, { op, key, probe = false }) {
    const fe = turn
    turn = (turn + 1) % pools.length
    const client = probe ? 'probe' : `fe${fe}`
    const value = op === 'put' ? log.history.nextValue(log.name) : undefined
    const handle = log.history.invoke({ client, key, op, value })
    const r = { op, key, fe, probe, call: now(), ret: null, status: null, code: null, error: null, servedBy: null, generation: null, value: null }
    log.records.push(r)
    let outcome = { ok: false }
    try {
      const res = await pools[fe].request({
        method: op === 'put' ? 'PUT' : 'GET',
        path: `/kv?key=${encodeURIComponent(key)}`,
        headers: op === 'put' ? { 'content-type': 'text/plain' } : {},
        body: op === 'put' ? value : undefined,
        signal: AbortSignal.timeout(timeoutMs)
      })
      const text = await res.body.text()
      r.status = res.statusCode
      r.servedBy = res.headers['x-served-by'] || null
      r.generation = res.headers['x-chopper-generation'] ? Number(res.headers['x-chopper-generation']) : null
      if (r.status >= 400) r.code = errorCode(text)
      if (op === 'get') {
        if (r.status === 200) outcome = { ok: true, value: text }
        else if (r.status === 404 && r.code === 'CHOPPER_ERR_NOT_FOUND') outcome = { ok: true, value: null }
        if (outcome.ok) r.value = outcome.value
      } else if (r.status >= 200 && r.status < 300) {
        outcome = { ok: true }
        r.value = value
      } else if (r.code === 'CHOPPER_ERR_FENCED_WRITE') {
        // A newer owner had written the key: the store refused this write, so it certainly did not apply.
        outcome = { ok: 'failed' }
      }
    } catch (err) {
      r.error = err.code || err.name || 'ERROR'
    }
    r.ret = now()
    log.history.complete(handle, outcome)
    return r
  }

  return {
    execute,
    async close () {
      await Promise.all(pools.map((p) => p.destroy()))
    }
  }
}

function errorCode (text) {
  try {
    const body = JSON.parse(text)
    return (body && body.error && body.error.code) || null
  } catch {
    return null
  }
}

/**
 * A key chooser: `count` keys named `<prefix>-<i>`, drawn with a Zipf skew.
 * @returns {{ keys: string[], pick: (rng) => string }}
 */
function createKeys (prefix, count, zipfS = defaults.zipfS) {
  if (!Number.isInteger(count) || count < 1) throw new InvalidArgumentError('invalid keys: expected an integer >= 1')
  const keys = Array.from({ length: count }, (_, i) => `${prefix}-${i}`)
  const w = baseWeights({ type: 'zipf', s: zipfS }, count)
  let sum = 0
  for (const x of w) sum += x
  const sample = aliasSampler(w.map((x) => x / sum))
  return { keys, pick: (rng) => keys[sample(rng)] }
}

/**
 * Open-loop load at a constant rate: requests are sent on schedule whether or
 * not earlier ones have answered (a stall of the event loop is caught up, up
 * to one second's worth; the rest is counted as skipped, like requests beyond
 * `maxInFlight`).
 * @param {{ client, log, keys: ReturnType<typeof createKeys>, rng, rate?, putRatio?, maxInFlight?, tickMs? }} options
 * @returns {{ stop: () => Promise<void>, stats: { scheduled, sent, skipped } }}
 */
function startLoad ({ client, log, keys, rng, rate = defaults.rate, putRatio = defaults.putRatio, maxInFlight = defaults.maxInFlight, tickMs = defaults.tickMs }) {
  if (!(rate > 0)) throw new InvalidArgumentError('invalid rate: expected a number > 0')
  if (!(putRatio >= 0 && putRatio <= 1)) throw new InvalidArgumentError('invalid putRatio: expected a number in [0, 1]')
  const stats = { scheduled: 0, sent: 0, skipped: 0 }
  const inflight = new Set()
  const t0 = now()
  let stopped = false
  let timer = null

  function tick () {
    if (stopped) return
    const due = Math.floor(((now() - t0) * rate) / 1000)
    let n = due - stats.scheduled
    if (n > rate) {
      stats.skipped += n - Math.ceil(rate)
      stats.scheduled += n - Math.ceil(rate)
      n = Math.ceil(rate)
    }
    for (; n > 0; n--) {
      stats.scheduled++
      if (inflight.size >= maxInFlight) {
        stats.skipped++
        continue
      }
      const op = rng.next() < putRatio ? 'put' : 'get'
      const p = client.execute(log, { op, key: keys.pick(rng) })
      stats.sent++
      inflight.add(p)
      p.finally(() => inflight.delete(p))
    }
    timer = setTimeout(tick, tickMs)
  }
  tick()

  return {
    stats,
    /** Stop sending; resolves once every request sent has answered or timed out. */
    async stop () {
      stopped = true
      clearTimeout(timer)
      await Promise.allSettled([...inflight])
    }
  }
}

/**
 * GET each key until one answer counts as served, starting at once: sent at a
 * fault so that every key the victim owned has a request waiting from the
 * fault on (the load alone reaches a cold key only every second or two).
 * @returns {Promise<{ served: number, unserved: string[], attempts: number }>}
 */
async function probeKeys (client, log, keys, { deadlineMs = 30000, gapMs = 20 } = {}) {
  const deadline = now() + deadlineMs
  let attempts = 0
  const unserved = []
  await Promise.all(keys.map(async (key) => {
    for (let i = 0; i < 10000; i++) {
      attempts++
      const r = await client.execute(log, { op: 'get', key, probe: true })
      if (isSuccess(r)) return
      if (now() >= deadline) break
      await delay(gapMs)
    }
    unserved.push(key)
  }))
  return { served: keys.length - unserved.length, unserved, attempts }
}

module.exports = { createKvClient, createPhaseLog, createKeys, startLoad, probeKeys, isSuccess, defaults }
