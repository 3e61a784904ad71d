'use strict'

const { imbalance } = require('../core/assignment')
const { createHistogram, summarize, encode, failureClass, statusClass, emptyErrors, errorTotal } = require('./stats')

const UNATTRIBUTED = '(none)'

/**
 * Accounting for one run: per phase (by the phase a request belongs to) and
 * per window (by the time its response completed, like wrk2's interval logs).
 *
 * Times are performance.now() milliseconds. Latencies go into the histograms
 * in integer microseconds. Only requests that got an HTTP response (any
 * status) have a latency. Timeouts and connection failures are counted as
 * errors.
 */
class Recorder {
  /**
   * @param {object} options
   * @param {import('./workload').Workload} options.workload
   * @param {number} options.windowMs
   * @param {number} options.lagThresholdMs
   * @param {string[]} options.servers server ids known in advance (idle ones count in imbalance)
   * @param {boolean} options.perKey keep per-key -> per-server counts
   */
  constructor ({ workload, windowMs, lagThresholdMs, servers, perKey }) {
    this.workload = workload
    this.windowMs = windowMs
    this.lagThresholdMs = lagThresholdMs
    this.knownServers = new Set(servers)
    this.perKey = perKey
    this.t0 = 0
    this.phases = workload.phases.map((p) => ({
      scheduled: p.requests,
      sent: 0,
      responses: 0,
      bytes: 0,
      responsesInWindow: 0, // completions inside the phase's wall-clock span: the achieved rate's numerator
      latency: createHistogram(),
      lag: createHistogram(),
      late: 0,
      capHits: 0,
      status: {},
      errors: emptyErrors(),
      servers: new Map(),
      keys: new Map()
    }))
    this.windows = []
    this.methods = new Map() // method -> latency histogram over the run (reads and writes differ in cost and path)
    // Latency minus the server's own time (its Server-Timing header), for responses that state it:
    // the time outside the server (client, router, network), per method as well
    this.outside = new Map() // method -> histogram
    this.inFlight = 0
    this.peakInFlight = 0
  }

  start (t0) {
    this.t0 = t0
  }

  /** A request left the client `lag` ms after its intended time. */
  sent (req, intended, sendAt) {
    const ph = this.phases[req.phase]
    ph.sent++
    const lag = Math.max(0, sendAt - intended)
    ph.lag.recordValue(Math.round(lag * 1000))
    if (lag > this.lagThresholdMs) ph.late++
    if (++this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight
  }

  /** The in-flight cap held a due request back. */
  capHit (phase) {
    this.phases[phase].capHits++
  }

  /**
   * An HTTP response was fully read.
   * @param {object} req
   * @param {number} origin latency origin: intended time (open loop) or send time (closed loop)
   * @param {number} end
   * @param {number} status
   * @param {string|undefined} servedBy X-Served-By
   * @param {number} [bytes] response body bytes
   * @param {number|null} [serverMs] the time the response says it spent in the server (Server-Timing), if it says
   */
  response (req, origin, end, status, servedBy, bytes = 0, serverMs = null) {
    this.inFlight--
    const ph = this.phases[req.phase]
    const w = this.window(end)
    const us = Math.max(1, Math.round((end - origin) * 1000))
    ph.responses++
    ph.bytes += bytes
    if (this.inPhaseSpan(req.phase, end)) ph.responsesInWindow++
    else this.countInWallPhase(end)
    ph.latency.recordValue(us)
    w.latency.recordValue(us)
    let m = this.methods.get(req.method)
    if (!m) this.methods.set(req.method, (m = createHistogram()))
    m.recordValue(us)
    if (serverMs !== null) {
      let o = this.outside.get(req.method)
      if (!o) this.outside.set(req.method, (o = createHistogram()))
      o.recordValue(Math.max(1, us - Math.round(serverMs * 1000)))
    }
    w.responses++
    ph.status[status] = (ph.status[status] || 0) + 1
    if (status >= 400) {
      const c = statusClass(status)
      ph.errors[c]++
      w.errors[c]++
    }
    const server = servedBy || UNATTRIBUTED
    ph.servers.set(server, (ph.servers.get(server) || 0) + 1)
    w.servers.set(server, (w.servers.get(server) || 0) + 1)
    if (this.perKey) {
      let m = ph.keys.get(req.key)
      if (!m) ph.keys.set(req.key, (m = new Map()))
      m.set(server, (m.get(server) || 0) + 1)
    }
  }

  /** The request failed without an HTTP response. */
  failure (req, end, err) {
    this.inFlight--
    const c = failureClass(err)
    this.phases[req.phase].errors[c]++
    this.window(end).errors[c]++
  }

  inPhaseSpan (phase, end) {
    const p = this.workload.phases[phase]
    const t = end - this.t0
    return t >= p.startMs && t < p.startMs + p.durationMs
  }

  // A response to phase A's request that completed during phase B counts toward B's achieved rate (wrk's req/s semantics).
  countInWallPhase (end) {
    const t = end - this.t0
    const p = this.workload.phases.find((q) => t >= q.startMs && t < q.startMs + q.durationMs)
    if (p) this.phases[p.index].responsesInWindow++
  }

  window (end) {
    const i = Math.max(0, Math.floor((end - this.t0) / this.windowMs))
    while (this.windows.length <= i) {
      this.windows.push({ latency: createHistogram(), responses: 0, errors: emptyErrors(), servers: new Map() })
    }
    return this.windows[i]
  }

  /** Server ids for imbalance: the known ones plus every one seen so far, sorted. */
  serverIds () {
    const ids = new Set(this.knownServers)
    for (const ph of this.phases) for (const id of ph.servers.keys()) ids.add(id)
    ids.delete(UNATTRIBUTED)
    return [...ids].sort()
  }

  /**
   * Summary of one window. Windows are final once `now` has passed their end.
   * @param {number} i
   * @param {string[]} [servers]
   */
  windowSummary (i, servers = this.serverIds()) {
    const w = this.windows[i]
    const startMs = i * this.windowMs
    const mid = startMs + this.windowMs / 2
    const phase = this.workload.phases.find((p) => mid >= p.startMs && mid < p.startMs + p.durationMs)
    const counts = countsFor(w.servers, servers)
    const attributed = Object.values(counts).reduce((a, b) => a + b, 0)
    return {
      index: i,
      t: startMs / 1000,
      phase: phase ? phase.name : null,
      responses: w.responses,
      latencyMs: summarize(w.latency),
      errors: { ...w.errors },
      servers: counts,
      unattributed: w.servers.get(UNATTRIBUTED) || 0,
      // Imbalance (paper 5.2): max/mean over servers; undefined for a window with no attributed responses.
      imbalance: attributed > 0 ? round(imbalance(counts)) : null
    }
  }

  /**
   * Final per-phase and per-window results.
   * @returns {{ servers: string[], phases: object[], windows: object[], totals: object }}
   */
  finish () {
    const servers = this.serverIds()
    const windows = this.windows.map((_, i) => this.windowSummary(i, servers))
    const total = { latency: createHistogram(), errors: emptyErrors(), servers: new Map(), status: {}, scheduled: 0, sent: 0, responses: 0, responsesInWindow: 0 }
    const phases = this.workload.phases.map((p, i) => {
      const ph = this.phases[i]
      total.latency.add(ph.latency)
      for (const [k, v] of Object.entries(ph.errors)) total.errors[k] += v
      for (const [k, v] of Object.entries(ph.status)) total.status[k] = (total.status[k] || 0) + v
      for (const [k, v] of ph.servers) total.servers.set(k, (total.servers.get(k) || 0) + v)
      for (const f of ['scheduled', 'sent', 'responses', 'responsesInWindow']) total[f] += ph[f]
      const inPhase = windows.filter((w) => w.phase === p.name && w.imbalance !== null)
      const counts = countsFor(ph.servers, servers)
      return {
        index: p.index,
        name: p.name,
        startMs: p.startMs,
        durationMs: p.durationMs,
        targetRate: p.rate,
        achievedRate: round(ph.responsesInWindow / (p.durationMs / 1000)),
        scheduled: ph.scheduled,
        sent: ph.sent,
        unsent: ph.scheduled - ph.sent,
        responses: ph.responses,
        bodyBytes: ph.bytes,
        latencyMs: summarize(ph.latency),
        status: ph.status,
        errors: ph.errors,
        errorCount: errorTotal(ph.errors),
        servers: counts,
        unattributed: ph.servers.get(UNATTRIBUTED) || 0,
        imbalance: Object.values(counts).some((n) => n > 0) ? round(imbalance(counts)) : null,
        // Mean of the per-window imbalances inside this phase (the paper's imbalance-over-time figures).
        meanImbalance: inPhase.length ? round(inPhase.reduce((a, w) => a + w.imbalance, 0) / inPhase.length) : null,
        schedule: {
          lagMs: summarize(ph.lag),
          late: ph.late,
          lateShare: ph.sent ? round(ph.late / ph.sent) : 0,
          capHits: ph.capHits
        },
        keys: this.perKey ? keyTable(ph.keys, servers) : undefined,
        histogram: encode(ph.latency)
      }
    })
    const durationS = this.workload.durationMs / 1000
    const inRun = windows.filter((w) => w.phase !== null && w.imbalance !== null)
    const totals = {
      scheduled: total.scheduled,
      sent: total.sent,
      responses: total.responses,
      targetRate: round(total.scheduled / durationS),
      achievedRate: round(total.responsesInWindow / durationS),
      latencyMs: summarize(total.latency),
      // per HTTP method, over every response of the run
      latencyByMethod: byMethod(this.methods),
      // latency minus the server's stated time (Server-Timing), over the responses that state it; null when none did
      outsideServerMs: this.outside.size ? outsideSummary(this.outside) : null,
      status: total.status,
      errors: total.errors,
      errorCount: errorTotal(total.errors),
      servers: countsFor(total.servers, servers),
      meanImbalance: inRun.length ? round(inRun.reduce((a, w) => a + w.imbalance, 0) / inRun.length) : null,
      histogram: encode(total.latency)
    }
    return { servers, phases, windows, totals }
  }
}

function countsFor (map, servers) {
  const out = {}
  for (const id of servers) out[id] = map.get(id) || 0
  return out
}

// Compact per-key table: server ids once, then one count array per key.
function keyTable (keys, servers) {
  const columns = [...servers]
  if ([...keys.values()].some((m) => m.has(UNATTRIBUTED))) columns.push(UNATTRIBUTED)
  const counts = {}
  for (const [key, m] of keys) counts[key] = columns.map((id) => m.get(id) || 0)
  return { servers: columns, counts }
}

/** Per method (sorted): count and latency percentiles of its histogram. */
function byMethod (histograms) {
  return Object.fromEntries([...histograms].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, h]) => [k, { count: h.totalCount, ...summarize(h) }]))
}

/** The time outside the server: over all methods, and per method. */
function outsideSummary (histograms) {
  const all = createHistogram()
  for (const h of histograms.values()) all.add(h)
  return { count: all.totalCount, ...summarize(all), byMethod: byMethod(histograms) }
}

const round = (x) => Math.round(x * 1e4) / 1e4

module.exports = { Recorder, UNATTRIBUTED }
