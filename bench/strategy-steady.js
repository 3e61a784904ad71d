'use strict'

/**
 * How often chopper's round changes the map under a steady load: a closed
 * loop like bench/strategy-convergence.js, but each period every key's count
 * is a seeded Poisson draw around its fixed mean (the sampling noise a real
 * period's load report carries), and the controller's request count goes with
 * the loads. Every changed map is a new generation pushed to every front end
 * and app server. Counts the rounds that changed the map after a settling
 * stretch, per `splitNoise` value (docs/algorithm.md, "Split noise"), with the
 * phase-change recovery of the same loop beside it.
 *
 *   node bench/strategy-steady.js [--servers 3] [--keys 10] [--hot 3] [--hot-share 0.8]
 *     [--requests 337] [--settle 100] [--rounds 100] [--seeds 6] [--noise 0,1,2,3]
 *
 * The defaults are scenario 5 of bench/experiments (10 keys, 3 with 80 % of the
 * load) at 337 requests a period (675 req/s, 0.5 s periods). Prints figures,
 * asserts nothing.
 */

const { parseArgs } = require('node:util')
const { sliceKey } = require('../core/keyspace')
const { SliceMap } = require('../core/slice-map')
const { serverLoads, imbalance } = require('../core/assignment')
const chopper = require('../controller/strategies/chopper')

const { values } = parseArgs({
  options: {
    servers: { type: 'string', default: '3' },
    keys: { type: 'string', default: '10' },
    hot: { type: 'string', default: '3' },
    'hot-share': { type: 'string', default: '0.8' },
    requests: { type: 'string', default: '337' },
    settle: { type: 'string', default: '100' },
    rounds: { type: 'string', default: '100' },
    seeds: { type: 'string', default: '6' },
    noise: { type: 'string', default: '0,1,2,3' }
  }
})
const num = (k, ok) => {
  const x = Number(values[k])
  if (!ok(x)) throw new TypeError(`--${k}: invalid value ${JSON.stringify(values[k])}`)
  return x
}
const n = {
  servers: num('servers', (x) => Number.isInteger(x) && x >= 1),
  keys: num('keys', (x) => Number.isInteger(x) && x >= 1),
  hot: num('hot', (x) => Number.isInteger(x) && x >= 0),
  hotShare: num('hot-share', (x) => x >= 0 && x <= 1),
  requests: num('requests', (x) => x > 0),
  settle: num('settle', (x) => Number.isInteger(x) && x >= 0),
  rounds: num('rounds', (x) => Number.isInteger(x) && x >= 1),
  seeds: num('seeds', (x) => Number.isInteger(x) && x >= 1)
}
if (n.hot > n.keys) throw new TypeError('--hot must be at most --keys')
const noises = values.noise.split(',').map(Number)
if (noises.some((z) => !(z >= 0))) throw new TypeError('--noise: a comma-separated list of numbers >= 0')

const servers = {}
for (let i = 0; i < n.servers; i++) servers[`s${i}`] = { url: `http://127.0.0.1:9000/s${i}` }

function prng (seed) {
  let s = seed
  return () => {
    s = (s * 1103515245 + 12345) % 2147483648
    return s / 2147483648
  }
}

/** Knuth's Poisson draw for small means, a normal approximation for large ones. */
function poisson (mean, rnd) {
  if (mean > 60) {
    let u = 0
    for (let i = 0; i < 12; i++) u += rnd()
    return Math.max(0, Math.round(mean + (u - 6) * Math.sqrt(mean)))
  }
  const limit = Math.exp(-mean)
  let k = 0
  for (let p = rnd(); p > limit; p *= rnd()) k++
  return k
}

/** Key means of one hot set: `hot` keys from `first` share hotShare, the rest the remainder. */
function keysFor (prefix, first) {
  const cold = n.keys - n.hot
  return Array.from({ length: n.keys }, (_, i) => {
    const hot = ((i - first + n.keys) % n.keys) < n.hot
    const share = hot ? n.hotShare / n.hot : (cold > 0 ? (1 - n.hotShare) / cold : 0)
    return { hash: sliceKey(`${prefix}${i}`), mean: share * n.requests }
  })
}

/** One period: Poisson counts per slice, the request count, and the exact means per slice. */
function period (a, keys, rnd) {
  const map = new SliceMap(a)
  const loads = new Float64Array(a.slices.length)
  const exact = new Float64Array(a.slices.length)
  let requests = 0
  for (const k of keys) {
    const i = map.indexOf(k.hash)
    const c = poisson(k.mean, rnd)
    loads[i] += c
    exact[i] += k.mean
    requests += c
  }
  return { loads, exact, requests }
}

/** Rounds that changed the map after `settle` rounds on one steady hot set, then rounds to get below 1.25 after a change of hot set. */
function run (opts, seed) {
  const rnd = prng(seed)
  let a = chopper.initial(servers, opts)
  let changed = 0
  let keys = keysFor('key-', 0)
  for (let r = 0; r < n.settle + n.rounds; r++) {
    const { loads, requests } = period(a, keys, rnd)
    const next = chopper.chopperRound(a, loads, opts, { requests }).assignment
    if (r >= n.settle && JSON.stringify(next.slices) !== JSON.stringify(a.slices)) changed++
    a = next
  }
  keys = keysFor('key-', n.hot) // a new hot set
  let recovery = Infinity
  for (let r = 0; r <= 8; r++) {
    const { loads, exact, requests } = period(a, keys, rnd)
    if (imbalance(serverLoads(a, exact)) < 1.25) {
      recovery = r
      break
    }
    a = chopper.chopperRound(a, loads, opts, { requests }).assignment
  }
  return { changed, recovery, slices: a.slices.length }
}

console.log(`chopper, ${n.servers} servers, ${n.keys} keys (${n.hot} with ${n.hotShare * 100} %), ${n.requests} requests a period; map changes in rounds ${n.settle}-${n.settle + n.rounds - 1}, seeds 1-${n.seeds}`)
for (const z of noises) {
  const rs = Array.from({ length: n.seeds }, (_, i) => run({ splitNoise: z }, i + 1))
  const mean = rs.reduce((x, r) => x + r.changed, 0) / rs.length
  console.log(`splitNoise ${z}: changed ${rs.map((r) => r.changed).join(', ')} (mean ${mean.toFixed(1)} of ${n.rounds}); rounds to < 1.25 after a new hot set ${rs.map((r) => r.recovery).join(', ')}; slices ${rs.map((r) => r.slices).join(', ')}`)
}
