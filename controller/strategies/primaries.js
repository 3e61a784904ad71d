'use strict'

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
  // pinned load per server, in an array by a number given to each id as it is first seen
  // (a Map of doubles boxed a new number per replicated slice)
  const number = new Map()
  const sums = []
  const slot = (id) => {
    let k = number.get(id)
    if (k === undefined) {
      k = sums.length
      number.set(id, k)
      sums.push(0)
    }
    return k
  }
  const get = (id) => sums[slot(id)]
  const order = []
  for (let i = 0; i < slices.length; i++) {
    const servers = slices[i].servers
    if (servers.length < 2 || !(loads[i] > 0)) continue
    sums[slot(servers[0])] += loads[i]
    if (loads[i] >= floor && !servers.some((id) => frozen.has(id))) order.push(i)
  }
  order.sort((a, b) => loads[b] - loads[a] || slices[a].start - slices[b].start)
  const from = new Map() // slice index -> its primary before the phase
  for (let pass = 0; pass < maxPasses; pass++) {
    let moved = false
    for (const i of order) {
      const servers = slices[i].servers
      const L = loads[i]
      const p = servers[0]
      let q = null
      for (let k = 1; k < servers.length; k++) if (q === null || get(servers[k]) < get(q)) q = servers[k]
      if (!(get(q) + L < get(p) - margin * L)) continue
      if (!from.has(i)) from.set(i, p)
      slices[i].servers = [q, ...servers.filter((id) => id !== q)]
      sums[slot(p)] = get(p) - L
      sums[slot(q)] = get(q) + L
      moved = true
    }
    if (!moved) break
  }
  const ops = []
  for (const i of [...from.keys()].sort((a, b) => a - b)) {
    const to = slices[i].servers[0]
    if (to !== from.get(i)) ops.push({ op: 'primary', start: slices[i].start, end: slices[i].end, from: from.get(i), to, load: loads[i] })
  }
  return { ops }
}

module.exports = { balancePrimaries }
