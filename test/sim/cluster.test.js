'use strict'

const { simulate, refine } = require('../../sim/cluster')
const { loadScenario } = require('../../bench/experiments/scenario')
const { getStrategy } = require('../../controller/strategies')

/** 4 servers, 200 keys, 4 hot keys taking 40 % of requests (each 40 % of a server's share). */
const hotSpec = (phases = 1) => ({
  name: 'tiny-hot',
  seed: 3,
  defaults: { keys: { count: 200, prefix: 'k-' }, distribution: 'uniform' },
  phases: Array.from({ length: phases }, (_, i) => ({
    name: `hot-${i}`, duration: '8s', rate: 2000, hot: { keys: [0, 1, 2, 3].map((k) => k + 4 * i), share: 0.4 }
  }))
})
const base = { servers: 4, periodMs: 1000, server: { service: { type: 'exponential', mean: 1 } }, clock: () => 0 }

describe('sim cluster', () => {
  test('same seed gives identical JSON; another seed does not', () => {
    const a = simulate(hotSpec(2), { ...base, seed: 5 })
    const b = simulate(hotSpec(2), { ...base, seed: 5 })
    const c = simulate(hotSpec(2), { ...base, seed: 6 })
    expect(JSON.stringify(a)).toBe(JSON.stringify(b))
    expect(JSON.stringify(a)).not.toBe(JSON.stringify(c))
    expect(a.summary.requests).toBeGreaterThan(30000)
    expect(a.summary.latencyMs.count).toBe(a.summary.requests)
  })

  test('hot keys: consistent-hash stays imbalanced, chopper converges below 1.25 within a few periods', () => {
    const ch = simulate(hotSpec(), { ...base, strategy: 'consistent-hash' })
    // from the paper's layout (one slice per server): from the default finer one it needs no churn at all here
    const cp = simulate(hotSpec(), { ...base, strategy: 'chopper', strategyOptions: { initialSlicesPerServer: 1 } })
    const tail = (r) => r.periods.slice(4).map((p) => p.imbalance)
    expect(Math.min(...tail(ch))).toBeGreaterThan(1.25)
    expect(ch.summary.churnPerRound.max).toBe(0)
    expect(Math.max(...tail(cp))).toBeLessThan(1.25)
    expect(cp.phases[0].periodsToRecover).toBeLessThanOrEqual(4)
    expect(cp.summary.churnPerRound.max).toBeGreaterThan(0)
  })

  test('key churn: a key served after its slice moved pays the miss cost again', () => {
    // warm sets large enough that nothing is evicted: without moves every key misses once
    const opts = { ...base, server: { ...base.server, missCost: 3, warmKeys: 1000 } }
    const still = simulate(hotSpec(), { ...opts, strategy: 'consistent-hash' })
    const moved = simulate(hotSpec(), { ...opts, strategy: 'chopper' })
    expect(still.summary.misses).toBe(200)
    expect(moved.summary.misses).toBeGreaterThan(200)
    // the extra misses come in the periods right after rounds that moved keys
    const after = moved.periods.filter((p, i) => i > 0 && moved.periods[i - 1].churn > 0)
    expect(after.reduce((s, p) => s + p.misses, 0)).toBeGreaterThan(0)
  })

  test('fluid mode balances the same workload without per-request events', () => {
    // single owner: fluid mode splits replicated slices evenly, which converges slower than p2c (replica-routing.test.js)
    const r = simulate(hotSpec(), { ...base, strategy: 'chopper', mode: 'fluid', strategyOptions: { replicate: false } })
    expect(r.summary.latencyMs).toBeNull()
    expect(r.summary.events).toBe(0)
    expect(Math.abs(r.summary.requests - 16000)).toBeLessThan(800)
    expect(Math.max(...r.periods.slice(4).map((p) => p.imbalance))).toBeLessThan(1.25)
  })

  test('a shipped experiment scenario runs unchanged', () => {
    const s = loadScenario('1-kv-hot-keys')
    const r = simulate(s.workload, { ...base, servers: 3, periodMs: 500, durationMs: 4000, server: { service: { type: 'deterministic', mean: 4 } } })
    expect(r.periods).toHaveLength(8)
    expect(r.phases).toHaveLength(1)
    expect(Object.keys(r.serverShares)).toEqual(['s0', 's1', 's2'])
  })

  test('refine cuts slices without changing owners; options are validated by name', () => {
    const a = getStrategy('chopper').initial({ a: { url: 'http://x/a' }, b: { url: 'http://x/b' } }, { initialSlicesPerServer: 1 })
    const r = refine(a, 20)
    expect(r.slices).toHaveLength(20)
    expect(r.slices.filter((s) => s.servers[0] === 'a')).toHaveLength(10)
    expect(() => simulate(hotSpec(), { servers: 0 })).toThrow(/servers/)
    expect(() => simulate(hotSpec(), { strategy: 'nope' })).toThrow(/unknown strategy/)
    expect(() => simulate(hotSpec(), { periods: 3 })).toThrow(/unknown simulation option periods/)
  })
})
