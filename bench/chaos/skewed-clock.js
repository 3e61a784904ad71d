'use strict'

/**
 * An injected clock for the chaos bench's clock faults, preloaded into an app
 * server (`node -r bench/chaos/skewed-clock.js bin/appserver.js`): it
 * replaces `performance.now()` and `Date.now()`, which the lease checks
 * (appserver-lib/shard-guard.js) and kv-cache's holds read. It runs true
 * until the process gets SIGUSR2; then it reads `{ rate, stepMs }` from the
 * JSON file named by CHOPPER_CLOCK_FILE and, from that moment, runs `rate`
 * times as fast as real time, `stepMs` ahead. Each signal starts from the
 * clock's current reading, so a clock never goes back. Timers still fire
 * on real time, as they would on a host whose clock is off.
 */
const fs = require('node:fs')
const { performance } = require('node:perf_hooks')

const file = process.env.CHOPPER_CLOCK_FILE
if (file) {
  const realPerf = performance.now.bind(performance)
  const realDate = Date.now
  let base = { real: 0, perf: 0, date: 0, rate: 1 } // at real perf time `real`, the clocks read perf and date
  let skewed = false
  const perfNow = () => (skewed ? base.perf + (realPerf() - base.real) * base.rate : realPerf())
  // Date.now() is an integer (code turns it into a BigInt, say): so is its skewed reading.
  const dateNow = () => (skewed ? Math.floor(base.date + (realPerf() - base.real) * base.rate) : realDate())
  performance.now = perfNow
  globalThis.performance.now = perfNow
  Date.now = dateNow
  process.on('SIGUSR2', () => {
    let spec
    try {
      spec = JSON.parse(fs.readFileSync(file, 'utf8'))
    } catch (err) {
      process.stderr.write(`skewed-clock: cannot read ${file}: ${err.message}\n`)
      return
    }
    const rate = Number.isFinite(spec.rate) && spec.rate > 0 ? spec.rate : 1
    const stepMs = Number.isFinite(spec.stepMs) && spec.stepMs > 0 ? spec.stepMs : 0
    const perf = perfNow()
    const date = dateNow()
    base = { real: realPerf(), perf: perf + stepMs, date: date + stepMs, rate }
    skewed = true
    process.stderr.write(JSON.stringify({ level: 40, time: realDate(), msg: 'skewed-clock: clock changed', rate, stepMs }) + '\n')
  })
}
