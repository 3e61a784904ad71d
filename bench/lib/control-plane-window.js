'use strict'

/**
 * Measurement windows for bench/control-plane.js's children: a latency
 * reservoir (fixed memory however many samples) and this process's CPU time
 * and event-loop delay since the window was last reset.
 */
const { monitorEventLoopDelay, performance } = require('node:perf_hooks')

/** Uniform reservoir sample of at most `size` values (Algorithm R), with exact count and max. */
class Reservoir {
  constructor (size = 100000) {
    this.values = new Float64Array(size)
    this.reset()
  }

  reset () {
    this.count = 0
    this.max = 0
    this.sum = 0
  }

  record (v) {
    this.count++
    this.sum += v
    if (v > this.max) this.max = v
    if (this.count <= this.values.length) this.values[this.count - 1] = v
    else {
      const j = Math.floor(Math.random() * this.count)
      if (j < this.values.length) this.values[j] = v
    }
  }

  /** The sample itself and how many values it stands for. */
  sample () {
    return { count: this.count, values: this.values.slice(0, Math.min(this.count, this.values.length)) }
  }

  /** `{ count, mean, p50, p99, max }` in the recorded unit (null figures when empty). */
  summary () {
    const n = Math.min(this.count, this.values.length)
    if (n === 0) return { count: 0, mean: null, p50: null, p99: null, max: null }
    const sorted = this.values.slice(0, n).sort()
    const q = (p) => sorted[Math.min(n - 1, Math.floor(p * n))]
    return { count: this.count, mean: round3(this.sum / this.count), p50: round3(q(0.5)), p99: round3(q(0.99)), max: round3(this.max) }
  }
}

/**
 * This process's CPU and event-loop delay over a window. `read()` gives
 * cumulative CPU (µs) and wall time (ms) so a parent can subtract any two
 * readings, and the event-loop delay percentiles (ms) since the last reset.
 */
class ProcessWindow {
  constructor ({ resolutionMs = 5 } = {}) {
    this.loop = monitorEventLoopDelay({ resolution: resolutionMs })
    this.loop.enable()
  }

  reset () {
    this.loop.reset()
  }

  read () {
    const { user, system } = process.cpuUsage()
    const ms = (ns) => (Number.isFinite(ns) && this.loop.count > 0 ? round3(ns / 1e6) : null)
    return {
      cpuUs: user + system,
      wallMs: performance.now(),
      rssMB: Math.round(process.memoryUsage.rss() / 2 ** 20),
      eventLoop: { p50: ms(this.loop.percentile(50)), p99: ms(this.loop.percentile(99)), max: ms(this.loop.max), samples: this.loop.count }
    }
  }

  close () {
    this.loop.disable()
  }
}

/**
 * Percentiles over several processes' samples (`{ count, values }` each):
 * each value stands for count / values.length of its process's values.
 * @returns {{ count, p50, p99, max }}
 */
function mergedPercentiles (samples) {
  const all = []
  let count = 0
  for (const s of samples) {
    if (!s || s.values.length === 0) continue
    count += s.count
    const w = s.count / s.values.length
    for (const v of s.values) all.push([v, w])
  }
  if (all.length === 0) return { count: 0, p50: null, p99: null, max: null }
  all.sort((a, b) => a[0] - b[0])
  const q = (p) => {
    let acc = 0
    for (const [v, w] of all) if ((acc += w) >= p * count) return round3(v)
    return round3(all[all.length - 1][0])
  }
  return { count, p50: q(0.5), p99: q(0.99), max: round3(all[all.length - 1][0]) }
}

/** Percent of one core used between two ProcessWindow readings. */
function cpuShare (before, after) {
  const wallUs = (after.wallMs - before.wallMs) * 1000
  return wallUs > 0 ? round3(100 * (after.cpuUs - before.cpuUs) / wallUs) : null
}

function round3 (x) {
  return Math.round(x * 1000) / 1000
}

module.exports = { Reservoir, ProcessWindow, cpuShare, mergedPercentiles, round3 }
