'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { InvalidArgumentError } = require('../../core/errors')
const {
  evenAssignment, cloneAssignment, keyChurn, imbalance, cutEvenly
} = require('../../core/assignment')
const { frozenFlags, fillHotKeys, toResultSlices } = require('./columns')
const { resolveOptions, expect, checkServers, resolveInputs } = require('./inputs')
const { mergeColumns } = require('./merge')
const { moveColumns } = require('./move')
const { splitColumns } = require('./split')
const membership = require('./chopper-membership')
const { replicateColumns } = require('./replicate')
const { primaryColumns } = require('./primaries')
const { roundChurn } = require('./round-churn')
const { withScratch, own, copyOf } = require('./scratch')
const { readInput, staleSlices } = require('./round-input')

/**
 * The Chopper balancing strategy (paper 5.2): one round runs merge, move and
 * split, in that order, on the per-slice loads of the last period, after a
 * replication phase for hot slices (Slicer; `replicate: false` leaves it out).
 * Pure and deterministic; see docs/algorithm.md for the rules and their sources.
 */

const NAME = 'chopper'
const MAX_REPLICAS = 65536 // far above any cluster size; replica counts are capped at the server count anyway
// initialSlicesPerServer 0 with standby replicas: scenario 5 at half rate, 6 alternating pairs on the
// 2-core Xeon (2026-11-27), median p99 52 ms with 1 against 41 with 4 (38 with 8, 3 runs)
const INITIAL_SLICES_WITH_STANDBY = 4

/** Every option and its default, in one place (documented in docs/algorithm.md). */
const defaults = Object.freeze({
  mergeChurnLimit: 0.2, // paper 5.2.2: 20% of the keyspace, "based on experiment tuning"
  moveChurnLimit: 0.2, // paper 5.2.3 gives no figure; same as merge
  moveRatio: 1.25, // paper 5.2.3 step 3: stop moving when hottest/coolest < 1.25
  // not in the paper: ...and the hottest server is at most this x the mean (0 = the paper's rule alone).
  // With many servers the coolest sits near the mean, so the paper's rule alone
  // leaves the hottest up to moveRatio x the mean (docs/algorithm.md, "The mean ceiling")
  moveMeanRatio: 1.05,
  // ...but never below the sampling noise of a server's load: the ceiling is at least
  // 1 + this / sqrt(requests per server in the period), so a server that is hot only by
  // chance (this many standard deviations of a Poisson count) moves nothing. 0 = no floor
  moveMeanNoise: 3,
  // not in the paper: a slice wider than the whole move budget could never move,
  // so it is skipped; false = the paper's literal step 5 (stop the move phase),
  // which stalls for good once a wide merged slice is a hot server's first candidate
  skipOverBudgetSlices: true,
  maxSlices: 65536, // not in the paper: caps the assignment size pushed to every front end
  // not in the paper: the initial assignment cuts each server's 1/n of the keyspace into this
  // many slices (same servers), so the first round can move and replicate parts of it at once
  // instead of splitting it round after round first. 0 = INITIAL_SLICES_WITH_STANDBY with
  // standby replicas (minReplicas 2 or more), 1 (the paper's layout) without: single-owner
  // neighbours merge across servers, paying churn, and recovered more slowly from finer
  // slices (docs/algorithm.md, "The initial layout")
  initialSlicesPerServer: 0,
  minSliceLength: 1, // not in the paper: a slice shorter than 2x this is never split
  // not in the paper, and only with replication on: split a slice only when its load is above
  // the mean slice load by more than this many standard deviations of its own sampling noise
  // (a Poisson count of its requests). Without it, slices near the mean split on chance and
  // merged back nearly every round under a steady load, each time a new map for every member
  // (docs/algorithm.md, "Split noise"). 0 = the paper's threshold
  splitNoise: 2,
  // not in the paper: a slice to split whose hottest key (the app servers' majority votes,
  // core/hot-keys.js; the controller passes them as inputs.hotKeys) carried at least this
  // share of its load is cut around that key, which gets a slice of its own in one round,
  // instead of being halved round after round (docs/algorithm.md, "Hot-key cuts"). 0 = off
  hotKeyShare: 0.5,
  // Replication of hot slices (Slicer; docs/algorithm.md, "Replication"). false = the
  // paper's single-owner round, exactly as before replication existed.
  replicate: true,
  // replicas keep each share at most this fraction of the mean server load (and
  // at least the mean slice load): shares no bigger than moveRatio - 1 of the mean
  // can always be packed within moveRatio x the mean (docs/algorithm.md, "Replication")
  replicaLoadFraction: 0.25,
  // every slice on at least 2 servers: a standby that the front ends spill to per request, as
  // bounded-load hashing does, so a key that turns hot is spread at once, not a period later;
  // ties go to the primary (cache affinity). Hot slices still grow past it. 1: replicate only
  // what is hot (Slicer) (docs/algorithm.md, "Replication")
  minReplicas: 2,
  maxReplicas: 0, // 0 = up to every (known) server
  // the move phase moves a server's share of a replicated slice as it moves a slice
  // (the server leaves the slice's set, the receiver joins it). false: replicated
  // slices stay where replication put them, and with minReplicas 2 nothing moves at all
  moveReplicas: true,
  // drop a replica only when the shares after the drop stay below (1 - this) x the unit:
  // a load that halves and doubles back does not flap
  replicaHysteresis: 0.5,
  // keys that new replicas may warm per round, as a fraction of the keyspace, counted
  // once per server gained: 1 lets a slice as wide as one server's share (1/n) reach
  // every other server in one round ((n - 1)/n < 1)
  replicaChurnLimit: 1,
  // grow a hot slice's replicas when one of its servers is above this x the
  // mean server load. Below moveRatio on purpose: at 90 % utilisation a server
  // at 1.2x the mean is past its capacity, and a layout of unsplittable hot
  // keys that the move phase accepts (hottest/coolest < moveRatio) can leave
  // it there for good (docs/algorithm.md, "Replication")
  replicateRatio: 1.1,
  // Primary phase (primaries.js): a replicated slice's writes all go to its primary, so the
  // hot slices' primaries are spread over their servers (a reorder: no churn); a primary
  // stays unless another of the slice's servers has less write load pinned by more than
  // primaryMargin x the slice's load. false: primaries stay where replication left them.
  balancePrimaries: true,
  primaryMargin: 0.5
})

const checks = {
  mergeChurnLimit: expect.fraction,
  moveChurnLimit: expect.fraction,
  moveRatio: expect.ratio,
  moveMeanRatio: expect.ratioOrOff,
  moveMeanNoise: expect.nonNegative,
  skipOverBudgetSlices: expect.boolean,
  maxSlices: expect.intAtLeast(1),
  initialSlicesPerServer: expect.intAtLeast(0, 1024),
  minSliceLength: expect.intAtLeast(1, KEYSPACE_SIZE / 2),
  splitNoise: expect.nonNegative,
  hotKeyShare: expect.fraction,
  replicate: expect.boolean,
  replicaLoadFraction: expect.positive,
  minReplicas: expect.intAtLeast(1, MAX_REPLICAS),
  maxReplicas: expect.intAtLeast(0, MAX_REPLICAS),
  moveReplicas: expect.boolean,
  replicaHysteresis: expect.fractionBelowOne,
  replicaChurnLimit: expect.nonNegative,
  replicateRatio: expect.ratio,
  balancePrimaries: expect.boolean,
  primaryMargin: expect.nonNegative
}

function options (opts) {
  const o = resolveOptions(NAME, defaults, checks, opts)
  if (o.maxReplicas > 0 && o.minReplicas > o.maxReplicas) {
    throw new InvalidArgumentError(`invalid ${NAME} option minReplicas: expected at most maxReplicas (${o.maxReplicas}), got ${o.minReplicas}`)
  }
  return o
}

/**
 * The initial assignment (generation 1): each server, in id order, owns one
 * contiguous 1/n of the keyspace, as in the paper's setup; with minReplicas
 * above 1, each slice is also held by the next servers in id order. Each 1/n
 * is then cut into `initialSlicesPerServer` slices with the same servers
 * (0: 4 with standby replicas, 1 without), within maxSlices.
 * @param {Object<string, {url:string}>} servers
 * @param {object} [opts] chopper options (validated)
 */
function initial (servers, opts) {
  const o = options(opts)
  checkServers(servers)
  const a = evenAssignment(servers, 1)
  const ids = a.slices.map((sl) => sl.servers[0])
  const k = o.replicate ? Math.min(o.minReplicas, o.maxReplicas || Infinity, ids.length) : 1
  if (k > 1) {
    // minReplicas from the start: slice i also goes to the next servers in id
    // order, so no slice waits a round (and a handoff) for its standby replicas.
    a.slices.forEach((sl, i) => { sl.servers = Array.from({ length: k }, (_, j) => ids[(i + j) % ids.length]) })
  }
  const wanted = o.initialSlicesPerServer || (k > 1 ? INITIAL_SLICES_WITH_STANDBY : 1)
  const parts = Math.min(wanted, Math.max(1, Math.floor(o.maxSlices / a.slices.length)))
  if (parts > 1) a.slices = a.slices.flatMap((sl) => cutEvenly(sl, parts))
  return a
}

/**
 * Imbalance over the servers whose load is known: a frozen server's figure is
 * a stale guess (or a failed collection's 0), not a measurement.
 * Same figure as `imbalance(serverLoads(...))` without the known servers,
 * computed from columns: per-server loads summed in key order, then handed to
 * `imbalance` in sorted id order (the order the cloned servers object had).
 * Replicated slices (`rep[i] >= 0`, a set in `sets`) count their share on each
 * of their servers; with `replicate: false` there are none, and a slice counts
 * on its primary only, as before replication existed.
 */
function knownImbalance (c, rep, index, frozen, sets) {
  const perServer = new Float64Array(index.ids.length)
  const { n, owner, load } = c
  const { pool, offset, size } = sets || { pool: null, offset: null, size: null }
  for (let i = 0; i < n; i++) {
    const r = rep[i]
    if (r < 0) {
      perServer[owner[i]] += load[i]
      continue
    }
    // a replicated slice's load is spread evenly over its servers (front ends spread its requests)
    const share = load[i] / size[r]
    for (let k = offset[r]; k < offset[r] + size[r]; k++) perServer[pool[k]] += share
  }
  const known = {}
  index.ids.forEach((id, s) => { if (!frozen[s]) known[id] = perServer[s] })
  return imbalance(known)
}

/**
 * One balancing round with its bookkeeping.
 * @param {object} assignment current assignment (not mutated)
 * @param {ArrayLike<number>} loads requests per slice in the last period, aligned with assignment.slices
 * @param {object} [opts] see `defaults`
 * @param {{unknownServers?: string[], requests?: number, hotKeys?: object[]}} [inputs] `unknownServers`: servers whose load
 *   is unknown this period (their slices' loads are last-known guesses). They are
 *   frozen: nothing is moved, merged or split onto, off or within them, and they
 *   count in no load comparison (docs/algorithm.md, "Servers with unknown load").
 *   `requests`: requests counted in the period, for the mean ceiling's noise
 *   floor; without it the loads are taken to be request counts. `hotKeys`: each
 *   slice's hottest key, for the split phase's hot-key cuts (`hotKeyShare`).
 * @returns {{ assignment: object, loads: Float64Array, churn: {merge:number, move:number, replicate?:number, total:number},
 *   ops: object[], imbalance: {before:number, after:number}, moveStop: string|null, meanCeiling: number, frozen: string[] }}
 *   `loads` are the estimated per-slice loads (totals over replicas) of the new
 *   assignment (merged slices sum, split halves halve); churn is in keys
 *   (`replicate`, only with `replicate: true`, is what new replicas cost;
 *   `total` is core/assignment.js keyChurn between input and output, which can
 *   be below the sum of the phases');
 *   `moveStop` says why the move phase ended; `meanCeiling` is the mean
 *   ceiling the move phase used, as a ratio to the mean (0 = none); `imbalance` is over the known
 *   servers; `frozen` lists the frozen servers, sorted.
 */
function chopperRound (assignment, loads, opts, inputs) {
  // the round's columns are lent (./scratch.js); what the result keeps is copied out
  return withScratch(() => round(assignment, loads, opts, inputs))
}

function round (assignment, loads, opts, inputs) {
  const o = options(opts)
  const { load, index, read } = readInput(assignment, loads, o.replicate)
  const { unknownServers, requests, hotKeys } = resolveInputs(assignment, inputs, load)
  const frozen = frozenFlags(index, unknownServers)
  const frozenIds = index.ids.filter((id, s) => frozen[s])
  const cols = read.cols
  if (hotKeys) fillHotKeys(cols, hotKeys)
  // the input's first servers, starts and ends, for the round's churn and result
  // (the phases change `cols` in place)
  const input = o.replicate
    ? { rep: read.rep, sets: read.sets, moving: read.moving, owner: copyOf(cols.owner), start: copyOf(cols.start), end: copyOf(cols.end) }
    : null
  const before = knownImbalance(cols, input ? input.rep : cols.rep, index, frozen, input && input.sets)

  let total = 0
  for (let i = 0; i < cols.n; i++) if (!frozen[cols.owner[i]]) total += load[i]
  const noise = { noise: o.replicate ? o.splitNoise : 0, unit: requests > 0 ? total / requests : 1 }
  const meanCeiling = meanCeilingRatio(o, requests === null ? total : requests, index.ids.length - frozenIds.length)
  if (total === 0) {
    // idle period (or every server frozen): no signal, so no change (and nothing
    // to merge or split against). Only known slices count: stale loads are no signal.
    const churn = o.replicate ? { merge: 0, move: 0, replicate: 0, total: 0 } : { merge: 0, move: 0, total: 0 }
    return { assignment: cloneAssignment(assignment), loads: load, churn, ops: [], imbalance: { before, after: before }, moveStop: null, meanCeiling, frozen: frozenIds }
  }

  // Hot-key cuts first (docs/algorithm.md, "Hot-key cuts"): a hot key gets a
  // slice of its own before replication sees it, so replicating it costs its
  // one key, not the whole slice it was in.
  const cut = hotKeys && o.hotKeyShare > 0
    ? splitColumns(cols, index.ids, { maxSlices: o.maxSlices, minSliceLength: o.minSliceLength, frozen, ...noise, hotShare: o.hotKeyShare, hotOnly: true, stale: staleSlices(cols, assignment.slices, index, frozen) })
    : { cols, ops: [] }
  const work = cut.cols
  // Replication next, so a slice that turns hot is replicated in the round that
  // first sees it; merge, move and split then balance the single-server slices
  // around the replicated ones' shares (docs/algorithm.md, "Replication").
  const replicated = o.replicate
    ? replicateColumns(work, index.ids, input, {
      fraction: o.replicaLoadFraction,
      minReplicas: o.minReplicas,
      maxReplicas: o.maxReplicas,
      hysteresis: o.replicaHysteresis,
      churnLimit: o.replicaChurnLimit * KEYSPACE_SIZE,
      ratio: o.replicateRatio,
      frozen
    })
    : null
  const sets = replicated ? replicated.sets : null
  const setFrozen = replicated ? replicated.setFrozen : undefined
  // in place: the round's columns are its own (toColumns or the cut's copy), and nothing reads them after
  const merged = mergeColumns(work, index.ids, index.ids.length, o.mergeChurnLimit * KEYSPACE_SIZE, frozen, setFrozen, sets, work)
  const moved = moveColumns(merged.cols, index.ids, {
    ratio: o.moveRatio,
    meanRatio: meanCeiling,
    churnLimit: o.moveChurnLimit * KEYSPACE_SIZE,
    skipOverBudget: o.skipOverBudgetSlices,
    frozen,
    base: replicated ? replicated.base : undefined,
    baseKeys: replicated ? replicated.baseKeys : undefined,
    // a replicated slice's share moves like a slice (docs/algorithm.md, "Replication")
    sets: replicated && o.moveReplicas ? sets : undefined,
    setFrozen
  })
  // Split noise (replication on): a load L stands for about L / unit requests (docs/algorithm.md).
  const split = splitColumns(merged.cols, index.ids, { maxSlices: o.maxSlices, minSliceLength: o.minSliceLength, frozen, setFrozen, ...noise, hotShare: o.hotKeyShare })

  const c = split.cols
  // Last: spread the hot replicated slices' primaries (their writes); a reorder costs no churn.
  // Its floor is the replication unit (replicate.js) over the slices it sees: the round's
  // output, after merges and splits, not the input slices replication's own unit uses.
  const primaries = replicated && o.balancePrimaries
    ? primaryColumns(c, sets, index.ids, {
      floor: Math.max(o.replicaLoadFraction * total / Math.max(1, index.ids.length - frozenIds.length), total / c.n),
      margin: o.primaryMargin,
      frozen
    })
    : null
  const slices = toResultSlices(c, index, assignment.slices, sets, input, primaries && primaries.reordered)
  const next = { generation: assignment.generation, slices, servers: cloneAssignment({ slices: [], servers: assignment.servers }).servers }
  const churn = replicated
    ? { merge: merged.churn, move: moved.churn, replicate: replicated.churn, total: roundChurn(input.end, input.owner, input, c, sets) }
    : { merge: merged.churn, move: moved.churn, total: keyChurn(assignment, next) }
  return {
    assignment: next,
    loads: own(c.load), // a copy: the round's columns go back to the pool
    churn,
    ops: replicated ? [...cut.ops, ...replicated.ops, ...merged.ops, ...moved.ops, ...split.ops, ...(primaries ? primaries.ops : [])] : [...cut.ops, ...merged.ops, ...moved.ops, ...split.ops],
    imbalance: { before, after: knownImbalance(c, c.rep, index, frozen, sets) },
    moveStop: moved.stop,
    meanCeiling,
    frozen: frozenIds
  }
}

/**
 * The move phase's mean ceiling this round, as a ratio to the mean (0 = off):
 * `moveMeanRatio`, raised to the noise floor 1 + moveMeanNoise / sqrt(r) when
 * each of the `members` servers that take part saw r requests on average. A
 * server's request count over a period varies like a Poisson count, by about
 * sqrt(r), so below that floor the ceiling would chase chance and pay churn for
 * it. The experiments' 3 servers see about 110 requests each per period: the
 * floor is 1.28, above the 1.15 x the mean that the paper's rule already
 * guarantees with 3 servers, so the ceiling never binds there; the simulator's
 * 1,000 servers see 10,000 each: floor 1.03, ceiling 1.05.
 * @param {{moveMeanRatio:number, moveMeanNoise:number}} o
 * @param {number} requests requests counted in the period (the loads' total when they are counts)
 * @param {number} members servers whose load is known
 */
function meanCeilingRatio (o, requests, members) {
  if (o.moveMeanRatio === 0) return 0
  if (o.moveMeanNoise === 0) return o.moveMeanRatio
  if (!(requests > 0) || members <= 0) return 0
  return Math.max(o.moveMeanRatio, 1 + o.moveMeanNoise / Math.sqrt(requests / members))
}

/**
 * One balancing round (merge, move, split). Same generation as the input;
 * the controller bumps it when the layout changed.
 * @param {object} assignment
 * @param {ArrayLike<number>} loads
 * @param {object} [opts]
 * @param {{unknownServers?: string[], requests?: number}} [inputs] servers whose load is unknown: frozen;
 *   requests counted in the period: the mean ceiling's noise floor (see chopperRound)
 */
function rebalance (assignment, loads, opts, inputs) {
  return chopperRound(assignment, loads, opts, inputs).assignment
}

/**
 * Add a server with no slices (chopper-membership.js): it is the coolest
 * server (load 0), so the next round's move phase hands it slices.
 * @param {object} assignment
 * @param {string} id
 * @param {string} url
 * @param {ArrayLike<number>} [loads] validated when given; not needed
 * @param {object} [opts]
 * @param {{unknownServers?: string[]}} [inputs] validated; not needed, since nothing moves
 */
function addServer (assignment, id, url, loads, opts, inputs) {
  options(opts)
  return membership.addServer(assignment, id, url, loads, inputs)
}

/**
 * Remove a server and reassign the slices it held alone at once, hottest
 * first, each to the least-loaded known server (chopper-membership.js).
 * @param {object} assignment
 * @param {string} id
 * @param {ArrayLike<number>} [loads] per-slice loads of the last period; all zero when omitted
 * @param {object} [opts]
 * @param {{unknownServers?: string[]}} [inputs] servers whose load is unknown (may include `id`)
 */
function removeServer (assignment, id, loads, opts, inputs) {
  const o = options(opts)
  return membership.removeServer(assignment, id, loads, inputs, o.replicate)
}

/**
 * addServer for each of `joins` in order, in one pass (./batch.js).
 * @param {object} assignment
 * @param {Array<{id:string, url:string}>} joins
 * @param {ArrayLike<number>} [loads]
 * @param {object} [opts]
 * @param {object} [inputs]
 */
function addServers (assignment, joins, loads, opts, inputs) {
  options(opts)
  return membership.addServers(assignment, joins, loads, inputs)
}

/**
 * removeServer for each of `ids` in order, in one pass (./batch.js): the
 * result of the loop of removeServer calls, each on the last one's result.
 * @param {object} assignment
 * @param {string[]} ids
 * @param {ArrayLike<number>} [loads]
 * @param {object} [opts]
 * @param {object} [inputs]
 */
function removeServers (assignment, ids, loads, opts, inputs) {
  const o = options(opts)
  return membership.removeServers(assignment, ids, loads, inputs, o.replicate)
}

module.exports = { name: NAME, defaults, initial, rebalance, addServer, removeServer, addServers, removeServers, chopperRound }
