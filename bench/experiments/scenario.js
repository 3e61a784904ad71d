'use strict'

const fs = require('node:fs')
const path = require('node:path')
const YAML = require('yaml')
const { validateSpec } = require('../../loadgen')
const { resolveCapacityOptions, computeServiceMs, kvServiceMs } = require('../lib/capacity')
const { defaults: computeDefaults } = require('../../apps/compute')
const { defaults: kvDefaults } = require('../../apps/kv-cache/options')
const { APPS } = require('../../apps')
const { InvalidArgumentError } = require('../../core/errors')

const SCENARIO_DIR = path.join(__dirname, 'scenarios')

/**
 * Every field of a scenario's `experiment` block and its default. The
 * `workload` block is a loadgen spec (loadgen/spec.js), unchanged.
 */
const EXPERIMENT_DEFAULTS = Object.freeze({
  title: undefined, // one line for the report; defaults to the workload's name
  app: 'compute', // 'compute' | 'kv-cache'
  kind: 'phases', // 'phases': a fixed rate per phase; 'rising': the rate climbs to find each contender's maximum sustained throughput
  servers: 3,
  frontends: 2, // the issue: measure with 2 front ends (uncoordinated replica choices), as the paper did
  routers: 'shared', // Chopper's controller and front ends in the system-under-test process; 'separate': each in a process of its own, as deployed (README: on two cores it did not help)
  periodMs: 500, // the controller's balancing period; the paper ran 5 s periods with 120 s phases (24 a phase), the scenarios 0.5 s with 8-10 s phases (16-20)
  strategyOptions: Object.freeze({}), // the chopper contender's strategy options (docs/algorithm.md); {} = the paper's
  loadMetric: 'cost', // what the Chopper contenders' controller balances: 'cost' (the default) or 'requests'
  capacity: Object.freeze({ mode: 'model' }), // bench/lib/capacity.js options: the model wraps each app server
  appOptions: Object.freeze({}), // more app options (kv-cache: cacheTtlMs, spawnRedis, ...)
  preload: false, // KV: set every key once before measuring, so gets find a value
  missingKeys: 'error', // KV: 'miss' counts a GET of a key nobody wrote (404) as a cache miss, not an error (large key sets, no preload)
  preloadRate: 300, // req/s of the preload (writes cost the most; stay under capacity)
  // KV: real time dynalite waits before answering each request (bench/lib/dynalite-child.js), for
  // DynamoDB's round trip from an instance (a few ms; dynalite on the loopback answers in under one).
  // Every contender's app servers wait it alike; the capacity model's kvStoreMs is the modelled server's busy time, not this.
  storeLatencyMs: 0,
  // JIT warm-up of each contender's fresh processes, not measured: this long of the first
  // phase's request mix, at this share of its rate, over keys outside the scenario's own
  // (warmupWorkload), so no measured key is cached by it. 0 s: none
  warmupSeconds: 2,
  warmupRate: 0.5,
  imbalanceTarget: 1.25, // recovery = periods until the per-period imbalance stays under this (paper 5.2.3's move ratio)
  sloMs: 100, // rising: a step counts as sustained when p99 <= sloMs ...
  sustainedShare: 0.95, // ... and at least this share of the offered rate completed in the step
  connections: 512, // client and front-end sockets per target, so a backlog at one server does not block the others' requests
  timeoutMs: 10000, // per request; a request not answered by then counts as a timeout error
  utilisation: undefined, // documentation: the intended share of the modelled capacity (shown in the report)
  paper: undefined // documentation: what the paper reported for this experiment
})

/**
 * Validate a scenario `{ experiment, workload }` (as parsed from YAML) and
 * return it normalised: experiment defaults merged, workload validated by loadgen.
 * @param {object} input
 * @param {string} [name] used when the workload has no name
 */
function validateScenario (input, name) {
  if (!input || typeof input !== 'object' || Array.isArray(input)) throw new InvalidArgumentError('invalid scenario: expected { experiment, workload }')
  for (const k of Object.keys(input)) if (!['experiment', 'workload'].includes(k)) throw new InvalidArgumentError(`invalid scenario.${k}: unknown field (expected experiment, workload)`)
  const raw = input.experiment ?? {}
  for (const k of Object.keys(raw)) if (!(k in EXPERIMENT_DEFAULTS)) throw new InvalidArgumentError(`invalid experiment.${k}: unknown field (expected one of ${Object.keys(EXPERIMENT_DEFAULTS).join(', ')})`)
  const e = { ...EXPERIMENT_DEFAULTS, ...Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined)) }
  const fail = (k, expected) => { throw new InvalidArgumentError(`invalid experiment.${k}: expected ${expected}, got ${JSON.stringify(e[k])}`) }
  if (!Object.hasOwn(APPS, e.app)) fail('app', Object.keys(APPS).join(' or '))
  if (!['phases', 'rising'].includes(e.kind)) fail('kind', "'phases' or 'rising'")
  for (const k of ['servers', 'frontends']) if (!Number.isInteger(e[k]) || e[k] < 1 || e[k] > 16) fail(k, 'an integer from 1 to 16')
  for (const k of ['periodMs', 'preloadRate', 'sloMs', 'connections', 'timeoutMs']) if (!(typeof e[k] === 'number' && e[k] > 0)) fail(k, 'a number > 0')
  if (!(typeof e.storeLatencyMs === 'number' && e.storeLatencyMs >= 0 && e.storeLatencyMs <= 1000)) fail('storeLatencyMs', 'a number of ms from 0 to 1000')
  if (!(typeof e.imbalanceTarget === 'number' && e.imbalanceTarget >= 1)) fail('imbalanceTarget', 'a number >= 1')
  if (!(typeof e.sustainedShare === 'number' && e.sustainedShare > 0 && e.sustainedShare <= 1)) fail('sustainedShare', 'a fraction in (0, 1]')
  if (typeof e.preload !== 'boolean') fail('preload', 'a boolean')
  if (!(typeof e.warmupSeconds === 'number' && e.warmupSeconds >= 0 && e.warmupSeconds <= 60)) fail('warmupSeconds', 'a number of seconds from 0 to 60')
  if (!(typeof e.warmupRate === 'number' && e.warmupRate > 0 && e.warmupRate <= 1)) fail('warmupRate', 'a fraction in (0, 1]')
  if (!['error', 'miss'].includes(e.missingKeys)) fail('missingKeys', "'error' or 'miss'")
  if (!e.appOptions || typeof e.appOptions !== 'object') fail('appOptions', 'an object')
  if (!e.strategyOptions || typeof e.strategyOptions !== 'object') fail('strategyOptions', 'an object')
  if (!['cost', 'requests'].includes(e.loadMetric)) fail('loadMetric', "'cost' or 'requests'")
  if (!['separate', 'shared'].includes(e.routers)) fail('routers', "'separate' or 'shared'")
  e.capacity = resolveCapacityOptions(e.capacity)
  const workload = validateSpec(input.workload)
  e.title = e.title ?? workload.name ?? name
  return { name: workload.name ?? name, experiment: e, workload }
}

/** Scenario names shipped in bench/experiments/scenarios, in run order. */
function scenarioNames () {
  return fs.readdirSync(SCENARIO_DIR).filter((f) => f.endsWith('.yaml')).map((f) => f.slice(0, -5)).sort()
}

/**
 * Load a shipped scenario by name (or a path to a YAML file).
 * @param {string} nameOrFile
 */
function loadScenario (nameOrFile) {
  const file = nameOrFile.includes('/') || nameOrFile.endsWith('.yaml') ? nameOrFile : path.join(SCENARIO_DIR, `${nameOrFile}.yaml`)
  if (!fs.existsSync(file)) throw new InvalidArgumentError(`unknown scenario ${JSON.stringify(nameOrFile)}: expected one of ${scenarioNames().join(', ')} or a .yaml path`)
  const name = path.basename(file, '.yaml')
  try {
    const s = validateScenario(YAML.parse(fs.readFileSync(file, 'utf8')), name)
    return { ...s, name, file: path.relative(process.cwd(), file) }
  } catch (err) {
    if (err instanceof InvalidArgumentError) err.message = `scenario ${file}: ${err.message}`
    throw err
  }
}

/**
 * The workload with every phase duration multiplied by `timeScale` (to fit a
 * time budget). The request rate is kept: only the length changes.
 */
function scaleWorkload (workload, timeScale) {
  if (!(typeof timeScale === 'number' && timeScale > 0)) throw new InvalidArgumentError(`invalid timeScale: expected a number > 0, got ${JSON.stringify(timeScale)}`)
  if (timeScale === 1) return workload
  return validateSpec({ ...workload, phases: workload.phases.map((p) => ({ ...p, duration: Math.max(0.2, p.duration * timeScale) })) })
}

/**
 * A one-phase workload that sets every key of the scenario once, in order,
 * so the measured gets do not 404 on keys nobody wrote.
 */
function preloadWorkload (workload, rate) {
  const p = workload.phases[0]
  const count = p.keys.list ? p.keys.list.length : p.keys.count
  return validateSpec({
    seed: workload.seed,
    name: `${workload.name || 'workload'}-preload`,
    phases: [{ name: 'preload', duration: Math.max(count / rate, 0.05), rate, keys: p.keys, distribution: 'sequential', hot: null, mix: { set: 1 }, value: p.value, path: p.path }]
  })
}

/** Keys the warm-up uses: never one of a scenario's own (their prefix is the workload's). */
const WARMUP_KEYS = Object.freeze({ count: 1000, prefix: 'chopper-warmup-' })

/**
 * The JIT warm-up before a contender's measured run (and its preload): the
 * first phase's path and request mix (so the same code paths run: reads,
 * writes, misses, fences), uniform over WARMUP_KEYS, at `rateShare` of the
 * first phase's rate for `seconds`. Its keys are none of the scenario's, so
 * it leaves no measured key cached; it is not measured.
 */
function warmupWorkload (workload, seconds, rateShare) {
  const p = workload.phases[0]
  return validateSpec({
    seed: workload.seed,
    name: `${workload.name || 'workload'}-warmup`,
    phases: [{ name: 'warmup', duration: seconds, rate: Math.max(1, p.rate * rateShare), keys: WARMUP_KEYS, distribution: 'uniform', hot: null, mix: p.mix, value: p.value, path: p.path }]
  })
}

/**
 * A scenario at `rateScale` times its request rates on servers `rateScale`
 * times slower: every phase's rate, the preload's rate and the offered load
 * scale by it, and the capacity model's service times, the rising-rate SLO
 * (`sloMs`), the per-request timeout and the KV cache's TTL (`cacheTtlMs`,
 * the scenario's or the app's default) by its inverse. Utilisation, the
 * queueing, the balancing periods per phase and the requests a key gets
 * within one TTL (so what expires from the caches) stay as they are;
 * latencies come out 1 / rateScale times longer, and the machine does
 * rateScale times the work. For a machine too slow to run the scenarios at full rate (the
 * report names the scale, and compares contenders within one run only).
 * @param {{ experiment, workload }} scenario validated
 * @param {number} rateScale > 0 and <= 1
 * @returns {{ experiment, workload }}
 */
function scaleRate ({ experiment, workload }, rateScale) {
  if (!(typeof rateScale === 'number' && rateScale > 0 && rateScale <= 1)) throw new InvalidArgumentError(`invalid rateScale: expected a number > 0 and <= 1, got ${JSON.stringify(rateScale)}`)
  if (rateScale === 1) return { experiment, workload }
  const c = experiment.capacity
  return {
    experiment: {
      ...experiment,
      capacity: resolveCapacityOptions({ ...c, computeMsPerMillionOps: c.computeMsPerMillionOps / rateScale, kvHitMs: c.kvHitMs / rateScale, kvStoreMs: c.kvStoreMs / rateScale }),
      sloMs: experiment.sloMs / rateScale,
      timeoutMs: Math.round(experiment.timeoutMs / rateScale),
      preloadRate: experiment.preloadRate * rateScale,
      storeLatencyMs: experiment.storeLatencyMs / rateScale,
      appOptions: experiment.app === 'kv-cache' ? { ...experiment.appOptions, cacheTtlMs: Math.round((experiment.appOptions.cacheTtlMs ?? kvDefaults.cacheTtlMs) / rateScale) } : experiment.appOptions
    },
    workload: validateSpec({ ...workload, phases: workload.phases.map((p) => ({ ...p, rate: p.rate * rateScale })) })
  }
}

/**
 * The modelled aggregate capacity (req/s) of a scenario's app servers for its
 * first phase's request mix (null outside model mode). Compute: from n in the
 * path. KV: with every GET a cache hit, so an upper bound (misses cost more).
 * @returns {{ perServer: number, total: number, serviceMs: number, basis: string }|null}
 */
function modelledCapacity (experiment, workload) {
  const c = experiment.capacity
  if (c.mode !== 'model') return null
  const p = workload.phases[0]
  let serviceMs
  let basis
  if (experiment.app === 'compute') {
    const m = /[?&]n=(\d+)/.exec(p.path || '')
    const n = m ? Number(m[1]) : computeDefaults.defaultN
    serviceMs = computeServiceMs(n, c)
    basis = `compute n = ${n}: ${serviceMs} ms a request`
  } else {
    const get = p.mix.get
    serviceMs = get * kvServiceMs('hit', c) + (1 - get) * kvServiceMs('write', c)
    basis = `KV, ${Math.round(get * 100)} % GETs, every GET a cache hit: ${round3(serviceMs)} ms a request on average`
  }
  const perServer = 1000 / serviceMs
  return { perServer: round3(perServer), total: round3(perServer * experiment.servers), serviceMs: round3(serviceMs), basis }
}

const round3 = (x) => Math.round(x * 1000) / 1000

module.exports = { round3, modelledCapacity, EXPERIMENT_DEFAULTS, SCENARIO_DIR, validateScenario, loadScenario, scenarioNames, scaleWorkload, scaleRate, preloadWorkload, warmupWorkload, WARMUP_KEYS }
