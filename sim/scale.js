'use strict'

const { strategies } = require('../controller/strategies')
const { simulate } = require('./cluster')

/**
 * The committed scale set (issue 14, item 3): every registered strategy at
 * each cluster size, 100 slices per server, on a skewed, shifting workload.
 */
const RATE_SCALE = 100

/**
 * The strategies run: every registered one with its defaults, plus chopper
 * with room to split. Its default maxSlices (65,536) is below the 100,000
 * slices a 1,000-server cluster starts with, so by default it can never split
 * a hot slice at that scale.
 */
const SCALE_RUNS = Object.freeze([
  ...Object.keys(strategies).map((strategy) => Object.freeze({ label: strategy, strategy, strategyOptions: Object.freeze({}) })),
  Object.freeze({ label: 'chopper maxSlices=4x', strategy: 'chopper', strategyOptions: 'maxSlices=4x' }),
  // the paper's stop rule alone, without the mean ceiling (the default since it has a noise floor):
  // it leaves the hottest server up to moveRatio x the mean when there are many servers
  Object.freeze({ label: 'chopper moveMeanRatio=0', strategy: 'chopper', strategyOptions: Object.freeze({ moveMeanRatio: 0 }) })
])

const SCALE_DEFAULTS = Object.freeze({
  sizes: Object.freeze([100, 1000, 10000]),
  runs: SCALE_RUNS,
  slicesPerServer: 100,
  periodMs: 1000,
  phases: 3,
  periodsPerPhase: 10,
  seed: 1
})

/**
 * The skewed, shifting workload for `servers` servers: 100 keys per server,
 * 70 % of requests uniform over them, 30 % over a hot set of `servers` keys
 * (each hot key 0.3x a server's mean load, so consistent hashing piles a few
 * onto some servers), a different hot set in each phase. 10,000 req/s per
 * server (100 x servers req/s in the spec, times a rate scale of 100) keeps the Poisson noise of a period's per-server counts near 1 %,
 * so the measured imbalance is the layout's, not the sampling's.
 * @param {number} servers
 * @param {{ phases?: number, periodsPerPhase?: number, periodMs?: number }} [o]
 */
function scaleSpec (servers, { phases = SCALE_DEFAULTS.phases, periodsPerPhase = SCALE_DEFAULTS.periodsPerPhase, periodMs = SCALE_DEFAULTS.periodMs } = {}) {
  const count = 100 * servers
  return {
    name: `skewed-shifting-${servers}`,
    seed: 14,
    defaults: { keys: { count, prefix: 'k' }, distribution: 'uniform' },
    phases: Array.from({ length: phases }, (_, i) => ({
      name: `hot-set-${i + 1}`,
      duration: (periodsPerPhase * periodMs) / 1000,
      rate: 100 * servers, // x RATE_SCALE in the run: loadgen caps a spec at 1,000,000 req/s
      // hot set i: every 100th key, offset by i * 7 (disjoint sets)
      hot: { keys: Array.from({ length: servers }, (_, j) => j * 100 + i * 7), share: 0.3 }
    }))
  }
}

/**
 * Run the scale set in fluid mode (per-period expected counts with Poisson
 * noise: at 10,000 servers x 10,000 req/s, per-request events are out of reach).
 * @param {object} [o] SCALE_DEFAULTS overrides, plus onRun(run), onProgress(label, done, total) and clock (see cluster.js)
 * @returns {{ settings: object, runs: object[] }}
 */
function runScaleSet (o = {}) {
  const s = { ...SCALE_DEFAULTS, ...o }
  const runs = []
  for (const servers of s.sizes) {
    const spec = scaleSpec(servers, s)
    for (const { label: name, strategy, strategyOptions: so } of s.runs) {
      // 'maxSlices=4x': four times the starting slice count (n x slicesPerServer)
      const strategyOptions = so === 'maxSlices=4x' ? { maxSlices: 4 * servers * s.slicesPerServer } : so
      const label = `${name} x ${servers}`
      const started = Date.now()
      const r = simulate(spec, {
        strategy,
        strategyOptions,
        servers,
        slicesPerServer: s.slicesPerServer,
        periodMs: s.periodMs,
        seed: s.seed,
        mode: 'fluid',
        rateScale: RATE_SCALE,
        onProgress: s.onProgress ? (d, t) => s.onProgress(label, d, t) : undefined,
        clock: s.clock
      })
      const run = { label: name, strategy, strategyOptions, servers, wallSeconds: Number(((Date.now() - started) / 1000).toFixed(1)), result: r }
      runs.push(run)
      if (s.onRun) s.onRun(run)
    }
  }
  return { settings: { ...s, onRun: undefined, onProgress: undefined, clock: undefined }, runs }
}

module.exports = { SCALE_DEFAULTS, SCALE_RUNS, RATE_SCALE, scaleSpec, runScaleSet }
