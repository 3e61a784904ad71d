'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const YAML = require('yaml')
const { main } = require('../../bench/experiments/run')
const { runScenario } = require('../../bench/experiments/harness')
const { validateScenario, loadScenario, scenarioNames } = require('../../bench/experiments/scenario')
const { CONTENDER_NAMES } = require('../../bench/experiments/contenders')
const { affinityOf, recoveryPeriods, controllerRecoveryPeriods } = require('../../bench/experiments/metrics')

// A tiny compute scenario: two 1 s phases with different hot keys, 2 servers at ~50 % of the modelled capacity.
const tiny = {
  experiment: { app: 'compute', servers: 2, periodMs: 250, capacity: { mode: 'model', computeMsPerMillionOps: 4 }, kind: 'rising', sloMs: 200 },
  workload: {
    name: 'tiny',
    seed: 7,
    defaults: { keys: { count: 6 }, distribution: 'uniform', mix: { get: 1 }, path: '/compute?key={key}&n=1000' },
    phases: [
      { name: 'a', duration: '1s', rate: 150, hot: { keys: [0], share: 0.5 } },
      { name: 'b', duration: '1s', rate: 250, hot: { keys: [3], share: 0.5 } }
    ]
  }
}

const LATENCY = ['p50', 'p90', 'p99', 'p99.9', 'mean', 'max']
const RATIOS = ['p50', 'p90', 'p99', 'p99.9', 'achievedRate', 'maxSustainedRate', 'meanImbalance', 'affinity', 'hitRate']

/** Every field the report reads, for one contender. */
function expectContenderFields (c, { kv, controller }) {
  expect(c.ok).toBe(true)
  for (const k of LATENCY) expect(typeof c.latencyMs[k]).toBe('number')
  expect(c.percentileCurve.length).toBeGreaterThan(5)
  for (const q of c.percentileCurve) expect(q).toEqual({ p: expect.any(Number), ms: expect.any(Number) })
  expect(c.throughput).toEqual(expect.objectContaining({ targetRate: expect.any(Number), achievedRate: expect.any(Number), scheduled: expect.any(Number), responses: expect.any(Number), errors: expect.any(Number), errorRate: expect.any(Number), errorsByClass: expect.any(Object) }))
  expect('maxSustainedRate' in c.throughput).toBe(true)
  expect(c.throughput.responses).toBe(c.throughput.scheduled)
  expect(c.throughput.errors).toBe(0)
  expect(typeof c.imbalance.mean).toBe('number')
  expect(c.imbalance.series.length).toBeGreaterThan(2)
  for (const w of c.imbalance.series) expect(Object.keys(w).sort()).toEqual(['imbalance', 'p99', 'phase', 'responses', 't'])
  expect(c.affinity).toBeGreaterThan(0)
  expect(c.affinity).toBeLessThanOrEqual(1)
  if (controller) {
    expect(c.churn.rounds.length).toBeGreaterThan(2)
    for (const r of c.churn.rounds) expect(r).toEqual(expect.objectContaining({ round: expect.any(Number), t: expect.any(Number), churnFraction: expect.any(Number), imbalance: expect.any(Number) }))
    expect(typeof c.churn.meanFraction).toBe('number')
  } else {
    expect(c.churn).toBeNull()
  }
  if (kv) {
    expect(c.cache.hits + c.cache.misses).toBeGreaterThan(0)
    expect(c.cache.hitRate).toBeGreaterThan(0)
  } else {
    expect(c.cache).toBeNull()
  }
  expect(c.recovery.length).toBe(c.phases.length - 1)
  for (const x of c.recovery) expect(Object.keys(x).sort()).toEqual(['controllerPeriods', 'periods', 'phase'])
  for (const p of c.phases) {
    expect(p).toEqual(expect.objectContaining({ name: expect.any(String), startS: expect.any(Number), durationS: expect.any(Number), targetRate: expect.any(Number), achievedRate: expect.any(Number), errors: 0, affinity: expect.any(Number), sustained: expect.any(Boolean), serverShare: expect.any(Object) }))
    for (const k of LATENCY) expect(typeof p.latencyMs[k]).toBe('number')
    expect('recoveryPeriods' in p).toBe(true)
  }
  expect(c.client).toEqual(expect.objectContaining({ heldRate: expect.any(Boolean), problems: expect.any(Array) }))
  expect(Object.keys(c.vsChopper).sort()).toEqual([...RATIOS].sort())
}

describe('experiments harness', () => {
  let dir
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-exp-')) })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

  test('npm run experiment on a tiny scenario: every contender runs, the JSON has every field, the HTML has the plots', async () => {
    const file = path.join(dir, 'tiny.yaml')
    fs.writeFileSync(file, YAML.stringify(tiny))
    const log = jest.spyOn(console, 'log').mockImplementation(() => {})
    const err = jest.spyOn(console, 'error').mockImplementation(() => {})
    try {
      await main([file, '--out', dir])
    } finally {
      log.mockRestore()
      err.mockRestore()
    }
    const doc = JSON.parse(fs.readFileSync(path.join(dir, 'tiny.json'), 'utf8'))
    expect(doc).toEqual(expect.objectContaining({ tool: 'chopper-experiments', command: expect.stringContaining('tiny.yaml'), environment: expect.objectContaining({ cpus: expect.any(Number), haproxy: expect.stringMatching(/HAProxy/) }), headline: expect.any(Array) }))
    expect(doc.scenarios).toHaveLength(1)
    const s = doc.scenarios[0]
    expect(s.experiment).toEqual(expect.objectContaining({ app: 'compute', periodMs: 250, capacity: expect.objectContaining({ mode: 'model' }) }))
    expect(s.contenders.map((c) => c.name)).toEqual(CONTENDER_NAMES)
    for (const c of s.contenders) expectContenderFields(c, { kv: false, controller: ['chopper', 'consistent-hash'].includes(c.name) })
    // Ratios are relative to Chopper; the HAProxy contenders carry their generated configuration.
    expect(s.contenders[0].vsChopper.p50).toBe(1)
    expect(s.contenders.find((c) => c.name === 'haproxy-bounded').haproxyConfig).toMatch(/hash-balance-factor 125/)
    // random(2) keeps no affinity; consistent hashing keeps all of it.
    expect(s.contenders.find((c) => c.name === 'consistent-hash').affinity).toBe(1)
    expect(s.contenders.find((c) => c.name === 'haproxy-random2').affinity).toBeLessThan(0.9)

    const html = fs.readFileSync(path.join(dir, 'tiny.html'), 'utf8')
    expect(html).toMatch(/^<!doctype html>/)
    expect(html).not.toMatch(/<script/)
    expect((html.match(/<svg /g) || []).length).toBe(3) // percentiles, imbalance, throughput vs latency
    for (const c of s.contenders) expect(html).toContain(c.label)
  })

  test('a kv-cache scenario reports cache hit rates and preloads its keys', async () => {
    const scenario = validateScenario({
      experiment: { app: 'kv-cache', servers: 2, periodMs: 250, preload: true, capacity: { mode: 'model', kvHitMs: 1, kvStoreMs: 2 } },
      workload: { seed: 3, defaults: { keys: { count: 20 }, mix: { get: 0.8, set: 0.2 }, value: 32, path: '/kv?key={key}' }, phases: [{ name: 'a', duration: '1s', rate: 120 }, { name: 'b', duration: '0.5s', rate: 120, distribution: { type: 'zipf', s: 1 } }] }
    }, 'tiny-kv')
    const r = await runScenario(scenario, { contenders: ['chopper', 'haproxy-random2'] })
    expect(r.contenders.map((c) => c.name)).toEqual(['chopper', 'haproxy-random2'])
    for (const c of r.contenders) {
      expect(c.preload).toEqual({ requests: 20, errors: 0 })
      expectContenderFields(c, { kv: true, controller: c.name === 'chopper' })
    }
  })

  test('the shipped scenarios are valid and cover the six experiments', () => {
    const names = scenarioNames()
    expect(names).toHaveLength(6)
    const loaded = names.map((n) => loadScenario(n))
    expect(loaded.map((s) => s.experiment.app)).toEqual(['kv-cache', 'kv-cache', 'kv-cache', 'kv-cache', 'compute', 'compute'])
    expect(loaded[5].experiment.kind).toBe('rising')
    expect(() => loadScenario('nope')).toThrow(/unknown scenario "nope"/)
    expect(() => validateScenario({ experiment: { app: 'x' }, workload: tiny.workload })).toThrow(/experiment\.app/)
    expect(() => validateScenario({ experiment: { typo: 1 }, workload: tiny.workload })).toThrow(/experiment\.typo/)
  })
})

describe('metrics', () => {
  test('affinity: the share of each key served by its usual server', () => {
    expect(affinityOf({ servers: ['a', 'b'], counts: { k1: [9, 1], k2: [0, 10] } })).toEqual({ usual: 19, total: 20 })
  })

  test('recovery: periods until the imbalance stays under the target', () => {
    const w = (t, imbalance) => ({ t, imbalance })
    const windows = [w(0, 2), w(1, 1.1), w(2, 2), w(3, 1.5), w(4, 1.1), w(5, 1.2), w(6, 1.1)]
    const opts = { periodMs: 1000, windowMs: 1000, target: 1.25 }
    expect(recoveryPeriods(windows, { startMs: 2000, durationMs: 5000 }, opts)).toBe(3)
    expect(recoveryPeriods(windows, { startMs: 0, durationMs: 2000 }, opts)).toBe(2) // under the target in the phase's last window
    expect(recoveryPeriods(windows, { startMs: 2000, durationMs: 2000 }, opts)).toBeNull()
  })

  test('controller recovery: counts rounds from the first one that covers a whole period of the new phase', () => {
    const r = (t, imbalance) => ({ t, imbalance })
    const rounds = [r(2.1, 1.1), r(2.6, 2.7), r(3.1, 2.0), r(3.6, 1.1), r(4.1, 1.2), r(4.6, 1.0)]
    expect(controllerRecoveryPeriods(rounds, { startMs: 2000, durationMs: 3000 }, { periodMs: 500, target: 1.25 })).toBe(4)
    expect(controllerRecoveryPeriods(rounds.slice(0, 4), { startMs: 2000, durationMs: 3000 }, { periodMs: 500, target: 1.25 })).toBe(4) // last round, nothing after it
    expect(controllerRecoveryPeriods([r(2.6, 2), r(3.1, 2)], { startMs: 2000, durationMs: 3000 }, { periodMs: 500, target: 1.25 })).toBeNull()
  })
})
