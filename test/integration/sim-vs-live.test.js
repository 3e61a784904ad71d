'use strict'

// Issue 14, "Done when": the simulator and the live cluster, on the same
// small scenario, give per-server shares of requests within 10 % of each
// other. Live: a real controller, one front end and three compute app
// servers on port 0, driven by loadgen's programmatic runner. Simulator: the
// same loadgen spec, the same strategy (consistent-hash, static, so the
// comparison is deterministic) and the same server ids. What ties them: the
// slice map the sim routes with, the key names and PMF it draws from (loadgen's
// own), and sliceKey hashing.

const { startLocalCluster } = require('../../cluster/local-cluster')
const { getStrategy } = require('../../controller/strategies')
const { run } = require('../../loadgen')
const { simulate } = require('../../sim/cluster')

/** Zipf over 200 keys: shares far from even, so a routing mix-up cannot pass. */
const spec = {
  name: 'sim-vs-live',
  seed: 14,
  phases: [{ name: 'zipf', duration: '6s', rate: 500, keys: { count: 200, prefix: 'user-' }, distribution: { type: 'zipf', s: 1 }, mix: { get: 1 }, path: '/compute?key={key}&n=1' }]
}

let cluster

afterEach(async () => {
  if (cluster) await cluster.close()
  cluster = null
})

test('simulator and live cluster: per-server shares agree within 10 %', async () => {
  cluster = await startLocalCluster({ app: 'compute', frontends: 1, servers: 3, strategy: 'consistent-hash', periodMs: 60000, port: 0 })
  const ids = cluster.servers.map((s) => s.id).sort()
  const live = cluster.controller.controller.assignment

  // the simulator starts from the layout the live controller holds
  const members = Object.fromEntries(ids.map((id) => [id, { url: live.servers[id].url }]))
  const simLayout = getStrategy('consistent-hash').initial(members)
  expect(simLayout.slices).toEqual(live.slices)

  const result = await run(spec, { target: cluster.frontends[0].url, servers: ids, perKey: false })
  const p = result.phases[0]
  expect(p.errorCount).toBe(0)
  expect(p.unattributed).toBe(0)
  expect(p.responses).toBe(3000)
  const liveShare = Object.fromEntries(ids.map((id) => [id, p.servers[id] / p.responses]))

  // 10x the rate: the simulator's own sampling noise stays well under the tolerance
  const sim = simulate(spec, { strategy: 'consistent-hash', serverIds: ids, periodMs: 1000, rateScale: 10, seed: 7 })
  expect(sim.summary.requests).toBeGreaterThan(25000)
  const simShare = sim.serverShares

  for (const id of ids) {
    expect(Math.abs(simShare[id] - liveShare[id]) / liveShare[id]).toBeLessThan(0.1)
  }
  // and the shares are uneven enough that agreeing means something
  const shares = Object.values(liveShare)
  expect(Math.max(...shares) - Math.min(...shares)).toBeGreaterThan(0.05)
  // a simulator routing by another layout would not agree: same keys, other server ids
  const other = simulate(spec, { strategy: 'consistent-hash', serverIds: ['x-1', 'x-2', 'x-3'], periodMs: 1000, rateScale: 10, seed: 7 })
  const sortedLive = shares.slice().sort()
  const sortedOther = Object.values(other.serverShares).sort()
  expect(sortedLive.some((v, i) => Math.abs(sortedOther[i] - v) / v > 0.1)).toBe(true)
}, 30000)
