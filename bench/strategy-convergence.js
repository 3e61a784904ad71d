'use strict'

/**
 * Closed-loop convergence of the strategies on many fixed skewed key sets:
 * each period a strategy sees the weights of its key set hashed into its
 * current slices, and the real max/mean imbalance is recorded.
 * Compares chopper (defaults), chopper with the paper's literal move-churn
 * rule (skipOverBudgetSlices: false) and consistent-hash.
 *
 *   node bench/strategy-convergence.js [--servers 3] [--keys 10] [--hot 3] [--hot-weight 100]
 *     [--cold-weight 10] [--rounds 20] [--sets 100]
 *
 * Prints figures, asserts nothing.
 */

const { parseArgs } = require('node:util')
const { sliceKey } = require('../core/keyspace')
const { SliceMap } = require('../core/slice-map')
const { serverLoads, imbalance } = require('../core/assignment')
const { strategies } = require('../controller/strategies')

const { values } = parseArgs({
  options: {
    servers: { type: 'string', default: '3' },
    keys: { type: 'string', default: '10' },
    hot: { type: 'string', default: '3' },
    'hot-weight': { type: 'string', default: '100' },
    'cold-weight': { type: 'string', default: '10' },
    rounds: { type: 'string', default: '20' },
    sets: { type: 'string', default: '100' }
  }
})
const n = Object.fromEntries(Object.entries(values).map(([k, v]) => {
  const x = Number(v)
  if (!Number.isInteger(x) || x < 0) throw new TypeError(`--${k} must be a non-negative integer`)
  return [k, x]
}))

const servers = {}
for (let i = 0; i < n.servers; i++) servers[`s${i}`] = { url: `http://127.0.0.1:9000/s${i}` }

const variants = [
  ['chopper (defaults)', 'chopper', {}],
  ['chopper, literal 5.2.3 step 5', 'chopper', { skipOverBudgetSlices: false }],
  ['consistent-hash (100 vnodes)', 'consistent-hash', {}]
]

function trace (name, opts, keys) {
  const strategy = strategies[name]
  let a = strategy.initial(servers, opts)
  const out = []
  for (let r = 0; r <= n.rounds; r++) {
    const map = new SliceMap(a)
    const loads = new Float64Array(a.slices.length)
    for (const { key, weight } of keys) loads[map.indexOf(key)] += weight
    out.push(imbalance(serverLoads(a, loads)))
    if (r < n.rounds) a = strategy.rebalance(a, loads, opts)
  }
  return out
}

console.log(`${n.sets} key sets of ${n.keys} keys (${n.hot} x ${n['hot-weight']}, rest x ${n['cold-weight']}), ${n.servers} servers, ${n.rounds} rounds`)
for (const [label, name, opts] of variants) {
  const finals = []
  const first = []
  for (let set = 0; set < n.sets; set++) {
    const keys = Array.from({ length: n.keys }, (_, i) => ({ key: sliceKey(`set${set}-key-${i}`), weight: i < n.hot ? n['hot-weight'] : n['cold-weight'] }))
    const t = trace(name, opts, keys)
    finals.push(t[t.length - 1])
    first.push(t.findIndex((x) => x < 1.25))
  }
  finals.sort((a, b) => a - b)
  const reached = first.filter((r) => r >= 0).sort((a, b) => a - b)
  console.log(`  ${label.padEnd(32)} final < 1.25: ${finals.filter((x) => x < 1.25).length}/${n.sets}` +
    `  final median ${finals[finals.length >> 1].toFixed(3)}, max ${finals[finals.length - 1].toFixed(3)}` +
    `  never < 1.25: ${n.sets - reached.length}` + (reached.length ? `  median first round < 1.25: ${reached[reached.length >> 1]}` : ''))
}
