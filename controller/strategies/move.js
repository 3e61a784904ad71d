'use strict'

const { copySlice } = require('./merge')

/**
 * Chopper's move phase (paper 5.2.3): move slices from hot servers to the
 * coolest server until the hottest/coolest load ratio falls below `ratio`,
 * no acceptable move is left, or the move churn budget would be exceeded.
 *
 * Each iteration (paper steps 2-6):
 *  - hottest = most loaded server, coolest = least loaded (ties: least
 *    keyspace, then id). Stop when hottest/coolest < ratio (a coolest load of
 *    0 counts as an infinite ratio unless everything is idle).
 *  - Donors are tried hottest first. A donor is skipped when it was a
 *    previous coolest/receiver this round (the paper's guard against moving
 *    slices back and forth), or owns fewer than two slices (its single hot
 *    slice stays and is split instead; the paper then turns to the second
 *    hottest server).
 *  - Within a donor, slices are tried hottest first. A slice is skipped when
 *    moving it would make the coolest server hotter than the donor was
 *    (step 4b), or would raise the imbalance max/mean (step 4c). Slices
 *    with no load are never moved: they would cost churn and cool nothing.
 *  - The first acceptable slice moves, unless its key range would push the
 *    phase's churn past `churnLimit`, in which case the phase stops (step 5).
 *
 * A moved slice lands on a receiver, and receivers never donate within the
 * round, so every slice moves at most once: the loop is bounded by the slice
 * count.
 *
 * A *frozen* server (its load is unknown this period) is left out entirely:
 * it is never the hottest, the coolest, a donor or a receiver, and its stale
 * load counts neither in the ratio that stops the phase nor in the imbalance
 * of step 4c. Its slices stay where they are. See docs/algorithm.md,
 * "Servers with unknown load".
 */

/**
 * True when moving `amount` of load from server `from` to server `to` would
 * raise the imbalance (max server load / mean server load, paper 5.2, step 4c).
 * A move conserves the total, so the mean is fixed and the imbalance grows
 * exactly when the max grows; comparing maxima avoids re-summing the total
 * (and float noise from doing so).
 * Given step 4b (the receiver ends no hotter than the donor was) this cannot
 * happen, since the max cannot grow; the check is kept because the paper
 * lists it and it guards any future change to 4b.
 * @param {ArrayLike<number>} serverLoad load per server
 * @param {number} from index of the donor
 * @param {number} to index of the receiver
 * @param {number} amount load moved
 */
function raisesImbalance (serverLoad, from, to, amount) {
  let before = -Infinity
  let after = -Infinity
  for (let i = 0; i < serverLoad.length; i++) {
    const v = serverLoad[i]
    if (v > before) before = v
    const w = i === from ? v - amount : i === to ? v + amount : v
    if (w > after) after = w
  }
  return after > before
}

/**
 * @param {Array<{start:number,end:number,servers:string[],load:number}>} slices in key order
 * @param {string[]} serverIds every server of the assignment, sorted
 * @param {{ratio:number, churnLimit:number, skipOverBudget?:boolean, frozen?:Set<string>}} limits
 *   churnLimit in keys; frozen = servers that take no part (load unknown)
 * @returns {{ slices: object[], churn: number, ops: object[], stop: string }}
 */
function movePhase (slices, serverIds, { ratio, churnLimit, skipOverBudget = true, frozen = new Set() }) {
  const out = slices.map(copySlice)
  const servers = serverIds
    .filter((id) => !frozen.has(id))
    .map((id, index) => ({ id, index, load: 0, keys: 0, list: [], receiver: false }))
  // with no server to take part there is nothing to compare: same as an idle period
  if (servers.length === 0) return { slices: out, churn: 0, ops: [], stop: 'idle' }
  const byId = new Map(servers.map((s) => [s.id, s]))
  out.forEach((s, i) => {
    const owner = byId.get(s.servers[0])
    if (owner === undefined) return // a frozen server's slice: in no list, so it never moves
    owner.load += s.load
    owner.keys += s.end - s.start
    owner.list.push(i)
  })
  const hotterSlice = (a, b) => out[b].load - out[a].load || out[a].start - out[b].start
  for (const s of servers) s.list.sort(hotterSlice)
  const loadOf = Float64Array.from(servers, (s) => s.load) // kept in step with servers[i].load
  const hotterServer = (a, b) => b.load - a.load || (a.id < b.id ? -1 : 1)
  const coolerServer = (a, b) => a.load - b.load || a.keys - b.keys || (a.id < b.id ? -1 : 1)

  let churn = 0
  let stop = 'max-moves'
  const ops = []
  // one move changes two servers, so re-sorting this array (TimSort) is near linear
  const ordered = servers.slice()
  for (let iteration = 0; iteration <= out.length; iteration++) {
    ordered.sort(hotterServer)
    const hottest = ordered[0]
    let coolest = servers[0]
    for (const s of servers) if (coolerServer(s, coolest) < 0) coolest = s
    if (hottest.load === 0) { stop = 'idle'; break }
    if (coolest.load > 0 && hottest.load / coolest.load < ratio) { stop = 'ratio'; break }

    const pick = chooseMove(out, ordered, coolest, loadOf, skipOverBudget ? churnLimit : Infinity)
    if (pick === null) { stop = 'no-candidate'; break }
    const { donor, position } = pick
    const index = donor.list[position]
    const slice = out[index]
    const len = slice.end - slice.start
    if (churn + len > churnLimit) { stop = 'churn-limit'; break }

    donor.list.splice(position, 1)
    donor.load -= slice.load
    donor.keys -= len
    coolest.load += slice.load
    coolest.keys += len
    coolest.list.push(index) // receivers never donate, so its order no longer matters
    coolest.receiver = true
    loadOf[donor.index] = donor.load
    loadOf[coolest.index] = coolest.load
    slice.servers = [coolest.id]
    churn += len
    ops.push({ op: 'move', start: slice.start, end: slice.end, from: donor.id, to: coolest.id, load: slice.load, churn: len })
  }
  return { slices: out, churn, ops, stop }
}

/** The first acceptable (donor, slice position), scanning donors hottest first. */
function chooseMove (slices, ordered, coolest, loadOf, widest) {
  for (const donor of ordered) {
    if (donor.load <= coolest.load) break // no hotter donor left
    if (donor === coolest || donor.receiver || donor.list.length < 2) continue
    // slices are sorted hottest first, so "receiver would end hotter than the
    // donor was" holds for a prefix: binary-search past it
    const list = donor.list
    const tooHot = (k) => coolest.load + slices[list[k]].load > donor.load
    let lo = 0
    let hi = list.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (tooHot(mid)) lo = mid + 1
      else hi = mid
    }
    for (let k = lo; k < list.length; k++) {
      const amount = slices[list[k]].load
      if (amount <= 0) break // the rest are idle slices
      const s = slices[list[k]]
      if (s.end - s.start > widest) continue // could never move, whatever budget is left
      if (raisesImbalance(loadOf, donor.index, coolest.index, amount)) continue
      return { donor, position: k }
    }
  }
  return null
}

module.exports = { movePhase, raisesImbalance }
