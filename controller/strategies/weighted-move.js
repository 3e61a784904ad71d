'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { copySlice } = require('./merge')

/**
 * Slicer's weighted move (Adya et al., "Slicer: Auto-Sharding for Datacenter
 * Applications", OSDI '16, section 4.4.2), as the move phase of the
 * `slicer-weighted` strategy. Seed 000 only cites Slicer; the rule below is
 * our reading of it (docs/algorithm.md, "Slicer's weighted move").
 *
 * Each iteration:
 *  - hottest H = most loaded server (ties: id); coolest C = least loaded
 *    (ties: least keyspace, then id).
 *  - Candidates: every slice of H with load x > 0 whose key range fits the
 *    rest of the churn budget, as long as H keeps at least one slice.
 *  - Its imbalance reduction is (H - max(H - x, C + x)) / mean: how far the
 *    pair's larger load falls, in units of the mean server load. When H is
 *    the only server at the maximum this is exactly the fall of max/mean;
 *    when several tie at the maximum the global figure would not move until
 *    all of them shed load, so the pair's is used. It must be > 0 (so C ends
 *    below H's old load: no swaps, no overshoot).
 *  - weight = reduction / (range length / 2^32): imbalance removed per unit
 *    of key churn. The heaviest move runs (ties: larger reduction, then lower
 *    start), if its weight is at least `minWeight`; otherwise the phase stops.
 * Unlike chopper's first-acceptable rule, a narrow slice carrying a little
 * load can beat a wide one carrying more.
 *
 * Every move strictly lowers the sum of squared server loads (x < H - C), so
 * the loop ends; it is also capped at four times the slice count.
 * Frozen servers (load unknown) are left out, as in chopper's move phase.
 */

/**
 * @param {Array<{start:number,end:number,servers:string[],load:number}>} slices in key order
 * @param {string[]} serverIds every server of the assignment, sorted
 * @param {{churnLimit:number, minWeight:number, frozen?:Set<string>}} limits churnLimit in keys
 * @returns {{ slices: object[], churn: number, ops: object[], stop: string }}
 */
function weightedMovePhase (slices, serverIds, { churnLimit, minWeight, frozen = new Set() }) {
  const out = slices.map(copySlice)
  const servers = serverIds.filter((id) => !frozen.has(id)).map((id) => ({ id, load: 0, keys: 0, list: new Set() }))
  if (servers.length === 0) return { slices: out, churn: 0, ops: [], stop: 'idle' }
  const byId = new Map(servers.map((s) => [s.id, s]))
  let total = 0
  out.forEach((s, i) => {
    const owner = byId.get(s.servers[0])
    if (owner === undefined) return
    owner.load += s.load
    owner.keys += s.end - s.start
    owner.list.add(i)
    total += s.load
  })
  const mean = total / servers.length
  let churn = 0
  let stop = 'max-moves'
  const ops = []
  for (let iteration = 0; iteration < 4 * out.length; iteration++) {
    let hottest = servers[0]
    let coolest = servers[0]
    for (const s of servers) {
      if (s.load > hottest.load || (s.load === hottest.load && s.id < hottest.id)) hottest = s
      if (s.load < coolest.load || (s.load === coolest.load && (s.keys < coolest.keys || (s.keys === coolest.keys && s.id < coolest.id)))) coolest = s
    }
    if (hottest.load === 0) { stop = 'idle'; break }
    if (hottest === coolest || hottest.list.size < 2) { stop = 'no-candidate'; break }
    let best = null
    for (const i of hottest.list) {
      const s = out[i]
      const x = s.load
      const len = s.end - s.start
      if (x <= 0 || churn + len > churnLimit) continue
      const reduction = (hottest.load - Math.max(hottest.load - x, coolest.load + x)) / mean
      if (!(reduction > 0)) continue
      const weight = reduction / (len / KEYSPACE_SIZE)
      if (best === null || weight > best.weight || (weight === best.weight &&
        (reduction > best.reduction || (reduction === best.reduction && s.start < out[best.i].start)))) {
        best = { i, weight, reduction }
      }
    }
    if (best === null) { stop = 'no-candidate'; break }
    if (best.weight < minWeight) { stop = 'min-weight'; break }
    const s = out[best.i]
    const len = s.end - s.start
    hottest.list.delete(best.i)
    hottest.load -= s.load
    hottest.keys -= len
    coolest.list.add(best.i)
    coolest.load += s.load
    coolest.keys += len
    s.servers = [coolest.id]
    churn += len
    ops.push({ op: 'move', start: s.start, end: s.end, from: hottest.id, to: coolest.id, load: s.load, churn: len, weight: best.weight })
  }
  return { slices: out, churn, ops, stop }
}

module.exports = { weightedMovePhase }
