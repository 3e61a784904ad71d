'use strict'

const { sliceKey } = require('../../core/keyspace')
const { SliceMap } = require('../../core/slice-map')
const { serverLoads, imbalance } = require('../../core/assignment')
const { strategies } = require('../../controller/strategies')

/**
 * Closed-loop simulation: each period, the loads a strategy sees are the
 * weights of a fixed key set hashed (fingerprint32) into its current slices,
 * and the imbalance is measured on those real per-server loads.
 * 3 servers; 10 keys, of which 3 are hot (100 requests per period) and 7 cold (10).
 * The ideal is 370 / 3 per server; putting one hot key on each server is within 1.25.
 */
const servers = { a: { url: 'http://127.0.0.1:1/a' }, b: { url: 'http://127.0.0.1:1/b' }, c: { url: 'http://127.0.0.1:1/c' } }

function keySet (set) {
  return Array.from({ length: 10 }, (_, i) => ({ key: sliceKey(`set${set}-key-${i}`), weight: i < 3 ? 100 : 10 }))
}

/** Real imbalance before round 0 and after each of `rounds` rounds. */
function simulate (strategyName, keys, rounds, opts) {
  const strategy = strategies[strategyName]
  const loadsFor = (a) => {
    const map = new SliceMap(a)
    const loads = new Float64Array(a.slices.length)
    for (const { key, weight } of keys) loads[map.indexOf(key)] += weight
    return loads
  }
  let a = strategy.initial(servers, opts)
  const trace = []
  for (let r = 0; r <= rounds; r++) {
    const loads = loadsFor(a)
    trace.push(imbalance(serverLoads(a, loads)))
    if (r < rounds) a = strategy.rebalance(a, loads, opts)
  }
  return trace
}

describe('closed-loop convergence on a skewed key set', () => {
  test('one key set: chopper gets below 1.25 within 3 rounds and stays; consistent hashing stays far above', () => {
    // set 17: two hot keys share a server under both initial layouts
    const keys = keySet(17)
    // one server per slice at first (minReplicas 1), as the paper starts
    const chopper = simulate('chopper', keys, 10, { minReplicas: 1 })
    const ring = simulate('consistent-hash', keys, 10)
    expect(chopper[0]).toBeGreaterThan(2)
    // a standby replica per slice (minReplicas 2) starts lower and gets there too
    const standby = simulate('chopper', keys, 10, { minReplicas: 2 })
    expect(standby[0]).toBeLessThan(chopper[0])
    expect(standby.findIndex((x) => x < 1.25)).toBeLessThanOrEqual(3)
    for (const x of standby.slice(3)) expect(x).toBeLessThan(1.25)
    expect(chopper.findIndex((x) => x < 1.25)).toBeLessThanOrEqual(3)
    for (const x of chopper.slice(3)) expect(x).toBeLessThan(1.25)
    for (const x of ring) expect(x).toBeCloseTo(ring[0], 12) // static: never changes
    expect(ring[0]).toBeGreaterThan(1.9)
  })

  test('over 20 key sets, chopper ends below 1.25 in nearly all; consistent hashing in few', () => {
    // measured when written: chopper 19/20 below 1.25 after 10 rounds (set 1 ends at 1.30),
    // consistent-hash 3/20; median first round below 1.25 under chopper: 3
    const sets = Array.from({ length: 20 }, (_, i) => keySet(i))
    const chopper = sets.map((keys) => simulate('chopper', keys, 10))
    const ring = sets.map((keys) => simulate('consistent-hash', keys, 10))
    const endsBelow = (traces) => traces.filter((t) => t[t.length - 1] < 1.25).length
    expect(endsBelow(chopper)).toBeGreaterThanOrEqual(18)
    expect(endsBelow(ring)).toBeLessThanOrEqual(5)
    const firstBelow = chopper.map((t) => t.findIndex((x) => x < 1.25)).map((r) => (r < 0 ? Infinity : r)).sort((x, y) => x - y)
    expect(firstBelow[10]).toBeLessThanOrEqual(5)
    const mean = (traces) => traces.reduce((s, t) => s + t[t.length - 1], 0) / traces.length
    expect(mean(chopper)).toBeLessThan(mean(ring) - 0.3)
  })
})
