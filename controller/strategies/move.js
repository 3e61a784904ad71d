'use strict'

const { indexServers, frozenFlags, toColumns, toWorking } = require('./columns')
const { take } = require('./scratch')

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
 *  - Within a donor, slices are tried hottest first (ties: lower start). A slice is skipped when
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
 *
 * Replicated slices (`rep[i] >= 0`, with `sets`): each server's *share* of
 * one (its load / its server count) is a candidate of that server like a
 * slice of its own, with the same rules, and moves to a receiver that does
 * not hold the slice yet, and only when its server is above the mean and
 * every other server of the slice is at or above it as the phase starts
 * (below it, the front ends already spill the donor's load there, request by
 * request; a donor at or below it needs no relief): the donor leaves the slice's set and the receiver
 * joins it at the end (so a donor that was the primary hands that role to
 * the next server, whose cache is warm). It costs the slice's key range, as
 * a move does. Without `sets` (or with `moveReplicas` false) replicated
 * slices stay where the replication phase put them; either way their shares
 * come in as `base`, a load on each of their servers that every comparison
 * above includes. A set with a frozen server (`setFrozen`) never moves.
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
 * Servers kept sorted by a total order while their loads change. The round
 * changes two servers per move, so instead of re-sorting every server on
 * every move (O(servers) or worse per move, quadratic over a round at 10,000
 * servers) each changed server is taken out and put back by binary search.
 */
class SortedServers {
  /**
   * @param {number[]} members server indices
   * @param {function(number, number): number} cmp total order (ties end on the index)
   */
  constructor (members, cmp) {
    this.cmp = cmp
    this.a = Int32Array.from(members).sort(cmp)
    this.size = this.a.length
  }

  /** First position whose server does not come before `x` in the order. */
  lowerBound (x) {
    let lo = 0
    let hi = this.size
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.cmp(this.a[mid], x) < 0) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  /** Call before changing `x`'s sort key (the order must still hold). */
  remove (x) {
    const p = this.lowerBound(x)
    this.a.copyWithin(p, p + 1, this.size)
    this.size--
  }

  /** Call after changing `x`'s sort key. */
  insert (x) {
    const p = this.lowerBound(x)
    this.a.copyWithin(p + 1, p, this.size)
    this.a[p] = x
    this.size++
  }

  /** Take out the server at position `p`. */
  removeAt (p) {
    this.a.copyWithin(p, p + 1, this.size)
    this.size--
  }

  /**
   * Call after changing the sort key of the server at position `p` (its
   * lowerBound before the change): it is moved to its new place, and only
   * the servers in between shift. A move changes a server's load by one
   * slice, so that is a few places, where remove and insert shifted every
   * server after both (at 10,000 servers, a tenth of the move phase).
   */
  reposition (p) {
    const { a, cmp } = this
    const x = a[p]
    if (p > 0 && cmp(x, a[p - 1]) < 0) {
      // its place is in a[0 .. p - 1], the first there that does not come before it
      let lo = 0
      let hi = p - 1
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (cmp(a[mid], x) < 0) lo = mid + 1
        else hi = mid
      }
      a.copyWithin(lo + 1, lo, p)
      a[lo] = x
    } else if (p + 1 < this.size && cmp(a[p + 1], x) < 0) {
      // a[p + 1 .. lo) come before it
      let lo = p + 2
      let hi = this.size
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (cmp(a[mid], x) < 0) lo = mid + 1
        else hi = mid
      }
      a.copyWithin(p, p + 1, lo)
      a[lo - 1] = x
    }
  }
}

/**
 * The order "least loaded first, then least keyspace, then lowest index" over
 * per-server `load` and `keys`, for SortedServers. It answers -1, 1 or the
 * index difference, never a load difference: a comparator's double result is
 * boxed on every call from the array sort (at 10,000 servers, 400,000 calls).
 * @param {Float64Array} load
 * @param {Float64Array} keys
 */
function coolestFirst (load, keys) {
  return (a, b) => (load[a] < load[b] ? -1 : load[a] > load[b] ? 1 : keys[a] < keys[b] ? -1 : keys[a] > keys[b] ? 1 : a - b)
}

/**
 * The move phase on columns (./columns.js), as the round runs it. Moves
 * change owners in place: `c.owner[i]` and `c.src[i]` (-1: replica list is
 * just the new owner).
 * @param {import('./columns').Columns} c slices in key order (mutated)
 * @param {string[]} ids server ids, sorted (owner indices refer to them)
 * @param {{ratio:number, meanRatio?:number, churnLimit:number, skipOverBudget:boolean, frozen:Uint8Array,
 *   base?:Float64Array, baseKeys?:Float64Array}} limits base, baseKeys: per server, the load
 *   and keys of the replicated slices it holds (their shares of load, all of their keys);
 *   sets, setFrozen: the round's replica sets (`rep` points into them; a moved share
 *   changes its set in place) and whether each has a frozen server. Without sets,
 *   replicated slices do not move
 * @returns {{ churn: number, ops: object[], stop: string }}
 */
function moveColumns (c, ids, { ratio, meanRatio = 0, churnLimit, skipOverBudget, frozen, base, baseKeys, sets, setFrozen }) {
  const { n, start, end, owner, load: sliceLoad, rep } = c
  // a replicated slice takes part when its sets are given and none of its servers is frozen
  const shares = sets !== undefined
  const m = ids.length
  const members = [] // every server that takes part, in id order
  for (let s = 0; s < m; s++) if (!frozen[s]) members.push(s)
  // with no server to take part there is nothing to compare: same as an idle period
  if (members.length === 0) return { churn: 0, ops: [], stop: 'idle' }

  const load = new Float64Array(m)
  const keys = new Float64Array(m)
  const receiver = new Uint8Array(m)
  // Each server's slices (and listed shares) as one flat
  // array: server s's list is list[offset[s] .. offset[s] + length[s]).
  const length = new Int32Array(m)
  for (let i = 0; i < n; i++) {
    const o = owner[i]
    if (rep[i] >= 0) continue // its shares are in `base`; listed below
    // a frozen server's slice: in no list, so it never moves
    if (frozen[o]) continue
    load[o] += sliceLoad[i] // summed in key order, as the rules' figures are
    keys[o] += end[i] - start[i]
    length[o]++
  }
  if (base) {
    for (let s = 0; s < m; s++) {
      load[s] += base[s]
      keys[s] += baseKeys[s]
    }
  }
  // A server's share of a replicated slice is listed only when every other
  // server of the slice is at or above the mean as the phase starts: the front
  // ends already move the load of a replicated slice between its servers,
  // request by request, towards the less busy one, so while one of them is
  // below the mean the share can go there without a move (which would cost a
  // cold cache). Decided once, so the scan never wades through refusals.
  let startTotal = 0
  for (const s of members) startTotal += load[s]
  const startMean = startTotal / members.length
  // Nor is a share listed on a server at or below the mean: that server needs no
  // relief, and moving its share to the coolest would only even out the servers
  // below the hottest at the price of a cold cache (the paper's "turn to the
  // second hottest server", which with three servers and a standby for every
  // slice moved 3 to 8 % of the keyspace in about one round of three in
  // scenario 9, for nothing).
  // So server s's share of set r is listed when s is above the mean and no
  // server of the set is below it (s itself is not, being above); `listed[i]`
  // keeps that answer for slice i, so the set is read once for it and once to list it.
  const listed = take(Uint8Array, n)
  // what each server holds, listed or not, for the "fewer than two slices" donor rule
  const holds = length.slice()
  if (shares) {
    const { pool, offset: first, size } = sets
    for (let i = 0; i < n; i++) {
      const r = rep[i]
      if (r < 0 || setFrozen[r]) continue
      const last = first[r] + size[r]
      let spills = false
      for (let k = first[r]; k < last; k++) {
        const s = pool[k]
        holds[s]++
        if (load[s] < startMean) spills = true
      }
      if (spills) continue
      listed[i] = 1
      for (let k = first[r]; k < last; k++) if (load[pool[k]] > startMean) length[pool[k]]++
    }
  }
  const offset = new Int32Array(m + 1)
  for (let s = 0; s < m; s++) offset[s + 1] = offset[s] + length[s]
  const list = take(Int32Array, offset[m])
  // Beside each entry, what moving it takes off its donor: the slice's load, or one share
  // (a set's size does not change within the phase). Kept with the list, not per slice,
  // so a scan reads both in order: per slice, at a million slices, each read was a cache miss.
  const amounts = take(Float64Array, offset[m])
  const fill = offset.slice(0, m)
  for (let i = 0; i < n; i++) {
    const r = rep[i]
    if (r < 0) {
      if (frozen[owner[i]]) continue
      const k = fill[owner[i]]++
      list[k] = i
      amounts[k] = sliceLoad[i]
      continue
    }
    if (!listed[i]) continue
    const share = sliceLoad[i] / sets.size[r]
    for (let k = sets.offset[r]; k < sets.offset[r] + sets.size[r]; k++) {
      const s = sets.pool[k]
      if (load[s] > startMean) {
        list[fill[s]] = i
        amounts[fill[s]++] = share
      }
    }
  }
  // Each list's smallest positive amount (Infinity: none; -1: not known yet, or the
  // list lost an entry since). Most donors looked at have nothing small enough for the
  // coolest (at 1,000 x 100 with standby replicas, 27 of every 28): this passes them in O(1).
  const smallest = new Float64Array(m).fill(-1)
  const smallestOf = (s) => {
    if (smallest[s] < 0) {
      let min = Infinity
      for (let k = offset[s]; k < offset[s] + length[s]; k++) {
        const a = amounts[k]
        if (a > 0 && a < min) min = a
      }
      smallest[s] = min
    }
    return smallest[s]
  }

  // total orders (ties end on the index), answering -1, 1 or an index difference (see coolestFirst)
  const byHeat = new SortedServers(members, (a, b) => (load[a] > load[b] ? -1 : load[a] < load[b] ? 1 : a - b))
  const byCool = new SortedServers(members, coolestFirst(load, keys))
  // The servers that may still donate, in byHeat's order: a receiver never donates, and
  // holds and length only shrink, so a server that fails the donor rules once fails them for
  // the rest of the phase. Scanning only these keeps a 10,000-server phase from wading
  // through the same refusals on every move.
  const canDonate = (s) => !receiver[s] && holds[s] >= 2 && length[s] > 0
  const donors = new SortedServers(members.filter(canDonate), byHeat.cmp)
  const inDonors = new Uint8Array(m)
  for (let p = 0; p < donors.size; p++) inDonors[donors.a[p]] = 1
  const widest = skipOverBudget ? churnLimit : Infinity

  // The first acceptable (donor, slice position), scanning donors hottest first. Within
  // a donor, its hottest acceptable slice (ties: lower start), found by one pass over its
  // list: the donors that give one were given a few slices each, so sorting their lists
  // hottest first (as this did) cost more than the passes (half the move phase with
  // standby replicas, whose shares make the lists long).
  function chooseMove (coolest, maxLoad, cap) {
    for (let p = 0; p < donors.size; p++) {
      const donor = donors.a[p]
      if (load[donor] <= load[coolest]) break // no hotter donor left
      if (donor === coolest) continue
      // step 4b: the receiver must not end hotter than the donor was (nor above the cap)
      const limit = Math.min(load[donor], cap)
      if (load[coolest] + smallestOf(donor) > limit) continue // true of every slice it has
      const base = offset[donor]
      let best = -1
      for (let k = 0; k < length[donor]; k++) {
        const amount = amounts[base + k]
        if (amount <= 0) continue // idle slices never move
        if (load[coolest] + amount > limit) continue
        const i = list[base + k]
        if (best >= 0) {
          const b = list[base + best]
          if (amount < amounts[base + best] || (amount === amounts[base + best] && start[i] > start[b])) continue
        }
        if (end[i] - start[i] > widest) continue // could never move, whatever budget is left
        if (rep[i] >= 0 && sets.has(rep[i], coolest)) continue // holds it already
        // raisesImbalance(load, donor, coolest, amount) in O(1): the donor only
        // cools, so the max grows exactly when the receiver passes it
        if (load[coolest] + amount > maxLoad) continue
        best = k
      }
      if (best >= 0) return { donor, position: best }
    }
    return null
  }

  // meanRatio (not in the paper): also keep moving while the hottest server is
  // above meanRatio x the mean. With many servers the coolest sits close to the
  // mean, so hottest/coolest < ratio alone leaves the hottest up to ratio x the mean.
  let total = 0
  for (const s of members) total += load[s]
  const ceiling = meanRatio > 0 ? meanRatio * total / members.length : Infinity
  let churn = 0
  let stop = 'max-moves'
  const ops = []
  for (let iteration = 0; iteration <= n; iteration++) {
    const hottest = byHeat.a[0]
    const coolest = byCool.a[0]
    if (load[hottest] === 0) { stop = 'idle'; break }
    const balanced = load[coolest] > 0 && load[hottest] / load[coolest] < ratio
    if (balanced && load[hottest] <= ceiling) { stop = 'ratio'; break }
    // Moving on only for the ceiling: the receiver must end at or below it, so
    // a move never just swaps which server is too hot (noise would churn).
    const pick = chooseMove(coolest, load[hottest], balanced ? ceiling : Infinity)
    if (pick === null) { stop = 'no-candidate'; break }
    const { donor, position } = pick
    const base = offset[donor]
    const i = list[base + position]
    const len = end[i] - start[i]
    if (churn + len > churnLimit) { stop = 'churn-limit'; break }

    const amount = amounts[base + position]
    list.copyWithin(base + position, base + position + 1, base + length[donor])
    amounts.copyWithin(base + position, base + position + 1, base + length[donor])
    length[donor]--
    if (amount <= smallest[donor]) smallest[donor] = -1 // else its smallest is still in the list
    holds[donor]--
    // the donor cools, then the receiver warms, each put back in its place in the orders
    const donorHeat = byHeat.lowerBound(donor)
    const donorCool = byCool.lowerBound(donor)
    const donorAt = donors.lowerBound(donor)
    load[donor] -= amount
    keys[donor] -= len
    byHeat.reposition(donorHeat)
    byCool.reposition(donorCool)
    if (canDonate(donor)) donors.reposition(donorAt)
    else {
      donors.removeAt(donorAt)
      inDonors[donor] = 0
    }
    // receivers never donate, so the receiver's list is not kept
    if (inDonors[coolest]) donors.remove(coolest)
    inDonors[coolest] = 0
    receiver[coolest] = 1
    const coolestHeat = byHeat.lowerBound(coolest)
    const coolestCool = byCool.lowerBound(coolest)
    load[coolest] += amount
    keys[coolest] += len
    byHeat.reposition(coolestHeat)
    byCool.reposition(coolestCool)
    if (rep[i] >= 0) {
      // the donor leaves the set, the receiver joins at its end; a donor that
      // was the primary hands that role to the next server (a warm cache)
      const { pool } = sets
      const first = sets.offset[rep[i]]
      const last = first + sets.size[rep[i]] - 1
      let at = first
      while (pool[at] !== donor) at++
      pool.copyWithin(at, at + 1, last + 1)
      pool[last] = coolest
      owner[i] = pool[first]
    } else {
      owner[i] = coolest
      c.src[i] = -1
    }
    churn += len
    ops.push({ op: 'move', start: start[i], end: end[i], from: ids[donor], to: ids[coolest], load: amount, churn: len, ...(rep[i] >= 0 ? { replicas: sets.size[rep[i]] } : {}) })
  }
  return { churn, ops, stop }
}

/**
 * @param {Array<{start:number,end:number,servers:string[],load:number}>} slices in key order
 * @param {string[]} serverIds every server of the assignment, sorted
 * @param {{ratio:number, meanRatio?:number, churnLimit:number, skipOverBudget?:boolean, frozen?:Set<string>}} limits
 *   churnLimit in keys; meanRatio 0 = off; frozen = servers that take no part (load unknown)
 * @returns {{ slices: object[], churn: number, ops: object[], stop: string }}
 */
function movePhase (slices, serverIds, { ratio, meanRatio = 0, churnLimit, skipOverBudget = true, frozen = new Set() }) {
  const index = indexServers(serverIds)
  const c = toColumns(slices, index)
  const r = moveColumns(c, index.ids, { ratio, meanRatio, churnLimit, skipOverBudget, frozen: frozenFlags(index, frozen) })
  return { slices: toWorking(c, index, slices), churn: r.churn, ops: r.ops, stop: r.stop }
}

module.exports = { movePhase, moveColumns, raisesImbalance, SortedServers, coolestFirst }
