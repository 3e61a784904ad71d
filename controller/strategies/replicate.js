'use strict'

const { SortedServers, coolestFirst } = require('./move')
const { ReplicaSets } = require('./columns')
const { take } = require('./scratch')

/**
 * Chopper's replication phase: asymmetric replication of hot slices, as in
 * Slicer (Adya et al., OSDI '16; the Chopper paper has no replicas). It runs
 * first in the round, so a slice that turns hot gets its replicas in the
 * round that first sees it hot. docs/algorithm.md, "Replication", has the
 * rules with the reasons and the measurements behind the defaults.
 *
 * Loads are per-slice totals (summed over the replicas' reports). A slice of
 * load L on r servers puts L / r on each (front ends spread its requests,
 * docs/replication.md). With M = mean server load over the known servers and
 * unit u = max(`fraction` x M, mean slice load):
 *
 *   up   = clamp(ceil(L / u), minReplicas, cap)
 *   down = clamp(ceil(L / ((1 - hysteresis) x u)), minReplicas, cap)
 *
 * where cap = min(maxReplicas or infinity, number of known servers).
 *  - Grow to `up` when up > r and one of the slice's servers is above the
 *    balance target, `ratio` x M: "one server cannot carry it". (Growth to
 *    minReplicas needs no such reason.)
 *  - Shrink to `down` when down < r; otherwise keep r. Replicas come as soon
 *    as a share would exceed u but go only once the shares after the drop
 *    stay below (1 - hysteresis) x u, so a slice near the threshold does not
 *    flap.
 * u is never below the mean slice load: a slice no hotter than an average
 * slice is the split phase's business (free), not replication's (churn).
 *
 * Placement keeps what it can (a replica's cache is warm):
 *  - a drop removes the replicas on the most loaded servers (ties: the one
 *    listed last), never the primary. Dropping is free.
 *  - growth runs hottest slice first (ties: lower start). New replicas go to
 *    the least-loaded known servers that do not hold the slice (ties: least
 *    keyspace, then id) and are appended after the existing servers. Each
 *    costs the slice's key-range length (core/assignment.js keyChurn: its
 *    cache starts cold), charged to `churnLimit`; a slice gets as many of its
 *    missing replicas as the budget left allows, and one that cannot afford
 *    any is skipped (narrower ones still may).
 *  - then any server left hotter than the hottest server was before growth
 *    gives back its newest replicas until it is not (move step 4c's rule:
 *    never raise the imbalance). That happens when the budget replicated some
 *    hot slices onto a server whose own hot slice it could not afford.
 *
 * A slice with a frozen server (load unknown this period) keeps its servers
 * exactly, and frozen servers receive no replica; they count in neither M,
 * the mean slice load nor the number of servers.
 */

/**
 * @param {import('./columns').Columns} c the round's input slices in key order; `c.src[i]` is
 *   set to -1 where a slice drops to one server, `c.rep` is filled in (both mutated)
 * @param {string[]} ids server ids, sorted
 * @param {{rep: Int32Array, sets: ReplicaSets}} input the assignment's replica lists
 *   (columns.js indexSets; `c.src[i]` is slice i's input slice: the round's hot-key cuts run
 *   first, so its pieces share their input slice's list)
 * @param {{fraction:number, minReplicas:number, maxReplicas:number, hysteresis:number,
 *   churnLimit:number, ratio:number, frozen:Uint8Array}} limits churnLimit in keys; maxReplicas 0 = no cap;
 *   ratio = replicateRatio, the balance target for growth
 * @returns {{ sets: ReplicaSets, setFrozen: Uint8Array, base: Float64Array, baseKeys: Float64Array,
 *   churn: number, ops: object[] }} set `c.rep[i]` is slice i's replica set (server indices,
 *   primary first); base / baseKeys: per server, its shares of the replicated slices' load and their keys
 */
function replicateColumns (c, ids, input, { fraction, minReplicas, maxReplicas, hysteresis, churnLimit, ratio, frozen }) {
  const { n, start, end, load: sliceLoad } = c
  const { pool, offset, size } = input.sets
  const m = ids.length
  const load = new Float64Array(m) // spread load per server, kept current as sets change
  const keys = new Float64Array(m)
  // Per slice, its input set (`from(i)`, an index into input.sets, or -1 for [owner]) until the
  // phase changes it (`changed[i]`); then `newSets.get(i)`, an array, or null for [owner]. Only
  // the few slices that change get an array of their own.
  const inputRep = input.rep
  const src = c.src
  const from = (i) => inputRep[src[i]]
  const changed = take(Uint8Array, n)
  const newSets = new Map()
  const stale = take(Uint8Array, n) // one of its servers is frozen: the slice is left as it is
  let sliceTotal = 0 // over the slices that are not stale, for the mean slice load
  let sliceCount = 0
  for (let i = 0; i < n; i++) {
    const r = inputRep[src[i]]
    const len = end[i] - start[i]
    if (r < 0) {
      const o = c.owner[i]
      load[o] += sliceLoad[i]
      keys[o] += len
      stale[i] = frozen[o]
    } else {
      const share = sliceLoad[i] / size[r]
      for (let k = offset[r]; k < offset[r] + size[r]; k++) {
        const s = pool[k]
        load[s] += share
        keys[s] += len
        if (frozen[s]) stale[i] = 1
      }
    }
    if (!stale[i]) {
      sliceTotal += sliceLoad[i]
      sliceCount++
    }
  }
  /** Slice i's servers now, as a fresh array (primary first). */
  const setOf = (i) => (changed[i] ? (newSets.get(i) || [c.owner[i]]) : from(i) >= 0 ? input.sets.toArray(from(i)) : [c.owner[i]])
  const sizeOf = (i) => (changed[i] ? (newSets.get(i) ? newSets.get(i).length : 1) : from(i) >= 0 ? size[from(i)] : 1)
  /** True when one of slice i's servers carries more than `bound` now (read in place: no array for the many unchanged). */
  const anyAbove = (i, bound) => {
    if (changed[i]) return setOf(i).some((s) => load[s] > bound)
    const f = from(i)
    if (f < 0) return load[c.owner[i]] > bound
    for (let k = offset[f]; k < offset[f] + size[f]; k++) if (load[pool[k]] > bound) return true
    return false
  }
  const change = (i, set) => {
    changed[i] = 1
    newSets.set(i, set)
  }
  let known = 0
  let total = 0
  for (let s = 0; s < m; s++) {
    if (frozen[s]) continue
    known++
    total += load[s]
  }
  const ops = []
  let churn = 0
  if (known > 0 && total > 0) {
    // never finer than the layout's own grain: a slice no hotter than the mean
    // slice is left to the split phase (free), not replicated (costs churn)
    const unit = Math.max(fraction * (total / known), sliceCount > 0 ? sliceTotal / sliceCount : 0)
    const overloaded = ratio * (total / known) // the balance target: above it, a server cannot carry its load
    const cap = maxReplicas > 0 ? Math.min(maxReplicas, known) : known
    const floor = Math.min(minReplicas, cap)
    const clamp = (r) => Math.min(cap, Math.max(floor, r))
    const grow = []
    const want = new Map() // slice -> the servers it grows to (few slices: no per-slice array)
    for (let i = 0; i < n; i++) {
      if (stale[i]) continue
      const L = sliceLoad[i]
      const f = inputRep[src[i]]
      const r = changed[i] ? sizeOf(i) : f >= 0 ? size[f] : 1
      const up = clamp(Math.ceil(L / unit))
      let target = r
      if (up > r) {
        // grow past minReplicas only to relieve a server above the balance target
        target = anyAbove(i, overloaded) ? up : Math.max(r, floor)
      } else if (up < r) {
        target = Math.min(r, clamp(Math.ceil(L / ((1 - hysteresis) * unit))))
      }
      if (target > r) {
        want.set(i, target)
        grow.push(i)
      } else if (target < r) {
        ops.push(drop(i, target))
      }
    }
    if (grow.length > 0) churn = growAll(grow, want, maxKnownLoad())
  }

  function maxKnownLoad () {
    let max = 0
    for (let s = 0; s < m; s++) if (!frozen[s] && load[s] > max) max = load[s]
    return max
  }

  /** Shrink slice i's set to `target` servers, dropping the replicas on the most loaded servers. */
  function drop (i, target) {
    const set = setOf(i)
    const L = sliceLoad[i]
    const len = end[i] - start[i]
    // candidates: every position but the primary's, most loaded first (ties: listed last)
    const order = set.map((s, p) => p).slice(1).sort((a, b) => load[set[b]] - load[set[a]] || b - a)
    const gone = new Set(order.slice(0, set.length - target))
    const kept = set.filter((s, p) => !gone.has(p))
    for (const s of set) load[s] -= L / set.length
    for (const s of kept) load[s] += L / kept.length
    const dropped = set.filter((s, p) => gone.has(p))
    for (const s of dropped) keys[s] -= len
    change(i, kept.length > 1 ? kept : null)
    return { op: 'unreplicate', start: start[i], end: end[i], servers: dropped.map((s) => ids[s]), replicas: kept.length, load: L }
  }

  /**
   * Add replicas, hottest slice first, within the churn budget, then take back
   * the ones that leave a server above `bound`; returns the churn used.
   */
  function growAll (grow, want, bound) {
    grow.sort((a, b) => sliceLoad[b] - sliceLoad[a] || start[a] - start[b])
    const members = []
    for (let s = 0; s < m; s++) if (!frozen[s]) members.push(s)
    const byCool = new SortedServers(members, coolestFirst(load, keys))
    const holds = new Uint8Array(m)
    const had = new Map() // slice -> its server count before growing
    const added = Array.from({ length: m }, () => []) // per server: slices it joined, in order
    let used = 0
    for (const i of grow) {
      const len = end[i] - start[i]
      const set = setOf(i)
      let k = Math.min(want.get(i) - set.length, Math.floor((churnLimit - used) / len))
      while (k > 0 && used + k * len > churnLimit) k-- // guard against rounding in the division
      if (k <= 0) continue // cannot afford even one: a narrower slice still may
      for (const s of set) holds[s] = 1
      const gained = []
      for (let p = 0; p < byCool.size && gained.length < k; p++) {
        const s = byCool.a[p]
        if (!holds[s]) gained.push(s)
      }
      for (const s of set) holds[s] = 0
      const next = set.concat(gained)
      const L = sliceLoad[i]
      for (const s of next) byCool.remove(s)
      for (const s of set) load[s] -= L / set.length
      for (const s of next) load[s] += L / next.length
      for (const s of gained) {
        keys[s] += len
        added[s].push(i)
      }
      for (const s of next) byCool.insert(s)
      change(i, next)
      had.set(i, set.length)
      used += gained.length * len
    }
    // Every slice's share shrinks as it gains replicas, but a server that took
    // shares while its own hot slice could not be replicated (budget) can end
    // up hotter than anything was before. Take back such a server's newest
    // replicas until it is within the bound: the larger of the hottest load
    // before growth and moveRatio x the mean (move step 4c's spirit: do not
    // raise the imbalance beyond the balance target). Each step removes one
    // replica, so this ends.
    const slack = bound * 1e-12 // summation noise
    for (let again = true; again;) {
      again = false
      for (let s = 0; s < m; s++) {
        while (load[s] > bound + slack && added[s].length > 0) {
          const i = added[s].pop()
          const set = newSets.get(i)
          const L = sliceLoad[i]
          const next = set.filter((x) => x !== s)
          for (const x of set) load[x] -= L / set.length
          for (const x of next) load[x] += L / next.length
          keys[s] -= end[i] - start[i]
          change(i, next.length > 1 ? next : null)
          again = true
        }
      }
    }
    used = 0
    for (const [i, before] of had) {
      const set = setOf(i)
      if (set.length === before) continue
      const len = end[i] - start[i]
      const gained = set.slice(before)
      used += gained.length * len
      ops.push({ op: 'replicate', start: start[i], end: end[i], servers: gained.map((s) => ids[s]), replicas: set.length, load: sliceLoad[i], churn: gained.length * len })
    }
    return used
  }

  // The result: a table of the sets of two or more servers, `c.rep` pointing into it.
  // (Most slices keep their input set: those take the short paths.)
  let count = 0
  let members = 0
  for (let i = 0; i < n; i++) {
    const f = inputRep[src[i]]
    const k = changed[i] ? sizeOf(i) : f >= 0 ? size[f] : 1
    if (k < 2) continue
    count++
    members += k
  }
  const table = new ReplicaSets(count, members)
  const setFrozen = new Uint8Array(count)
  const base = new Float64Array(m)
  const baseKeys = new Float64Array(m)
  const { pool: tablePool, offset: tableOffset, size: tableSize } = table
  for (let i = 0; i < n; i++) {
    const f = inputRep[src[i]]
    let r
    if (!changed[i]) {
      if (f < 0) continue
      r = table.add(pool, offset[f], offset[f] + size[f])
    } else {
      const set = newSets.get(i)
      if (set === null) {
        if (f >= 0) c.src[i] = -1 // dropped to its primary alone
        continue
      }
      r = table.add(set, 0, set.length)
    }
    c.rep[i] = r
    setFrozen[r] = stale[i]
    const share = sliceLoad[i] / tableSize[r]
    const len = end[i] - start[i]
    for (let k = tableOffset[r]; k < tableOffset[r] + tableSize[r]; k++) {
      base[tablePool[k]] += share
      baseKeys[tablePool[k]] += len
    }
  }
  return { sets: table, setFrozen, base, baseKeys, churn, ops }
}

module.exports = { replicateColumns }
