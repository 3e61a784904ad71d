'use strict'

const { indexServers, frozenFlags, toColumnsWithSets } = require('./columns')

/**
 * Chopper's primary phase (issue 10; neither the paper nor Slicer has it):
 * which of a replicated slice's servers is listed first. Front ends spread a
 * replicated slice's reads over its servers, but its writes all go to the
 * primary (docs/replication.md), so the primaries of the hot slices carry
 * load that no replica choice can move. Two hot slices with one primary put
 * both slices' writes on one server while another server writes none of them
 * (measured in scenario 1 before this phase: 1,961, 1,448 and 405 writes
 * over the three app servers).
 *
 * The phase runs last, on the round's final slices, and only reorders a
 * slice's servers: a new primary among the same servers is not a move (no
 * handoff, no cache warm-up, no churn), and kv-cache's versioned writes keep
 * a write admitted by the old primary under the old map safe (it is refused
 * in DynamoDB if the new primary's newer write landed first).
 *
 * The writes a slice pins are taken to be in proportion to its load (the
 * same mix of reads and writes on every key), so a server's pinned load is
 * the sum of the loads of the replicated slices it is primary of, counted
 * under the current primaries. Then, hottest slice first (ties: lower
 * start), a replicated slice whose load L is at least `floor` moves its
 * primary from P to the least pinned of its other servers, Q (ties: listed
 * first), when that lowers the pair's higher figure by more than the margin:
 * pinned(Q) + L < pinned(P) - `margin` x L. Passes repeat until none moves
 * a primary (each move lowers the sum of squares, so it ends; at most
 * `maxPasses`). A layout no move improves stays as it is, so loads that only
 * wobble, or a slice split in two halves, do not flap primaries from round to
 * round. Slices below `floor` (standbys of cold slices) keep theirs, as do
 * slices on a frozen server (load unknown), whose load still counts for
 * their primary.
 *
 * @param {Array<{start:number, end:number, servers:string[]}>} slices the round's output (mutated: `servers` reordered)
 * @param {ArrayLike<number>} loads per slice, aligned with `slices` (totals over the replicas)
 * @param {{ floor: number, margin: number, frozen: Set<string>, maxPasses?: number }} limits
 * @returns {{ ops: object[] }} one `{ op: 'primary', start, end, from, to, load }` per slice whose primary changed
 */
function balancePrimaries (slices, loads, { floor, margin, frozen, maxPasses = 4 }) {
  const index = indexServers(slices.flatMap((s) => s.servers))
  const { cols: c, rep, sets } = toColumnsWithSets(slices, index, loads)
  c.rep = rep
  const r = primaryColumns(c, sets, index.ids, { floor, margin, frozen: frozenFlags(index, frozen), maxPasses })
  for (const [i, list] of r.reordered) slices[i].servers = list.map((s) => index.ids[s])
  return { ops: r.ops }
}

/**
 * The primary phase on columns (./columns.js), as the round runs it, before
 * it builds the result's slices (server indices instead of ids: no lookup
 * by id per replicated slice).
 * @param {import('./columns').Columns} c the round's final slices; `c.rep[i]` is slice i's set in `sets`
 *   (-1: one server, no primary to choose)
 * @param {import('./columns').ReplicaSets} sets not mutated: split halves share a set, and each
 *   half's primary is chosen on its own
 * @param {string[]} ids server ids, sorted (for the ops)
 * @param {{ floor: number, margin: number, frozen: Uint8Array, maxPasses?: number }} limits frozen: per server index
 * @returns {{ ops: object[], reordered: Map<number, number[]> }} `reordered`: per slice the phase
 *   reordered, its servers (indices) in their new order (a primary moved away and back keeps the order
 *   the moves left, with no op)
 */
function primaryColumns (c, sets, ids, { floor, margin, frozen, maxPasses = 4 }) {
  const { n, start, end, load, rep } = c
  const { pool, offset, size } = sets
  const pinned = new Float64Array(ids.length)
  const onFrozen = (r) => {
    for (let k = offset[r]; k < offset[r] + size[r]; k++) if (frozen[pool[k]]) return true
    return false
  }
  const order = []
  for (let i = 0; i < n; i++) {
    const r = rep[i]
    if (r < 0 || !(load[i] > 0)) continue
    pinned[pool[offset[r]]] += load[i]
    if (load[i] >= floor && !onFrozen(r)) order.push(i)
  }
  // hottest first, ties: lower start. The comparator answers -1 or 1, never a load difference:
  // a double, boxed on every call from the sort (at 10,000 servers, millions of calls)
  order.sort((a, b) => (load[a] > load[b] ? -1 : load[a] < load[b] ? 1 : start[a] < start[b] ? -1 : start[a] > start[b] ? 1 : 0))
  const reordered = new Map() // slice index -> its servers once the phase reordered them
  const from = new Map() // slice index -> its primary before the phase
  for (let pass = 0; pass < maxPasses; pass++) {
    let moved = false
    for (const i of order) {
      const list = reordered.get(i)
      const servers = list || pool
      const first = list ? 0 : offset[rep[i]]
      const count = size[rep[i]]
      const L = load[i]
      const p = servers[first]
      let q = -1
      for (let k = first + 1; k < first + count; k++) if (q < 0 || pinned[servers[k]] < pinned[q]) q = servers[k]
      if (!(pinned[q] + L < pinned[p] - margin * L)) continue
      if (!from.has(i)) from.set(i, p)
      const next = [q]
      for (let k = first; k < first + count; k++) if (servers[k] !== q) next.push(servers[k])
      reordered.set(i, next)
      pinned[p] -= L
      pinned[q] += L
      moved = true
    }
    if (!moved) break
  }
  const ops = []
  for (const i of [...from.keys()].sort((a, b) => a - b)) {
    const to = reordered.get(i)[0]
    if (to !== from.get(i)) ops.push({ op: 'primary', start: start[i], end: end[i], from: ids[from.get(i)], to: ids[to], load: load[i] })
  }
  return { ops, reordered }
}

module.exports = { balancePrimaries, primaryColumns }
