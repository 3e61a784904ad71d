'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const YAML = require('yaml')
const { main } = require('../../bench/experiments/run')
const { runScenario } = require('../../bench/experiments/harness')
const { validateScenario, loadScenario, scenarioNames, warmupWorkload, WARMUP_KEYS, scaleRate, modelledCapacity } = require('../../bench/experiments/scenario')
const { CONTENDER_NAMES } = require('../../bench/experiments/contenders')
const { affinityOf, recoveryPeriods, controllerRecoveryPeriods, errorsOf } = require('../../bench/experiments/metrics')
const { headline, renderReport } = require('../../bench/experiments/report')
const { defaults: kvDefaults } = require('../../apps/kv-cache/options')

const CONTROLLED = ['chopper', 'chopper-client', 'chopper-lc', 'chopper-single', 'chopper-hot-only', 'consistent-hash']

// A tiny compute scenario: two 1 s phases with different hot keys, 2 servers at ~50 % of the modelled capacity.
const tiny = {
  experiment: { app: 'compute', servers: 2, periodMs: 250, capacity: { mode: 'model', computeMsPerMillionOps: 4 }, kind: 'rising', sloMs: 200, warmupSeconds: 0.2 },
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
  // CPU per response by part (cpu-cost.js), read from /proc on Linux
  if (process.platform === 'linux') {
    for (const k of ['routerUs', 'appUs', 'storeUs', 'clientUs']) expect(c.cpu[k]).toBeGreaterThanOrEqual(0)
    expect(c.cpu.clientUs).toBeGreaterThan(0) // the load generator itself, from process.cpuUsage()
    expect(c.cpu.cores).toBeGreaterThan(0)
    expect(typeof c.cpu.saturated).toBe('boolean')
  }
  for (const k of LATENCY) expect(typeof c.latencyMs[k]).toBe('number')
  expect(c.percentileCurve.length).toBeGreaterThan(5)
  // per method: the counts add up to every response
  const methods = Object.values(c.latencyByMethod)
  expect(methods.reduce((a, m) => a + m.count, 0)).toBe(c.throughput.responses)
  for (const m of methods) for (const k of LATENCY) expect(typeof m[k]).toBe('number')
  // the time outside the app servers (their Server-Timing from the capacity model), for every response
  expect(c.outsideServerMs.count).toBe(c.throughput.responses)
  for (const k of LATENCY) expect(c.outsideServerMs[k]).toBeGreaterThan(0)
  expect(c.outsideServerMs.p50).toBeLessThan(c.latencyMs.p50)
  expect(Object.keys(c.outsideServerMs.byMethod)).toEqual(Object.keys(c.latencyByMethod))
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
    // every GET's answer named its write (loadgen/stale-reads.js), preloaded values included
    expect(c.staleReads).toEqual(expect.objectContaining({ checked: c.latencyByMethod.GET.count, unchecked: 0, stale: expect.any(Number) }))
    if (controller) expect(c.staleReads.stale).toBe(0) // Chopper's replicas are coherent
  } else {
    expect(c.cache).toBeNull()
    expect(c.staleReads).toBeNull()
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
  // Each app server ran in a process of its own, apart from the system under test's and the harness's.
  const pids = Object.values(c.processes.appServers)
  expect(pids).toHaveLength(c.servers.length)
  expect(new Set([...pids, c.processes.sut, process.pid]).size).toBe(pids.length + 2)
  // kv-cache's DynamoDB (dynalite) too, apart from the front ends
  if (kv) expect(new Set([...pids, c.processes.sut, process.pid, c.processes.dynamo]).size).toBe(pids.length + 3)
  else expect(c.processes.dynamo).toBeUndefined()
  for (const srv of c.servers) {
    expect(srv.pid).toBe(c.processes.appServers[srv.id])
    expect(srv.capacity.served).toBeGreaterThan(0) // every request went through the modelled queue
  }
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
    expect(s.experiment.frontends).toBe(2)
    expect(s.modelledCapacity).toEqual(expect.objectContaining({ perServer: 250, total: 500 }))
    for (const c of s.contenders) expectContenderFields(c, { kv: false, controller: CONTROLLED.includes(c.name) })
    // Every contender got fresh processes.
    expect(new Set(s.contenders.map((c) => c.processes.sut)).size).toBe(CONTENDER_NAMES.length)
    // routers: 'shared' (the default): Chopper's controller and front ends in the SUT process
    for (const c of s.contenders) expect(c.processes.routers).toEqual([])
    // The load went to both Chopper front ends, or to the one HAProxy; the client's straight to the two app servers.
    for (const c of s.contenders) expect(c.targets).toHaveLength(CONTROLLED.includes(c.name) ? 2 : 1)
    expect(s.contenders.find((c) => c.name === 'chopper-client').targets).toEqual(s.contenders.find((c) => c.name === 'chopper-client').servers.map(() => expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/)))
    // The replica choice each Chopper contender's front ends said they make (/healthz): chopper-lc's own, the default for the rest.
    const choice = Object.fromEntries(s.contenders.map((c) => [c.name, c.replicaChoice]))
    expect(choice).toEqual({ chopper: 'p2c', 'chopper-client': 'p2c', 'chopper-lc': 'lc', 'chopper-single': 'p2c', 'chopper-hot-only': 'p2c', 'consistent-hash': 'p2c', 'haproxy-ch': null, 'haproxy-bounded': null, 'haproxy-random2': null })
    // The layout each run ended with, from its controller: slices tiling the keyspace, servers per slice;
    // without replication every slice has one server, with the default a standby as well.
    for (const c of s.contenders) {
      if (!CONTROLLED.includes(c.name)) { expect(c.finalLayout).toBeNull(); continue }
      const sl = c.finalLayout.slices
      expect(c.finalLayout.generation).toBeGreaterThan(0)
      expect(sl[0][0]).toBe(0)
      expect(sl[sl.length - 1][1]).toBe(2 ** 32)
      for (let i = 1; i < sl.length; i++) expect(sl[i][0]).toBe(sl[i - 1][1])
      for (const [, , n] of sl) expect(n).toBeGreaterThanOrEqual(1)
    }
    const servers = (name) => new Set(s.contenders.find((c) => c.name === name).finalLayout.slices.map((x) => x[2]))
    expect([...servers('chopper-single')]).toEqual([1])
    expect(Math.min(...servers('chopper'))).toBe(2) // 2 servers in the tiny scenario: every slice on both
    // The done-when checks that apply to any scenario were computed, with a pass or fail each.
    const checks = doc.headline.filter((h) => h.doneWhen)
    expect(checks.map((h) => h.id).sort()).toEqual(['client-p99-vs-random2', 'no-loss-vs-consistent-hash', 'p99-vs-random2'])
    for (const h of checks) expect(typeof h.met).toBe('boolean')
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
    expect(html).toMatch(/Done when \(issue 10; issue 39 for the Chopper client\): \d of 3 checks pass/)
    for (const c of s.contenders) expect(html).toContain(c.label)
    expect(html).toContain('CPU µs per request: router / app servers')
    // a contender whose processes kept most of the cores busy is marked in the table and listed under it
    const busy = JSON.parse(JSON.stringify(doc))
    Object.assign(busy.scenarios[0].contenders[0].cpu, { cores: 1.93, machineShare: 0.965, saturated: true })
    const marked = renderReport(busy)
    expect(marked).toContain('CPU-bound runs (more than 80 % of the cores busy)')
    expect(marked).toContain('kept 1.93 cores busy (97 % of the machine)')
  }, 180000) // nine contenders, each with fresh processes

  test('a kv-cache scenario reports cache hit rates and preloads its keys', async () => {
    const scenario = validateScenario({
      experiment: { app: 'kv-cache', servers: 2, periodMs: 250, preload: true, capacity: { mode: 'model', kvHitMs: 1, kvStoreMs: 2 }, warmupSeconds: 0.5, routers: 'separate' },
      workload: { seed: 3, defaults: { keys: { count: 20 }, mix: { get: 0.8, set: 0.2 }, value: 32, path: '/kv?key={key}' }, phases: [{ name: 'a', duration: '1s', rate: 120 }, { name: 'b', duration: '0.5s', rate: 120, distribution: { type: 'zipf', s: 1 } }] }
    }, 'tiny-kv')
    const lines = []
    const r = await runScenario(scenario, { contenders: ['chopper', 'haproxy-random2', 'chopper-client'], onProgress: (line) => lines.push(line) })
    expect(r.contenders.map((c) => c.name)).toEqual(['chopper', 'haproxy-random2', 'chopper-client'])
    // Chopper's writes are replicated (a standby for every slice): the primaries timed each
    // phase, and the progress line gives the means; HAProxy's servers replicate nothing.
    const holds = (c) => c.servers.reduce((a, s) => a + (s.kv['write_phase_count{"phase":"hold"}'] || 0), 0)
    expect(holds(r.contenders[0])).toBeGreaterThan(0)
    expect(holds(r.contenders[1])).toBe(0)
    // The client (chopper-client) routes among the replicas itself: its writes were replicated too, and it served no stale read.
    expect(holds(r.contenders[2])).toBeGreaterThan(0)
    expect(r.contenders[2].staleReads.stale).toBe(0)
    // kvRun: the same counters over the measured run alone. The preload's 20 writes (one per key,
    // each replicated) held too, so the whole run's holds exceed the measured run's by at least them.
    const runHolds = (c) => c.servers.reduce((a, s) => a + (s.kvRun['write_phase_count{"phase":"hold"}'] || 0), 0)
    expect(runHolds(r.contenders[0])).toBeGreaterThan(0)
    expect(holds(r.contenders[0]) - runHolds(r.contenders[0])).toBeGreaterThanOrEqual(20)
    expect(lines.find((l) => l.includes(': chopper: '))).toContain(`replicated writes (${runHolds(r.contenders[0])})`)
    expect(lines.find((l) => l.includes(': chopper: '))).toMatch(/replicated writes \(\d+\): hold [\d.]+ \/ store [\d.]+ \/ release [\d.]+ ms mean/)
    expect(lines.find((l) => l.includes(': haproxy-random2: '))).not.toMatch(/replicated writes/)
    for (const c of r.contenders) {
      expect(c.preload).toEqual({ requests: 20, errors: 0 })
      // the JIT warm-up: half the first phase's rate for 0.5 s, every request answered, none counted in the run
      expect(c.warmup.requests).toBe(30)
      expect(c.warmup.responses).toBe(30)
      expect(c.throughput.scheduled).toBe(180)
      expectContenderFields(c, { kv: true, controller: c.name !== 'haproxy-random2' })
      // routers: 'separate': Chopper's controller and each front end in a process of its own, apart from every other (the client: the controller alone)
      const routers = c.processes.routers
      expect(routers).toHaveLength({ chopper: 1 + r.experiment.frontends, 'chopper-client': 1, 'haproxy-random2': 0 }[c.name])
      expect(new Set([...routers, c.processes.sut, c.processes.dynamo, ...Object.values(c.processes.appServers)]).size).toBe(routers.length + 2 + c.servers.length)
    }
  })

  test('--rate-scale: rates times X, modelled service times over X, so the servers are as busy at X times the load', async () => {
    const scenario = validateScenario(tiny, 'tiny')
    const r = await runScenario(scenario, { contenders: ['chopper'], rateScale: 0.5 })
    expect(r.rateScale).toBe(0.5)
    expect(r.workload.phases.map((p) => p.rate)).toEqual([75, 125])
    expect(r.experiment.capacity.computeMsPerMillionOps).toBe(8)
    expect(r.experiment.sloMs).toBe(400)
    expect(r.modelledCapacity).toEqual(expect.objectContaining({ perServer: 125, total: 250 })) // the same utilisation
    const [c] = r.contenders
    expectContenderFields(c, { kv: false, controller: true })
    expect(c.throughput.scheduled).toBe(200) // 75 + 125 requests
    // each request kept its modelled server busy 8 ms (n = 1000), not 4: p50 at least that
    expect(c.latencyMs.p50).toBeGreaterThanOrEqual(8)
    const html = renderReport({ tool: 'chopper-experiments', environment: { cpus: 2, node: process.version }, scenarios: [r], headline: [] })
    expect(html).toContain('Rate scale 0.5')
    expect(html).not.toContain('Store latency')
    // a KV scenario with a store latency says so (the figure after the rate scale)
    const kv = { ...r, experiment: { ...r.experiment, app: 'kv-cache', storeLatencyMs: 10 } }
    expect(renderReport({ tool: 'chopper-experiments', environment: { cpus: 2, node: process.version }, scenarios: [kv], headline: [] }))
      .toMatch(/Store latency<\/b> \(<code>--store-latency-ms<\/code>\): dynalite answers every request 10 ms late \(after the rate scale\)/)
  })

  test('--frontend-options set every Chopper contender\'s front ends, except the replica choice chopper-lc makes its own', async () => {
    const scenario = validateScenario(tiny, 'tiny')
    const withRandom = { ...scenario, experiment: { ...scenario.experiment, frontendOptions: { replicaChoice: 'random' } } }
    const r = await runScenario(withRandom, { contenders: ['chopper', 'chopper-lc'] })
    expect(r.contenders.map((c) => [c.name, c.ok, c.replicaChoice])).toEqual([['chopper', true, 'random'], ['chopper-lc', true, 'lc']])
  })

  test('repeats: every contender runs N times in a rotated order, and its median run stands for it, with every run summarised', async () => {
    const scenario = validateScenario(tiny, 'tiny')
    const lines = []
    const r = await runScenario(scenario, { contenders: ['chopper', 'consistent-hash'], repeats: 2, onProgress: (line) => lines.push(line) })
    expect(r.repeats).toBe(2)
    // round 1 in the given order, round 2 rotated
    expect(lines.filter((l) => l.endsWith(' ...'))).toEqual([
      'tiny: chopper (run 1 of 2) ...', 'tiny: consistent-hash (run 1 of 2) ...',
      'tiny: consistent-hash (run 2 of 2) ...', 'tiny: chopper (run 2 of 2) ...'
    ])
    expect(r.contenders.map((c) => c.name)).toEqual(['chopper', 'consistent-hash'])
    for (const c of r.contenders) {
      expectContenderFields(c, { kv: false, controller: true })
      expect(c.repeats).toEqual({ count: 2, by: 'maxSustainedRate', chosen: expect.any(Number), runs: [expect.objectContaining({ run: 1, ok: true }), expect.objectContaining({ run: 2, ok: true })] })
      // the row is the chosen run's, all of it: its figures are that run's summary
      const chosen = c.repeats.runs[c.repeats.chosen - 1]
      expect(c.latencyMs.p99).toBe(chosen.p99)
      expect(c.throughput.achievedRate).toBe(chosen.achievedRate)
      // a rising rate with two runs: the worse one by the maximum sustained throughput
      const rates = c.repeats.runs.map((x) => (x.maxSustainedRate === null ? -1 : x.maxSustainedRate))
      expect(chosen.maxSustainedRate === null ? -1 : chosen.maxSustainedRate).toBe(Math.min(...rates))
      expect(lines).toContain(`tiny: ${c.name}: median of 2 runs by maxSustainedRate: run ${c.repeats.chosen} (${c.repeats.runs.map((x) => x.maxSustainedRate).join(', ')})`)
    }
    // ratios to Chopper are between the chosen runs
    expect(r.contenders[0].vsChopper.p99).toBe(1)
    const html = renderReport({ tool: 'chopper-experiments', environment: { cpus: 2, node: process.version }, scenarios: [r], headline: [] })
    expect(html).toContain('From 2 runs of every contender in every scenario')
    expect(html).toMatch(/2 runs per contender, the contenders in a rotated order in each round/)
    expect(html).toMatch(/Chopper[^<]*: run [12] of 2 \(maxSustainedRate of each run, in the order they ran: /)
  })

  test('scaleRate is the identity at 1 and refuses scales outside (0, 1]', () => {
    const s = loadScenario('1-kv-hot-keys')
    expect(scaleRate(s, 1)).toEqual({ experiment: s.experiment, workload: s.workload })
    const half = scaleRate(s, 0.5)
    expect(half.experiment.capacity).toEqual(expect.objectContaining({ kvHitMs: 6, kvStoreMs: 10 }))
    expect(half.experiment.preloadRate).toBe(s.experiment.preloadRate / 2)
    expect(half.experiment.storeLatencyMs).toBe(0)
    // a key's requests per cache TTL stay as in the scenario: the TTL (the app's default here) doubles too
    expect(half.experiment.appOptions.cacheTtlMs).toBe(2 * kvDefaults.cacheTtlMs)
    const ttl = validateScenario({ experiment: { ...s.experiment, appOptions: { cacheTtlMs: 3000, spawnRedis: false } }, workload: s.workload }, 'short-ttl')
    expect(scaleRate(ttl, 0.25).experiment.appOptions).toEqual({ cacheTtlMs: 12000, spawnRedis: false })
    expect(scaleRate(loadScenario('5-compute-hot-keys'), 0.5).experiment.appOptions).toEqual({})
    const slow = validateScenario({ experiment: { ...s.experiment, storeLatencyMs: 5 }, workload: s.workload }, 'slow-store')
    expect(scaleRate(slow, 0.5).experiment.storeLatencyMs).toBe(10) // real time, scaled like the modelled times
    for (const bad of [-1, 2000, '5']) expect(() => validateScenario({ experiment: { ...s.experiment, storeLatencyMs: bad }, workload: s.workload }, 'bad')).toThrow(/invalid experiment.storeLatencyMs/)
    expect(half.workload.phases.map((p) => p.rate)).toEqual(s.workload.phases.map((p) => p.rate / 2))
    expect(modelledCapacity(half.experiment, half.workload).total).toBe(modelledCapacity(s.experiment, s.workload).total / 2)
    for (const bad of [0, -1, 1.5, NaN, '0.5']) expect(() => scaleRate(s, bad)).toThrow(/invalid rateScale/)
  })

  test('a large key set without preload: GETs of keys nobody wrote count as misses, not errors', async () => {
    const scenario = validateScenario({
      experiment: { app: 'kv-cache', servers: 2, periodMs: 250, missingKeys: 'miss', capacity: { mode: 'model', kvHitMs: 1, kvStoreMs: 2 }, warmupSeconds: 0 },
      workload: { seed: 9, defaults: { keys: { count: 100000 }, distribution: { type: 'zipf', s: 1.1 }, mix: { get: 0.9, set: 0.1 }, value: 32, path: '/kv?key={key}' }, phases: [{ name: 'a', duration: '1s', rate: 150 }] }
    }, 'tiny-large')
    const r = await runScenario(scenario, { contenders: ['chopper'] })
    const c = r.contenders[0]
    expect(c.ok).toBe(true)
    expect(c.preload).toBeNull()
    expect(c.warmup).toBeNull() // warmupSeconds 0
    expect(c.throughput.notFound).toBeGreaterThan(0)
    expect(c.throughput.errors).toBe(0)
    expect(c.cache.misses).toBeGreaterThanOrEqual(c.throughput.notFound)
  })

  test('the shipped scenarios are valid: the six experiments and issue 10\'s three, each within 35 s of load', () => {
    const names = scenarioNames()
    expect(names).toHaveLength(9)
    const loaded = names.map((n) => loadScenario(n))
    expect(loaded.map((s) => s.experiment.app)).toEqual(['kv-cache', 'kv-cache', 'kv-cache', 'kv-cache', 'compute', 'compute', 'kv-cache', 'compute', 'kv-cache'])
    expect(loaded[5].experiment.kind).toBe('rising')
    for (const s of loaded) expect(s.workload.phases.reduce((a, p) => a + p.duration, 0)).toBeLessThanOrEqual(35)
    expect(loaded[6].workload.phases[0].keys.count).toBeGreaterThanOrEqual(100000)
    expect(loaded[6].workload.phases[0].distribution.type).toBe('zipf')
    expect(loaded[6].experiment.missingKeys).toBe('miss')
    expect(new Set(loaded[7].workload.phases.map((p) => p.hot.keys.join())).size).toBe(loaded[7].workload.phases.length) // the hot set moves every phase
    expect(loaded[8].workload.phases.map((p) => p.rate)).toEqual([750, 825, 900]) // 100 % to 120 % of 750 req/s
    expect(() => validateScenario({ experiment: { missingKeys: 'ignore' }, workload: tiny.workload })).toThrow(/experiment\.missingKeys/)
    expect(() => loadScenario('nope')).toThrow(/unknown scenario "nope"/)
    expect(() => validateScenario({ experiment: { app: 'x' }, workload: tiny.workload })).toThrow(/experiment\.app/)
    expect(() => validateScenario({ experiment: { typo: 1 }, workload: tiny.workload })).toThrow(/experiment\.typo/)
    expect(() => validateScenario({ experiment: { warmupSeconds: -1 }, workload: tiny.workload })).toThrow(/experiment\.warmupSeconds/)
    expect(() => validateScenario({ experiment: { warmupRate: 0 }, workload: tiny.workload })).toThrow(/experiment\.warmupRate/)
    expect(() => validateScenario({ experiment: { routers: 'threads' }, workload: tiny.workload })).toThrow(/experiment\.routers: expected 'separate' or 'shared'/)
    // the warm-up runs the first phase's path and mix at the given share of its rate, on keys no scenario uses
    for (const s of loaded) {
      const w = warmupWorkload(s.workload, 2, 0.5)
      expect(w.phases).toHaveLength(1)
      expect(w.phases[0].rate).toBe(s.workload.phases[0].rate / 2)
      expect(w.phases[0].mix).toEqual(s.workload.phases[0].mix)
      expect(w.phases[0].path).toBe(s.workload.phases[0].path)
      expect(w.phases[0].keys.prefix).toBe(WARMUP_KEYS.prefix)
      for (const p of s.workload.phases) expect((p.keys.prefix || '').startsWith(WARMUP_KEYS.prefix)).toBe(false)
    }
  })
})

describe('counterDelta and replicationLine: the app servers\' kv counters over the measured run', () => {
  const { counterDelta, replicationLine } = require('../../bench/experiments/harness')
  test('after minus before, counter by counter; a counter new since counts from 0; null without after', () => {
    expect(counterDelta({ a: 5, 'b_ms{"phase":"hold"}': 10.5 }, { a: 7, 'b_ms{"phase":"hold"}': 40.75, c: 3 })).toEqual({ a: 2, 'b_ms{"phase":"hold"}': 30.25, c: 3 })
    expect(counterDelta(null, { a: 1 })).toEqual({ a: 1 })
    expect(counterDelta({ a: 1 }, null)).toBe(null)
  })
  test('the progress line reads kvRun, not the whole run\'s kv', () => {
    const kv = (holds, ms) => ({ 'write_phase_count{"phase":"hold"}': holds, 'write_phase_ms{"phase":"hold"}': ms, 'write_phase_over_10ms{"phase":"hold"}': 0 })
    const servers = [{ kv: kv(50, 5000), kvRun: kv(40, 80) }, { kv: kv(10, 900), kvRun: kv(10, 20) }]
    expect(replicationLine(servers)).toMatch(/^, replicated writes \(50\): hold 2\.0 \//)
    expect(replicationLine([{ kv: kv(5, 50), kvRun: kv(0, 0) }])).toBe('')
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

describe('headline: issue 10\'s done-when checks from the data', () => {
  const contender = (name, { p90 = 10, p99 = 20, rate = 675, hitRate = null, sustained = null, recovery = [1, 2] } = {}) => ({
    name,
    ok: true,
    latencyMs: { p90, p99 },
    throughput: { achievedRate: rate, maxSustainedRate: sustained },
    cache: hitRate === null ? null : { hitRate },
    recovery: recovery.map((periods) => ({ periods, controllerPeriods: periods })),
    phases: [{ targetRate: 300, latencyMs: { p90 } }]
  })
  const scenario = (name, contenders, extra = {}) => ({ scenario: name, experiment: { periodMs: 500, imbalanceTarget: 1.25, sloMs: 100, kind: 'phases', ...extra }, contenders })
  const doc = (overrides = {}) => ({
    scenarios: [
      scenario('1-kv-hot-keys', [contender('chopper', { p99: 20, hitRate: 0.97, ...overrides.s1 }), contender('consistent-hash', { p90: 5000, p99: 9000 }), contender('haproxy-bounded', { p99: 30, hitRate: 0.92 }), contender('haproxy-random2', { p99: 25 })]),
      scenario('5-compute-hot-keys', [contender('chopper', { p90: 8, p99: 20, ...overrides.s5 }), contender('consistent-hash', { p90: 3500, p99: 9000 }), contender('haproxy-bounded', { p99: 30 }), contender('haproxy-random2', { p99: 14 })]),
      { ...scenario('6-compute-rising-rate', [contender('chopper', { sustained: 700, ...overrides.s6 }), contender('consistent-hash', { sustained: 400 }), contender('haproxy-random2', { p99: 20 })], { kind: 'rising' }), modelledCapacity: { total: 750 } }
    ]
  })
  const byId = (d) => Object.fromEntries(headline(d).filter((h) => h.doneWhen).map((h) => [h.id, h.met]))

  test('every check passes on data that meets every goal', () => {
    expect(byId(doc())).toEqual({
      '1-kv-hot-keys-p99-vs-bounded': true,
      '5-compute-hot-keys-p99-vs-bounded': true,
      '1-kv-hot-keys-hit-rate-vs-bounded': true,
      '5-compute-hot-keys-p90': true,
      '6-compute-rising-rate-max-sustained': true,
      'p99-vs-random2': true,
      'no-loss-vs-consistent-hash': true,
      '1-kv-hot-keys-recovery': true,
      '5-compute-hot-keys-recovery': true
    })
  })

  test('each check fails when its own figure misses', () => {
    expect(byId(doc({ s1: { p99: 31 } }))).toMatchObject({ '1-kv-hot-keys-p99-vs-bounded': false, 'p99-vs-random2': true })
    expect(byId(doc({ s1: { hitRate: 0.9 } }))['1-kv-hot-keys-hit-rate-vs-bounded']).toBe(false)
    expect(byId(doc({ s5: { p90: 36 } }))['5-compute-hot-keys-p90']).toBe(false) // 3500 / 36 < 100
    expect(byId(doc({ s6: { sustained: 670 } }))['6-compute-rising-rate-max-sustained']).toBe(false) // < 675
    expect(byId(doc({ s6: { sustained: null } }))['6-compute-rising-rate-max-sustained']).toBe(false)
    expect(byId(doc({ s5: { p99: 22 } }))).toMatchObject({ 'p99-vs-random2': false, '5-compute-hot-keys-p99-vs-bounded': true }) // 22 > 1.5 × 14
    expect(byId(doc({ s6: { sustained: 390 } }))['no-loss-vs-consistent-hash']).toBe(false)
    expect(byId(doc({ s1: { p99: 9600 } }))['no-loss-vs-consistent-hash']).toBe(false) // beyond the 5 % tolerance
    expect(byId(doc({ s1: { rate: 600 } }))['no-loss-vs-consistent-hash']).toBe(false)
    expect(byId(doc({ s1: { recovery: [1, 3] } }))['1-kv-hot-keys-recovery']).toBe(false)
    expect(byId(doc({ s5: { recovery: [null, 1] } }))['5-compute-hot-keys-recovery']).toBe(false)
  })

  test('stale reads: a reference line summed over the KV scenarios, not a check', () => {
    const d = doc()
    const stale = (c, stale) => Object.assign(c, { label: c.name, staleReads: { checked: 100, stale, share: stale / 100 } })
    const s1 = d.scenarios[0]
    stale(s1.contenders[0], 0)
    stale(s1.contenders[2], 37)
    const h = headline(d).find((x) => x.id === 'stale-reads')
    expect(h).toMatchObject({ met: null, value: { chopper: 0, 'haproxy-bounded': 37 }, text: 'chopper 0 of 100, haproxy-bounded 37 of 100' })
    expect(h.doneWhen).toBeFalsy()
    expect(headline(doc()).find((x) => x.id === 'stale-reads')).toBeUndefined() // no KV run checked
  })

  test('chopper-lc: a reference line of its p99 and ratios where it ran, not a check, and no change to the checks', () => {
    const d = doc()
    d.scenarios[0].contenders.push(contender('chopper-lc', { p99: 24 }))
    d.scenarios[1].contenders.push(contender('chopper-lc', { p99: 15 }))
    const h = headline(d).find((x) => x.id === 'chopper-lc')
    expect(h).toMatchObject({ met: null, value: { '1-kv-hot-keys': 24, '5-compute-hot-keys': 15 } })
    expect(h.text).toBe('1: 24 ms (1.2×, 0.8×, 0.96×); 5: 15 ms (0.75×, 0.5×, 1.07×)')
    expect(h.doneWhen).toBeFalsy()
    expect(byId(d)).toEqual(byId(doc())) // the checks are Chopper's (p2c), whatever chopper-lc did
    expect(headline(doc()).find((x) => x.id === 'chopper-lc')).toBeUndefined()
  })

  test('the HTML shows the checks as a table with pass or FAIL', () => {
    const d = { ...doc({ s1: { p99: 31 } }), environment: {}, command: 'x', scenarios: [] }
    d.headline = headline(doc({ s1: { p99: 31 } }))
    const html = renderReport(d)
    expect(html).toMatch(/Done when \(issue 10\): 8 of 9 checks pass/)
    expect((html.match(/>pass</g) || []).length).toBe(8)
    expect((html.match(/>FAIL</g) || []).length).toBe(1)
  })
})

describe('errorsOf', () => {
  test('with missingKeys: miss, 404s are not-found reads, not errors', () => {
    const x = { errorCount: 7, errors: { '4xx': 6, '5xx': 1 }, status: { 200: 90, 404: 5, 421: 1, 503: 1 } }
    expect(errorsOf(x, { missingKeys: 'miss' })).toEqual({ count: 2, byClass: { '4xx': 1, '5xx': 1 }, notFound: 5 })
    expect(errorsOf(x, { missingKeys: 'error' })).toEqual({ count: 7, byClass: { '4xx': 6, '5xx': 1 }, notFound: 0 })
  })
})
