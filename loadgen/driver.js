'use strict'

const http = require('node:http')
const { performance } = require('node:perf_hooks')
const timers = require('node:timers/promises')
const { Pool } = require('undici')
const { InvalidArgumentError } = require('../core/errors')
const { componentLogger, silent } = require('../core/logger')
const { generate } = require('./workload')
const { Recorder } = require('./recorder')
const { serverTimingMs } = require('./server-timing')
const { parseTarget, probeTarget } = require('./probe')
const { createProgress } = require('./progress')
const { createRng, deriveSeed } = require('./prng')
const { StaleReads } = require('./stale-reads')

/**
 * Every driver option and its default, in one visible place.
 */
const DEFAULT_OPTIONS = Object.freeze({
  /** Origin, or a list of origins that requests rotate over (the paper's driver split load over both front ends). */
  target: undefined,
  /** 'open': constant-rate schedule, latency from the intended send time (wrk2). 'closed': `connections` workers that each wait for their response, latency from the actual send (wrk); kept to show what coordinated omission hides. */
  mode: 'open',
  /** Sockets per target (open loop); workers (closed loop). */
  connections: 64,
  /** Open loop: most requests outstanding at once. Past it, due requests wait (and count as late). A memory guard, not a rate limit. */
  maxInFlight: 4096,
  /** Per-request headers and body timeout; an expiry counts as a 'timeout' error. */
  timeoutMs: 10000,
  /** A request sent more than this after its scheduled time counts as late; more than 1 % late in a phase means the client could not hold the rate. */
  lagThresholdMs: 50,
  /** Share of late requests above which a phase is flagged. */
  lateShareLimit: 0.01,
  /** Width of the per-window statistics. */
  windowMs: 1000,
  /** TCP connect deadline for the reachability probe. */
  probeTimeoutMs: 2000,
  /** Server ids expected to serve (so an idle server still counts in imbalance). */
  servers: [],
  /** Keep per-key per-server counts in the result (for affinity). */
  perKey: true,
  /** KV workloads: tag every PUT's value and report GETs that returned an overwritten value (stale-reads.js) as `staleReads`. */
  checkStaleReads: false,
  /** true, false, or 'auto' (when progressStream is a TTY). */
  progress: false,
  progressStream: undefined,
  /** Called with each one-second window summary as soon as it closes. */
  onWindow: null,
  /** Abort the run early; the result so far is still returned, with aborted: true. */
  signal: undefined,
  /** An undici Dispatcher every request goes through instead of a Pool per target, e.g. @chopper/client routing by key in this process (targets are then only probed). The caller closes it. */
  dispatcher: undefined,
  logger: silent
})

/**
 * Merge options over DEFAULT_OPTIONS and check them, before anything is sent.
 * @throws {InvalidArgumentError} naming the option and what was expected
 */
function validateOptions (options) {
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError('options: expected an object')
  for (const k of Object.keys(options)) {
    if (!(k in DEFAULT_OPTIONS)) throw new InvalidArgumentError(`unknown option ${k} (expected one of ${Object.keys(DEFAULT_OPTIONS).join(', ')})`)
  }
  const o = { ...DEFAULT_OPTIONS, ...options }
  const targets = Array.isArray(o.target) ? o.target : [o.target]
  if (targets.length === 0 || targets.some((t) => typeof t !== 'string')) {
    throw new InvalidArgumentError('target: expected an origin like http://127.0.0.1:8080 or a list of them')
  }
  o.targets = targets.map((t) => parseTarget(t))
  if (o.mode !== 'open' && o.mode !== 'closed') throw new InvalidArgumentError(`mode: expected 'open' or 'closed', got ${JSON.stringify(o.mode)}`)
  for (const k of ['connections', 'maxInFlight', 'timeoutMs', 'windowMs', 'probeTimeoutMs']) {
    if (!Number.isInteger(o[k]) || o[k] < 1) throw new InvalidArgumentError(`${k}: expected an integer >= 1, got ${JSON.stringify(o[k])}`)
  }
  if (!(typeof o.lagThresholdMs === 'number' && o.lagThresholdMs >= 0)) throw new InvalidArgumentError(`lagThresholdMs: expected a number >= 0, got ${JSON.stringify(o.lagThresholdMs)}`)
  if (!(typeof o.lateShareLimit === 'number' && o.lateShareLimit >= 0 && o.lateShareLimit <= 1)) throw new InvalidArgumentError('lateShareLimit: expected a fraction in [0, 1]')
  if (!Array.isArray(o.servers) || o.servers.some((s) => typeof s !== 'string')) throw new InvalidArgumentError('servers: expected a list of server id strings')
  if (typeof o.checkStaleReads !== 'boolean') throw new InvalidArgumentError(`checkStaleReads: expected true or false, got ${JSON.stringify(o.checkStaleReads)}`)
  if (![true, false, 'auto'].includes(o.progress)) throw new InvalidArgumentError(`progress: expected true, false or 'auto', got ${JSON.stringify(o.progress)}`)
  if (o.onWindow !== null && typeof o.onWindow !== 'function') throw new InvalidArgumentError('onWindow: expected a function')
  if (o.dispatcher !== undefined && (o.dispatcher === null || typeof o.dispatcher.request !== 'function')) throw new InvalidArgumentError('dispatcher: expected an undici Dispatcher')
  return o
}

/**
 * Drive a workload against a target and measure it.
 *
 * Open loop (the default) keeps the schedule whatever the responses do:
 * request i of a phase is due at phase start + i / rate, and its latency runs
 * from that intended time to the end of the response body. So time a request
 * spends waiting because the server (or the client) stalled is counted
 * (coordinated omission corrected, as in wrk2).
 *
 * @param {object} spec workload spec (raw, normalised, or a workload from generate())
 * @param {Partial<typeof DEFAULT_OPTIONS>} options
 * @returns {Promise<object>} the result document (see README "Result file")
 */
async function run (spec, options = {}) {
  const o = validateOptions(options)
  const workload = spec && typeof spec.requests === 'function' && Array.isArray(spec.phases) ? spec : generate(spec)
  const log = componentLogger('loadgen', o.logger)

  await Promise.all(o.targets.map((url) => probeTarget(url, o.probeTimeoutMs)))
  await warmUp()

  const pools = o.dispatcher !== undefined
    ? []
    : o.targets.map((url) => new Pool(url.origin, {
      connections: o.connections,
      pipelining: 1,
      headersTimeout: o.timeoutMs,
      bodyTimeout: o.timeoutMs,
      connect: { timeout: Math.min(o.timeoutMs, 10000) }
    }))
  const dispatchers = o.dispatcher !== undefined ? [o.dispatcher] : pools
  const rec = new Recorder({ workload, windowMs: o.windowMs, lagThresholdMs: o.lagThresholdMs, servers: o.servers, perKey: o.perKey })
  const values = valueSource(workload)
  const stale = o.checkStaleReads ? new StaleReads() : null
  const progressStream = o.progressStream || process.stderr
  const progress = (o.progress === true || (o.progress === 'auto' && progressStream.isTTY)) ? createProgress(progressStream) : null

  let stopped = false
  let slotWaiter = null
  let nextPool = 0
  let emittedWindows = 0
  let currentPhase = 0
  // Internal stop signal, so an abort also cuts short a long wait for the next scheduled send.
  const stop = new AbortController()
  const onAbort = () => {
    stopped = true
    stop.abort()
    if (slotWaiter) slotWaiter()
  }
  if (o.signal) {
    if (o.signal.aborted) onAbort()
    else o.signal.addEventListener('abort', onAbort, { once: true })
  }
  const sleep = (ms) => timers.setTimeout(ms, undefined, { signal: stop.signal }).catch(() => {})

  /** Send one request; resolves when it has completed or failed (never rejects). */
  function send (req, intended) {
    const sendAt = performance.now()
    rec.sent(req, intended, sendAt)
    // libuv's cached loop time can fire a timer up to ~1 ms before performance.now() reaches the
    // intended time. A request sent early is timed from its actual send, never from a later instant.
    const origin = o.mode === 'open' ? Math.min(intended, sendAt) : sendAt
    const pool = dispatchers[nextPool++ % dispatchers.length]
    // A PUT always carries a body (maybe empty, with Content-Length: 0), like payload.lua's.
    let body = req.method === 'PUT' ? values(req) : undefined
    let written = -1
    if (stale !== null && body !== undefined) ({ body, id: written } = stale.write(req.key, body, sendAt))
    else if (stale !== null && req.method === 'DELETE') written = stale.remove(req.key, sendAt)
    const reads = stale !== null && req.method === 'GET'
    const request = {
      method: req.method,
      path: req.path,
      body,
      headers: body ? { 'content-type': workload.phases[req.phase].contentType } : undefined
    }
    if (o.dispatcher !== undefined) request.origin = o.targets[0].origin // a Pool has its own; the client routes by key whatever it is
    return pool.request(request).then(async (res) => {
      let bytes = 0
      let head = null // a GET's first chunk, for its value's tag
      // Latency ends when the whole body has arrived, not at the headers.
      for await (const chunk of res.body) {
        if (reads && head === null) head = chunk
        bytes += chunk.length
      }
      const end = performance.now()
      const servedBy = res.headers['x-served-by']
      rec.response(req, origin, end, res.statusCode, Array.isArray(servedBy) ? servedBy[0] : servedBy, bytes, serverTimingMs(res.headers['server-timing']))
      if (written !== -1 && res.statusCode >= 200 && res.statusCode < 300) stale.acknowledged(written, end)
      if (reads && (res.statusCode === 200 || res.statusCode === 404)) stale.read(req.key, sendAt, res.statusCode === 404 ? null : head || Buffer.alloc(0))
    }).catch((err) => {
      rec.failure(req, performance.now(), err)
      log.debug({ err, path: req.path }, 'request failed')
    }).finally(() => {
      if (slotWaiter && rec.inFlight < o.maxInFlight) {
        const w = slotWaiter
        slotWaiter = null
        w()
      }
    })
  }

  async function openLoop (t0) {
    for (const ph of workload.phases) {
      currentPhase = ph.index
      let burst = 0
      for (const req of workload.requests(ph.index)) {
        const intended = t0 + req.offsetMs
        const wait = intended - performance.now()
        if (wait > 0) {
          await sleep(wait)
          burst = 0
        } else if (++burst >= 64) {
          // Behind schedule: catch up, but let responses be processed between bursts.
          await timers.setImmediate()
          burst = 0
        }
        if (stopped) return
        if (rec.inFlight >= o.maxInFlight) {
          rec.capHit(ph.index)
          await new Promise((resolve) => { slotWaiter = resolve })
          if (stopped) return
        }
        send(req, intended)
      }
    }
  }

  // Closed loop: what naive tools do. A worker cannot send its next request
  // until its last one completes, so a stall delays the requests that would
  // have measured it. They are sent late or not at all, and latency is timed
  // from the late send.
  async function closedLoop (t0) {
    const end = t0 + workload.durationMs
    const iter = workload[Symbol.iterator]()
    const worker = async () => {
      for (;;) {
        if (stopped || performance.now() >= end) return
        const { value: req, done } = iter.next()
        if (done) return
        currentPhase = req.phase
        const intended = t0 + req.offsetMs
        const wait = intended - performance.now()
        if (wait > 0) await sleep(wait)
        if (stopped) return
        await send(req, intended)
      }
    }
    await Promise.all(Array.from({ length: o.connections }, worker))
  }

  function status (t0) {
    const now = performance.now()
    const elapsedMs = now - t0
    const closed = Math.floor(elapsedMs / o.windowMs)
    const phase = elapsedMs < workload.durationMs ? workload.phases[currentPhase] : null
    const out = {
      elapsedMs,
      totalMs: workload.durationMs,
      phase,
      phases: workload.phases.length,
      sent: rec.phases.reduce((n, p) => n + p.sent, 0),
      inFlight: rec.inFlight,
      lastWindow: closed > 0 && rec.windows[closed - 1] ? rec.windowSummary(closed - 1) : null
    }
    const lw = out.lastWindow && workload.phases.find((p) => p.name === out.lastWindow.phase)
    out.lastWindowRate = lw ? lw.rate : null
    return out
  }

  function tick (t0, final) {
    const closed = final ? rec.windows.length : Math.min(rec.windows.length, Math.floor((performance.now() - t0) / o.windowMs))
    if (o.onWindow) {
      for (; emittedWindows < closed; emittedWindows++) {
        try { o.onWindow(rec.windowSummary(emittedWindows)) } catch (err) { log.warn({ err }, 'onWindow callback threw') }
      }
    }
    if (progress && !final) progress.render(status(t0))
  }

  const startedAt = new Date()
  const elu0 = performance.eventLoopUtilization()
  // Start a few ms ahead so the first requests are not already late.
  const t0 = performance.now() + 5
  rec.start(t0)
  log.info({ targets: o.targets.map((u) => u.origin), mode: o.mode, phases: workload.phases.length, requests: workload.totalRequests }, 'run starting')
  const ticker = setInterval(() => tick(t0, false), 200)
  let drained = true
  try {
    await (o.mode === 'open' ? openLoop(t0) : closedLoop(t0))
    // Drain: give outstanding requests their timeout, then give up on them.
    const deadline = performance.now() + o.timeoutMs + 1000
    while (rec.inFlight > 0 && performance.now() < deadline) await timers.setTimeout(5)
    drained = rec.inFlight === 0
  } finally {
    clearInterval(ticker)
    if (o.signal) o.signal.removeEventListener('abort', onAbort)
    await Promise.all(pools.map((p) => (drained ? p.close() : p.destroy())))
    if (progress) {
      progress.render(status(t0))
      progress.done()
    }
  }
  const finishedAt = new Date()
  const elu = performance.eventLoopUtilization(elu0)
  tick(t0, true)

  const { servers, phases, windows, totals } = rec.finish()
  const client = assessClient(phases, o, elu.utilization, rec.peakInFlight)
  const result = {
    tool: 'chopper-loadgen',
    version: 1,
    mode: o.mode,
    latencyFrom: o.mode === 'open' ? 'intended-send-time' : 'actual-send-time',
    targets: o.targets.map((u) => u.origin),
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    wallMs: finishedAt - startedAt,
    aborted: Boolean(o.signal && o.signal.aborted),
    options: {
      connections: o.connections,
      maxInFlight: o.maxInFlight,
      timeoutMs: o.timeoutMs,
      lagThresholdMs: o.lagThresholdMs,
      windowMs: o.windowMs
    },
    spec: specEcho(workload.spec),
    servers,
    totals,
    client,
    phases,
    windows,
    ...(stale !== null ? { staleReads: stale.summary() } : {})
  }
  log.info({ achievedRate: totals.achievedRate, p99: totals.latencyMs.p99, errors: totals.errorCount, heldRate: client.heldRate }, 'run finished')
  return result
}

/**
 * undici compiles its HTTP parser and V8 compiles the request path on first
 * use, which blocked the event loop for tens of ms right when the schedule
 * started. The first second's latencies then described the client, not the
 * server. So the client is warmed up against a throwaway in-process server.
 * The target sees no extra traffic.
 */
async function warmUp () {
  const server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => res.end('warm'))
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const pool = new Pool(`http://127.0.0.1:${server.address().port}`, { connections: 2 })
  try {
    await Promise.all([0, 1, 2, 3].map(async (i) => {
      const res = await pool.request({ method: i % 2 ? 'PUT' : 'GET', path: `/warm?key=${i}`, body: i % 2 ? 'x'.repeat(64) : undefined })
      for await (const chunk of res.body) void chunk.length // eslint-disable-line no-void
    }))
  } finally {
    await pool.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
}

/**
 * Did the client hold the schedule? Late sends mean the client (CPU, event
 * loop, in-flight cap) was the bottleneck, so the offered load was below the
 * target, whatever the server could have done.
 */
function assessClient (phases, o, utilization, peakInFlight) {
  const problems = []
  for (const p of phases) {
    if (o.mode === 'closed') {
      if (p.unsent > 0) problems.push(`phase ${p.name}: closed loop sent ${p.sent} of ${p.scheduled} scheduled requests; the ${p.unsent} never sent are invisible in its latencies (coordinated omission)`)
      continue
    }
    const s = p.schedule
    if (p.sent > 0 && s.lateShare > o.lateShareLimit) {
      const why = s.capHits > 0
        ? `the in-flight cap (maxInFlight ${o.maxInFlight}) held requests back ${s.capHits} times`
        : `the driver's event loop fell behind (${Math.round(utilization * 100)}% busy)`
      problems.push(`phase ${p.name}: client could not hold the rate: ${(s.lateShare * 100).toFixed(1)}% of requests were sent more than ${o.lagThresholdMs} ms late (max lag ${s.lagMs.max} ms); ${why}. Latencies still count from the scheduled times, but the server saw less than ${p.targetRate} req/s.`)
    }
    if (p.unsent > 0) problems.push(`phase ${p.name}: ${p.unsent} scheduled requests were not sent (run aborted)`)
  }
  return {
    heldRate: problems.length === 0,
    problems,
    peakInFlight,
    eventLoopUtilization: Math.round(utilization * 1000) / 1000
  }
}

/** Request bodies: slices of one seeded random alphanumeric buffer, so values differ without per-request allocation. */
function valueSource (workload) {
  const max = Math.max(0, ...workload.phases.map((p) => p.value.max))
  const buf = Buffer.alloc(2 * max + 1)
  const rng = createRng(deriveSeed(workload.seed, 'values'))
  const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
  for (let i = 0; i < buf.length; i++) buf[i] = alphabet.charCodeAt(rng.int(alphabet.length))
  return (req) => {
    const offset = Math.imul(req.seq + 1, 2654435761) >>> 0
    const start = offset % (max + 1)
    return buf.subarray(start, start + req.valueSize)
  }
}

function specEcho (spec) {
  return JSON.parse(JSON.stringify(spec, (k, v) => (typeof v === 'function' ? '[function]' : v)))
}

module.exports = { DEFAULT_OPTIONS, run, validateOptions }
