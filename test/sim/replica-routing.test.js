'use strict'

const { simulate } = require('../../sim/cluster')

/** 4 servers, 200 keys, 4 hot keys taking 60 % of requests; one period, so only the initial layout serves. */
const spec = {
  name: 'replicated',
  seed: 3,
  defaults: { keys: { count: 200, prefix: 'k-' }, distribution: 'uniform' },
  phases: [{ name: 'hot', duration: '2s', rate: 2000, hot: { keys: [0, 1, 2, 3], share: 0.6 } }]
}
const base = { servers: 4, periodMs: 2000, strategy: 'chopper', server: { service: { type: 'exponential', mean: 1 } }, clock: () => 0 }
const standby = { replicate: true, minReplicas: 2 } // every slice on two servers from the start

describe('sim cluster: requests to replicated slices', () => {
  test('a replicated slice\'s requests are spread by the replica-choice policy on in-flight counts', () => {
    const single = simulate(spec, { ...base, strategyOptions: { replicate: false } })
    const first = simulate(spec, { ...base, strategyOptions: standby, replicaChoice: 'first' })
    const p2c = simulate(spec, { ...base, strategyOptions: standby })
    const lc = simulate(spec, { ...base, strategyOptions: standby, replicaChoice: 'lc' })
    expect(single.periods[0].replicatedSlices).toBeUndefined()
    expect(p2c.options.replicaChoice).toBe('p2c')
    // every slice is replicated, every request chose
    expect(p2c.periods[0].replicatedSlices).toBeGreaterThan(0)
    expect(p2c.periods[0].replicatedRequests).toBe(p2c.periods[0].requests)
    // 'first' always takes the primary: the single-owner routing, request for request
    expect(first.serverShares).toEqual(single.serverShares)
    // p2c and lc read the in-flight counts and spread the hot keys over both replicas
    expect(p2c.periods[0].imbalance).toBeLessThan(first.periods[0].imbalance - 0.2)
    expect(lc.periods[0].imbalance).toBeLessThan(first.periods[0].imbalance - 0.2)
    expect(p2c.summary.latencyMs.p99).toBeLessThan(first.summary.latencyMs.p99)
  })

  test('fluid mode splits a replicated slice evenly over its servers', () => {
    const single = simulate(spec, { ...base, mode: 'fluid', fluidNoise: false, strategyOptions: { replicate: false } })
    const rep = simulate(spec, { ...base, mode: 'fluid', fluidNoise: false, strategyOptions: { ...standby, minReplicas: 4 } })
    // on every server: its even quarter of the whole load
    for (const v of Object.values(rep.serverShares)) expect(v).toBeCloseTo(0.25, 6)
    expect(rep.periods[0].imbalance).toBeCloseTo(1, 6)
    expect(single.periods[0].imbalance).toBeGreaterThan(1.2)
  })

  test('same seed, same choices; the policy and the server ids are validated', () => {
    const a = simulate(spec, { ...base, strategyOptions: standby, seed: 9 })
    const b = simulate(spec, { ...base, strategyOptions: standby, seed: 9 })
    expect(JSON.stringify(a)).toBe(JSON.stringify(b))
    expect(() => simulate(spec, { ...base, replicaChoice: 'nope' })).toThrow(/replicaChoice/)
    expect(() => simulate(spec, { ...base, serverIds: ['a', 'a', 'b', 'c'] })).toThrow(/serverIds/)
    expect(() => simulate(spec, { ...base, servers: 3, serverIds: ['a', 'b'] })).toThrow(/servers/)
    const named = simulate(spec, { ...base, servers: undefined, serverIds: ['x', 'y'], strategyOptions: { replicate: false } })
    expect(Object.keys(named.serverShares)).toEqual(['x', 'y'])
  })
})
