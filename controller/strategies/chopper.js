'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const {
  validateAssignment, evenAssignment, cloneAssignment, keyChurn, serverLoads, imbalance
} = require('../../core/assignment')
const { indexServers, frozenFlags, toColumns, serversOf } = require('./columns')
const { resolveOptions, expect, toLoads, checkServers, checkMembershipChange, resolveInputs } = require('./inputs')
const { mergeColumns } = require('./merge')
const { moveColumns } = require('./move')
const { splitColumns } = require('./split')

/**
 * The Chopper balancing strategy (paper 5.2): one round runs merge, move and
 * split, in that order, on the per-slice loads of the last period. Pure and
 * deterministic; see docs/algorithm.md for the rules and their sources.
 */

const NAME = 'chopper'

/** Every option and its default, in one place (documented in docs/algorithm.md). */
const defaults = Object.freeze({
  mergeChurnLimit: 0.2, // paper 5.2.2: 20% of the keyspace, "based on experiment tuning"
  moveChurnLimit: 0.2, // paper 5.2.3 gives no figure; same as merge
  moveRatio: 1.25, // paper 5.2.3 step 3: stop moving when hottest/coolest < 1.25
  // not in the paper: a slice wider than the whole move budget could never move,
  // so it is skipped; false = the paper's literal step 5 (stop the move phase),
  // which stalls for good once a wide merged slice is a hot server's first candidate
  skipOverBudgetSlices: true,
  maxSlices: 65536, // not in the paper: caps the assignment size pushed to every front end
  minSliceLength: 1 // not in the paper: a slice shorter than 2x this is never split
})

const checks = {
  mergeChurnLimit: expect.fraction,
  moveChurnLimit: expect.fraction,
  moveRatio: expect.ratio,
  skipOverBudgetSlices: expect.boolean,
  maxSlices: expect.intAtLeast(1),
  minSliceLength: expect.intAtLeast(1, KEYSPACE_SIZE / 2)
}

const options = (o) => resolveOptions(NAME, defaults, checks, o)

/**
 * The initial assignment (generation 1): each server, in id order, owns one
 * contiguous 1/n of the keyspace, as in the paper's setup.
 * @param {Object<string, {url:string}>} servers
 * @param {object} [opts] chopper options (validated, unused)
 */
function initial (servers, opts) {
  options(opts)
  checkServers(servers)
  return evenAssignment(servers, 1)
}

/**
 * Imbalance over the servers whose load is known: a frozen server's figure is
 * a stale guess (or a failed collection's 0), not a measurement.
 * Same figure as `imbalance(serverLoads(...))` without the known servers,
 * computed from columns: per-server loads summed in key order, then handed to
 * `imbalance` in sorted id order (the order the cloned servers object had).
 */
function knownImbalance (c, index, frozen) {
  const perServer = new Float64Array(index.ids.length)
  for (let i = 0; i < c.n; i++) perServer[c.owner[i]] += c.load[i]
  const known = {}
  index.ids.forEach((id, s) => { if (!frozen[s]) known[id] = perServer[s] })
  return imbalance(known)
}

/**
 * One balancing round with its bookkeeping.
 * @param {object} assignment current assignment (not mutated)
 * @param {ArrayLike<number>} loads requests per slice in the last period, aligned with assignment.slices
 * @param {object} [opts] see `defaults`
 * @param {{unknownServers?: string[]}} [inputs] `unknownServers`: servers whose load
 *   is unknown this period (their slices' loads are last-known guesses). They are
 *   frozen: nothing is moved, merged or split onto, off or within them, and they
 *   count in no load comparison (docs/algorithm.md, "Servers with unknown load").
 * @returns {{ assignment: object, loads: Float64Array, churn: {merge:number, move:number, total:number},
 *   ops: object[], imbalance: {before:number, after:number}, moveStop: string|null, frozen: string[] }}
 *   `loads` are the estimated per-slice loads of the new assignment (merged
 *   slices sum, split halves halve); churn is in keys (`total` is the real
 *   owner change between input and output, which can be below merge + move);
 *   `moveStop` says why the move phase ended; `imbalance` is over the known
 *   servers; `frozen` lists the frozen servers, sorted.
 */
function chopperRound (assignment, loads, opts, inputs) {
  const o = options(opts)
  validateAssignment(assignment)
  const load = toLoads(loads, assignment.slices.length)
  const { unknownServers } = resolveInputs(assignment, inputs)
  // The phases work on columns (./columns.js), not objects: at a million
  // slices, allocating objects per phase was most of the round's time.
  const index = indexServers(Object.keys(assignment.servers))
  const frozen = frozenFlags(index, unknownServers)
  const frozenIds = index.ids.filter((id, s) => frozen[s])
  const cols = toColumns(assignment.slices, index, load)
  const before = knownImbalance(cols, index, frozen)

  let total = 0
  for (let i = 0; i < cols.n; i++) if (!frozen[cols.owner[i]]) total += load[i]
  if (total === 0) {
    // idle period (or every server frozen): no signal, so no change (and nothing
    // to merge or split against). Only known slices count: stale loads are no signal.
    const churn = { merge: 0, move: 0, total: 0 }
    return { assignment: cloneAssignment(assignment), loads: load, churn, ops: [], imbalance: { before, after: before }, moveStop: null, frozen: frozenIds }
  }

  const merged = mergeColumns(cols, index.ids, index.ids.length, o.mergeChurnLimit * KEYSPACE_SIZE, frozen)
  const moved = moveColumns(merged.cols, index.ids, {
    ratio: o.moveRatio, churnLimit: o.moveChurnLimit * KEYSPACE_SIZE, skipOverBudget: o.skipOverBudgetSlices, frozen
  })
  const split = splitColumns(merged.cols, index.ids, { maxSlices: o.maxSlices, minSliceLength: o.minSliceLength, frozen })

  const c = split.cols
  const slices = new Array(c.n)
  for (let i = 0; i < c.n; i++) slices[i] = { start: c.start[i], end: c.end[i], servers: serversOf(c, i, index, assignment.slices) }
  const next = { generation: assignment.generation, slices, servers: cloneAssignment({ slices: [], servers: assignment.servers }).servers }
  return {
    assignment: next,
    loads: c.load.slice(),
    churn: { merge: merged.churn, move: moved.churn, total: keyChurn(assignment, next) },
    ops: [...merged.ops, ...moved.ops, ...split.ops],
    imbalance: { before, after: knownImbalance(c, index, frozen) },
    moveStop: moved.stop,
    frozen: frozenIds
  }
}

/**
 * One balancing round (merge, move, split). Same generation as the input;
 * the controller bumps it when the layout changed.
 * @param {object} assignment
 * @param {ArrayLike<number>} loads
 * @param {object} [opts]
 * @param {{unknownServers?: string[]}} [inputs] servers whose load is unknown: frozen (see chopperRound)
 */
function rebalance (assignment, loads, opts, inputs) {
  return chopperRound(assignment, loads, opts, inputs).assignment
}

/**
 * Add a server with no slices. It is the coolest server (load 0), so the
 * next round's move phase hands it slices (within the move churn budget).
 * @param {object} assignment
 * @param {string} id
 * @param {string} url
 * @param {ArrayLike<number>} [loads] validated when given; not needed
 * @param {object} [opts]
 * @param {{unknownServers?: string[]}} [inputs] validated; not needed, since nothing moves
 */
function addServer (assignment, id, url, loads, opts, inputs) {
  options(opts)
  checkMembershipChange('join', assignment, id, { url, loads })
  resolveInputs(assignment, inputs)
  // cloneAssignment also re-sorts the servers object.
  return cloneAssignment({ ...assignment, servers: { ...assignment.servers, [id]: { url } } })
}

/**
 * Remove a server and reassign its slices at once: hottest slice first, each
 * to the currently least-loaded remaining server (ties: least keyspace, then
 * id), counting each given slice towards that server's tally. Merges nothing.
 * Servers whose load is unknown receive nothing, unless every remaining
 * server is unknown.
 * @param {object} assignment
 * @param {string} id
 * @param {ArrayLike<number>} [loads] per-slice loads of the last period; all zero when omitted
 * @param {object} [opts]
 * @param {{unknownServers?: string[]}} [inputs] servers whose load is unknown (may include `id`)
 */
function removeServer (assignment, id, loads, opts, inputs) {
  options(opts)
  const load = checkMembershipChange('leave', assignment, id, { loads })
  const { unknownServers } = resolveInputs(assignment, inputs)
  return reassignFrom(assignment, id, load, unknownServers)
}

function reassignFrom (assignment, id, load, unknown) {
  const remaining = Object.keys(assignment.servers).filter((s) => s !== id)
  const known = remaining.filter((s) => !unknown.has(s))
  // An unknown server's tally is a stale guess, so it must not look like the
  // least loaded. But the leaving server's slices must go somewhere: when every
  // remaining server is unknown, fall back to choosing among all of them.
  const targets = known.length > 0 ? known : remaining
  const next = cloneAssignment(assignment)
  delete next.servers[id]
  const tally = serverLoads(assignment, load)
  const leaving = []
  next.slices.forEach((s, i) => {
    if (s.servers[0] === id) leaving.push(i)
    else s.servers = s.servers.filter((x) => x !== id) // drop it as a secondary replica
  })
  const len = (i) => next.slices[i].end - next.slices[i].start
  leaving.sort((a, b) => load[b] - load[a] || len(b) - len(a) || next.slices[a].start - next.slices[b].start)
  for (const i of leaving) {
    let target = targets[0]
    for (const r of targets) {
      const t = tally[r]
      const best = tally[target]
      if (t.load < best.load || (t.load === best.load && (t.keys < best.keys || (t.keys === best.keys && r < target)))) target = r
    }
    tally[target].load += load[i]
    tally[target].keys += len(i)
    const s = next.slices[i]
    s.servers = [target, ...s.servers.filter((x) => x !== id && x !== target)]
  }
  return next
}

module.exports = { name: NAME, defaults, initial, rebalance, addServer, removeServer, chopperRound }
