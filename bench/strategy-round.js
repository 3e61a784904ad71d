'use strict'

/**
 * Time one chopper balancing round on a large assignment: by default 1,000
 * servers x 100 slices each (100,000 slices), slices scattered over servers
 * by a seeded shuffle, heavy-tailed per-slice loads from a seeded PRNG.
 * Prints the median (and min/max) wall time per round over several runs.
 *
 *   node bench/strategy-round.js [--servers 1000] [--slices 100] [--runs 9] [--seed 1] [--max-slices N]
 *     [--replicate true|false] [--hot-keys true|false]
 *   node bench/strategy-round.js --servers 10000 --runs 5   # the 10,000-server scale (1,000,000 slices)
 *   node bench/strategy-round.js --replicate false          # the single-owner round (no replication phase)
 *   node bench/strategy-round.js --servers 5000 --joins 1000 # membership: 1,000 joins (and leaves) at 5,000 servers
 *
 * Targets: <= 100 ms per round at 1,000 servers, <= 1 s at 10,000.
 * Figures: docs/algorithm.md, "Performance".
 *
 * --max-slices defaults to the strategy's default (65,536), which is below the
 * 100,000 slices of the default input, so that round splits nothing; pass
 * e.g. --max-slices 262144 to time the split phase too.
 *
 * --joins N times membership changes instead of a round, on chopper's initial
 * layout of --servers servers (with standby replicas, 4 slices each): N
 * addServer calls one after another (each on the last one's result, as the
 * controller lays out a batch), the same N joins as one addServers call, N
 * leaves as one removeServers call, and 100 removeServer calls one by one.
 *
 * This is a script, not a test: it prints figures and asserts nothing.
 */

const { createRng } = require('../loadgen/prng')
const { performance } = require('node:perf_hooks')
const { parseArgs } = require('node:util')
const { evenRanges } = require('../core/keyspace')
const chopper = require('../controller/strategies/chopper')
const { chopperRound, defaults } = chopper

const { values } = parseArgs({
  options: {
    servers: { type: 'string', default: '1000' },
    slices: { type: 'string', default: '100' },
    runs: { type: 'string', default: '9' },
    seed: { type: 'string', default: '1' },
    'max-slices': { type: 'string', default: String(defaults.maxSlices) },
    replicate: { type: 'string', default: String(defaults.replicate) },
    'min-replicas': { type: 'string', default: String(defaults.minReplicas) },
    'balance-primaries': { type: 'string', default: String(defaults.balancePrimaries) },
    'hot-keys': { type: 'string', default: 'false' },
    joins: { type: 'string', default: '0' },
    help: { type: 'boolean', short: 'h', default: false }
  }
})
if (values.help) {
  console.log(`usage: node bench/strategy-round.js [--servers 1000] [--slices 100] [--runs 9] [--seed 1]
  [--max-slices ${defaults.maxSlices}] [--replicate true|false] [--min-replicas ${defaults.minReplicas}] [--balance-primaries true|false]
  [--hot-keys true|false] [--joins N]
Times one chopper round (median of --runs after a warm-up) on --servers x --slices
scattered slices with seeded Pareto loads. --replicate false runs the
single-owner round (no replication phase). With replication, every input slice
already has --min-replicas servers (its owner, then the next ids), so the round
timed is a steady one, not the one-off transition from single owners.
--hot-keys true passes inputs.hotKeys as the controller does, a hot key for
every slice with load (its middle key, with 60 % of its load), so the hot-key
cuts' cost is timed too.
--joins N times N joins and N leaves at --servers servers instead (one by one
and batched; see the file's comment).
Target: <= 100 ms at 1,000 servers.`)
  process.exit(0)
}
/** A true|false flag's value; anything else is refused by name. */
function flag (name) {
  if (values[name] !== 'true' && values[name] !== 'false') throw new TypeError(`--${name} must be true or false`)
  return values[name] === 'true'
}
const replicate = flag('replicate')
const balancePrimaries = flag('balance-primaries')
const withHotKeys = flag('hot-keys')
const nServers = Number(values.servers)
const perServer = Number(values.slices)
const runs = Number(values.runs)
const seed = Number(values.seed)
const maxSlices = Number(values['max-slices'])
const minReplicas = replicate ? Number(values['min-replicas']) : 1
if (!Number.isInteger(minReplicas) || minReplicas < 1) throw new TypeError('--min-replicas must be a positive integer')
const joins = Number(values.joins)
for (const [name, v] of Object.entries({ servers: nServers, slices: perServer, runs, seed, 'max-slices': maxSlices, joins })) {
  if (!Number.isInteger(v) || v < (name === 'seed' || name === 'joins' ? 0 : 1)) throw new TypeError(`--${name} must be a positive integer`)
}
if (joins > 0) {
  membership()
  process.exit(0)
}

/** --joins: membership changes on chopper's initial layout (see the file's comment). */
function membership () {
  const rand = createRng(seed).next
  const servers = {}
  for (let i = 0; i < nServers; i++) servers[`s${String(i).padStart(5, '0')}`] = { url: `http://127.0.0.1:9000/s${i}` }
  const a = chopper.initial(servers)
  const loads = a.slices.map(() => (rand() < 0.1 ? 0 : Math.floor(10 / Math.pow(1 - rand(), 1 / 1.5))))
  const joining = Array.from({ length: joins }, (_, k) => ({ id: `n${String(k).padStart(5, '0')}`, url: `http://127.0.0.1:9001/n${k}` }))
  const leaving = Object.keys(a.servers).filter((id, i) => i % Math.max(1, Math.floor(nServers / joins)) === 0).slice(0, Math.min(joins, nServers - 1))
  const time = (fn) => {
    const t0 = performance.now()
    fn()
    return (performance.now() - t0).toFixed(1)
  }
  console.log(`chopper membership: ${nServers} servers, ${a.slices.length} slices (initial layout), ${joins} joins, ${leaving.length} leaves, node ${process.version}`)
  let b = a
  console.log(`  ${joins} addServer calls one by one: ${time(() => { for (const j of joining) b = chopper.addServer(b, j.id, j.url, loads) })} ms`)
  console.log(`  addServers, ${joins} joins in one call: ${time(() => chopper.addServers(a, joining, loads))} ms`)
  console.log(`  removeServers, ${leaving.length} leaves in one call: ${time(() => chopper.removeServers(a, leaving, loads))} ms`)
  const few = leaving.slice(0, 100)
  b = a
  console.log(`  ${few.length} removeServer calls one by one: ${time(() => { for (const id of few) b = chopper.removeServer(b, id, loads) })} ms`)
}

function buildInput () {
  const rand = createRng(seed).next
  const ids = Array.from({ length: nServers }, (_, i) => `s${String(i).padStart(4, '0')}`)
  const servers = {}
  for (const id of ids) servers[id] = { url: `http://127.0.0.1:9000/${id}` }
  const owners = []
  for (const id of ids) for (let k = 0; k < perServer; k++) owners.push(id)
  for (let i = owners.length - 1; i > 0; i--) { // Fisher-Yates: scatter each server's slices
    const j = Math.floor(rand() * (i + 1))
    ;[owners[i], owners[j]] = [owners[j], owners[i]]
  }
  const at = new Map(ids.map((id, i) => [id, i]))
  const setOf = (owner) => Array.from({ length: Math.min(minReplicas, nServers) }, (_, k) => ids[(at.get(owner) + k) % nServers])
  const slices = evenRanges(owners.length).map((r, i) => ({ start: r.start, end: r.end, servers: setOf(owners[i]) }))
  // Pareto(alpha 1.5) request counts, with 10% of slices idle
  const loads = slices.map(() => (rand() < 0.1 ? 0 : Math.floor(10 / Math.pow(1 - rand(), 1 / 1.5))))
  return { assignment: { generation: 1, slices, servers }, loads }
}

const { assignment, loads } = buildInput()
// as the controller passes them: one entry per slice (core/hot-keys.js hotKeysOf)
const hotKeys = withHotKeys ? assignment.slices.map((s, i) => (loads[i] > 0 ? { key: s.start + Math.floor((s.end - s.start) / 2), load: 0.6 * loads[i] } : null)) : undefined
const inputs = hotKeys ? { hotKeys } : undefined
const times = []
let result
const options = replicate ? { maxSlices, replicate: true, minReplicas, balancePrimaries } : { maxSlices, replicate: false }
chopperRound(assignment, loads, options, inputs) // warm-up (JIT)
for (let i = 0; i < runs; i++) {
  const t0 = performance.now()
  result = chopperRound(assignment, loads, options, inputs)
  times.push(performance.now() - t0)
}
times.sort((a, b) => a - b)
const count = (op) => result.ops.filter((o) => o.op === op).length
const pct = (keys) => (100 * keys / 2 ** 32).toFixed(2) + '%'
console.log(`chopper round: ${nServers} servers x ${perServer} slices = ${assignment.slices.length} slices, maxSlices ${maxSlices}, replicate ${options.replicate}${options.replicate ? `, minReplicas ${minReplicas}` : ''}, hot keys ${withHotKeys}, seed ${seed}, node ${process.version}`)
console.log(`  ms per round: median ${times[times.length >> 1].toFixed(1)}, min ${times[0].toFixed(1)}, max ${times[times.length - 1].toFixed(1)} (${runs} runs after 1 warm-up)`)
console.log(`  ops: ${count('merge')} merges, ${count('move')} moves (stop: ${result.moveStop}), ${count('split')} splits, ${count('primary')} primary changes -> ${result.assignment.slices.length} slices`)
if (options.replicate) {
  const replicated = result.assignment.slices.filter((s) => s.servers.length > 1).length
  console.log(`  replication: ${count('replicate')} slices gained replicas, ${count('unreplicate')} lost some -> ${replicated} replicated slices`)
}
const replicaChurn = options.replicate ? `, replicate ${pct(result.churn.replicate)}` : ''
console.log(`  churn: merge ${pct(result.churn.merge)}, move ${pct(result.churn.move)}${replicaChurn}, total ${pct(result.churn.total)} of the keyspace`)
console.log(`  imbalance (max/mean server load): ${result.imbalance.before.toFixed(3)} -> ${result.imbalance.after.toFixed(3)} (estimated)`)
