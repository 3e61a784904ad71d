'use strict'

const { createHash } = require('node:crypto')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { createRng } = require('../../loadgen/prng')
const { pow } = require('../helpers/fdlibm-pow')

/**
 * Seeded random inputs for the chopper golden test (golden.test.js): varied
 * server counts (1-200), slice counts and widths, skewed loads, idle periods,
 * secondary replicas, `moving` marks, option sets and `unknownServers`.
 * The fixture holds what chopperRound returned for each input before the
 * round was optimized; any change here invalidates it (regenerate with
 * `node test/strategies/fixtures/make-golden.js` only when behaviour is
 * meant to change). Powers go through `fdlibm-pow`, not Math.pow, whose last
 * bit differs between Node.js lines.
 */

const CASES = 300

const OPTION_SETS = [
  undefined,
  {},
  { skipOverBudgetSlices: false },
  { maxSlices: 50 },
  { mergeChurnLimit: 0.05, moveChurnLimit: 0.5 },
  { moveRatio: 1, minSliceLength: 1000 },
  { mergeChurnLimit: 1, moveChurnLimit: 1, moveRatio: 3 },
  { mergeChurnLimit: 0, moveChurnLimit: 0.02 },
  { maxSlices: 1, minSliceLength: 2 ** 20 }
]

function makeCase (index) {
  const rng = createRng(1000 + index)
  const rand = rng.next
  const nServers = 1 + rng.int(index % 5 === 0 ? 200 : 40)
  const ids = Array.from({ length: nServers }, (_, i) => `srv-${(i * 7919 + index) % 100003}`)
  const perServer = [1, 2, 5, 10, 20][rng.int(5)]
  const nSlices = Math.max(1, Math.round(nServers * perServer * (0.3 + rand())))
  // widths: a mix of wide, narrow and (sometimes) one-key slices
  const weights = Array.from({ length: nSlices }, () => (rand() < 0.05 ? 0 : pow(rand(), 3) + 0.01))
  const sum = weights.reduce((x, y) => x + y, 0)
  const slices = []
  let acc = 0
  let start = 0
  for (let i = 0; i < nSlices; i++) {
    acc += weights[i]
    const maxEnd = KEYSPACE_SIZE - (nSlices - 1 - i) // room for one key per later slice
    let end = i === nSlices - 1 ? KEYSPACE_SIZE : Math.floor((acc / sum) * KEYSPACE_SIZE)
    end = Math.min(Math.max(end, start + 1), maxEnd)
    slices.push({ start, end, servers: [] })
    start = end
  }
  // owners: runs of the same owner (merges within a server) and a skew towards a few servers
  const skew = rand() < 0.5
  const sameRun = rand() * 0.8
  let prev = ids[0]
  for (const s of slices) {
    let owner
    if (rand() < sameRun) owner = prev
    else if (skew && rand() < 0.4) owner = ids[rng.int(Math.min(3, nServers))]
    else owner = ids[rng.int(nServers)]
    s.servers.push(owner)
    if (nServers > 1 && rand() < 0.1) {
      const other = ids[rng.int(nServers)]
      if (other !== owner) s.servers.push(other)
    }
    if (rand() < 0.05) s.moving = true
    prev = owner
  }
  // servers object in a shuffled key order, some servers without slices
  const order = ids.slice()
  for (let i = order.length - 1; i > 0; i--) {
    const j = rng.int(i + 1)
    ;[order[i], order[j]] = [order[j], order[i]]
  }
  const servers = {}
  for (const id of order) servers[id] = { url: `http://10.0.0.1:8080/${id}` }

  const idle = rand() < 0.05
  const zeros = rand() * 0.4
  const alpha = 1.1 + rand()
  const integral = rand() < 0.5
  const loads = slices.map(() => {
    if (idle || rand() < zeros) return 0
    const v = 10 / pow(1 - rand(), 1 / alpha)
    return integral ? Math.floor(v) : v
  })
  const typed = rand() < 0.3

  const opts = OPTION_SETS[rng.int(OPTION_SETS.length)]
  let inputs
  const u = rand()
  if (u < 0.3) {
    const unknownServers = ids.filter(() => rand() < 0.2)
    inputs = { unknownServers }
  } else if (u < 0.33) {
    inputs = { unknownServers: ids.slice() }
  } else if (u < 0.4) {
    inputs = {}
  }
  return {
    assignment: { generation: 1 + rng.int(100), slices, servers },
    loads: typed ? Float64Array.from(loads) : loads,
    opts,
    inputs
  }
}

const sha = (v) => createHash('sha256').update(JSON.stringify(v)).digest('hex')

/** What the fixture stores for one round's result: small fields in full, big ones hashed. */
function summarize (r) {
  return {
    churn: r.churn,
    imbalance: r.imbalance,
    moveStop: r.moveStop,
    frozen: r.frozen,
    slices: r.assignment.slices.length,
    opCounts: r.ops.reduce((m, o) => ({ ...m, [o.op]: (m[o.op] || 0) + 1 }), {}),
    assignment: sha(r.assignment),
    loads: sha(Array.from(r.loads)),
    ops: sha(r.ops)
  }
}

/**
 * The fixtures and the options each runs a case with: the single-owner round
 * pinned with `replicate: false`, the replicated round, both with the paper's
 * move stop rule alone (`moveMeanRatio: 0`, as they were recorded), and the
 * defaults, with the mean ceiling and its noise floor.
 */
const FIXTURES = {
  'chopper-golden.json': (opts) => ({ ...opts, replicate: false, moveMeanRatio: 0 }),
  // recorded before replicated slices could move, while minReplicas was 1 by default, before the primary phase and before split noise: pins that path
  'chopper-golden-replicated.json': (opts) => ({ minReplicas: 1, ...opts, moveMeanRatio: 0, moveReplicas: false, balancePrimaries: false, splitNoise: 0 }),
  'chopper-golden-defaults.json': (opts) => opts
}

module.exports = { CASES, makeCase, summarize, FIXTURES }
