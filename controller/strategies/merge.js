'use strict'

/**
 * Chopper's merge phase (paper 5.2.2): join runs of two or more adjacent
 * slices whose combined load stays below the mean slice load.
 *
 * Working slices are `{ start, end, servers, load }` in key order; the phase
 * never mutates them and returns new ones.
 *
 * Rules, with the paper's numbering:
 *  2. a run grows only while its summed load stays strictly below the mean
 *     slice load, measured once at the start of the phase;
 *  1. a run spanning several owners gives the merged slice to its *keeper*,
 *     the owner of the largest share of the run's key range (ties: the lower
 *     id), so the keys that change owner, `runLength - keeperKeys`, are as
 *     few as possible; that churn is charged to the merge budget, and a run
 *     stops growing when the budget would be exceeded;
 *  3. the slice count never drops below the number of servers, and no server
 *     that owns slices is left with none (it would sit idle, 5.2.3's spirit).
 * Runs are grown greedily left to right; the merged slice's load is the sum.
 *
 * Slices owned by a *frozen* server (one whose load is unknown this period)
 * take no part: they neither start nor join a run, so a run ends at them, and
 * their stale loads are left out of the mean. See docs/algorithm.md, "Servers
 * with unknown load".
 *
 * Replicated slices (several servers, `rep[i] >= 0`, docs/algorithm.md,
 * "Replication") merge only with neighbours held by the very same servers in
 * the same order (no churn: nobody gains a key); merging one with any other
 * neighbour would either drop its replicas or hand the neighbour's keys to
 * every replica (new churn), and a hot slice is not a merge candidate anyway.
 * Without those merges, every slice having a standby replica (minReplicas 2)
 * made the split phase double the slice count round after round. Their loads
 * count in the mean, unless one of their servers is frozen.
 */

const { Columns, indexServers, frozenFlags, toColumns, toWorking } = require('./columns')

const NONE = new Uint8Array(0)

/**
 * The merge phase on columns (./columns.js), as the round runs it.
 * @param {Columns} c slices in key order (not mutated, unless `out` is `c`)
 * @param {string[]} ids server ids, sorted (owner indices refer to them)
 * @param {number} minSlices the slice count never drops below this (rule 3)
 * @param {number} churnLimit merge budget, in keys
 * @param {Uint8Array} frozen per server index: 1 = its slices take no part
 * @param {Uint8Array} [setFrozen] per replica set (`c.rep`): 1 = one of its servers is frozen
 * @param {import('./columns').ReplicaSets} [sets] the replica sets `c.rep` indexes (server indices, primary first)
 * @param {Columns} [out] where the merged slices go; may be `c` itself (the round's own columns):
 *   slice i is read before position k <= i is written, so merging in place needs no second copy
 * @returns {{ cols: Columns, churn: number, ops: object[] }}
 */
function mergeColumns (c, ids, minSlices, churnLimit, frozen, setFrozen = NONE, sets = null, out = new Columns(c.n)) {
  const { n, start, end, owner, load, rep } = c
  let total = 0
  let counted = 0
  for (let i = 0; i < n; i++) {
    if (rep[i] >= 0 ? setFrozen[rep[i]] : frozen[owner[i]]) continue
    total += load[i]
    counted++
  }
  // mean slice load before any merge, over the slices whose loads are known;
  // with none, 0: loads are >= 0, so nothing is strictly below it
  const threshold = counted > 0 ? total / counted : 0
  const ownedCount = new Int32Array(ids.length) // slices per primary owner in the whole assignment
  for (let i = 0; i < n; i++) ownedCount[owner[i]]++

  // The run being grown, per owner: key-range length and slice count inside
  // it. Indexed by server and reset after each run through `touched`, so a
  // run costs O(its length), not O(servers).
  const runKeys = new Float64Array(ids.length)
  const runCount = new Int32Array(ids.length)
  const touched = []

  let k = 0 // slices written to out
  let sliceCount = n
  let churn = 0
  const ops = []
  let i = 0
  while (i < n) {
    if (rep[i] >= 0 && i + 1 < n && rep[i + 1] >= 0 && !setFrozen[rep[i]] && sets.same(rep[i], rep[i + 1]) && load[i] + load[i + 1] < threshold) {
      // a run of slices on the very same servers: merged at no churn, keeping the set
      let j = i + 1
      let runLoad = load[i]
      while (j < n && rep[j] >= 0 && sets.same(rep[i], rep[j]) && runLoad + load[j] < threshold && sliceCount - (j - i) >= minSlices) runLoad += load[j++]
      out.copyFrom(c, i, k)
      out.end[k] = end[j - 1]
      out.load[k++] = runLoad
      if (j - i > 1) {
        sliceCount -= j - i - 1
        ops.push({ op: 'merge', start: start[i], end: end[j - 1], server: ids[owner[i]], slices: j - i, load: runLoad, churn: 0, replicas: sets.size[rep[i]] })
      }
      i = j
      continue
    }
    if (i + 1 === n || frozen[owner[i]] || frozen[owner[i + 1]] || rep[i] >= 0 || rep[i + 1] >= 0 || !(load[i] + load[i + 1] < threshold)) {
      out.copyFrom(c, i++, k++) // cannot start a run: skip the bookkeeping
      continue
    }
    const first = owner[i]
    let slices = 1
    let runLoad = load[i]
    let length = end[i] - start[i]
    runKeys[first] = length
    runCount[first] = 1
    touched.push(first)
    // the keeper owns the largest share of the run's keys (ties: lower id), so
    // `length - keeperKeys` keys change owner when the run is merged (rule 1)
    let keeper = first
    let keeperKeys = length
    // The owner whose every slice is inside the run, or -1. Merging would
    // leave it with none unless it keeps the run (rule 3); since a run that
    // would break this is refused, there is at most one, and it is the keeper.
    let exhausted = ownedCount[first] === 1 ? first : -1
    let j = i + 1
    // appending slice j removes one more slice from the total
    while (j < n && sliceCount - slices >= minSlices) {
      const o = owner[j]
      if (frozen[o] || rep[j] >= 0 || !(runLoad + load[j] < threshold)) break
      const len = end[j] - start[j]
      const keys = runKeys[o] + len
      const count = runCount[o] + 1
      let nextKeeper = keeper
      let nextKeeperKeys = keeperKeys
      if (o === keeper) nextKeeperKeys = keys
      else if (keys > keeperKeys || (keys === keeperKeys && o < keeper)) {
        nextKeeper = o
        nextKeeperKeys = keys
      }
      const ownerExhausted = count === ownedCount[o]
      if (exhausted !== -1 && exhausted !== nextKeeper) break
      if (ownerExhausted && o !== nextKeeper) break
      if (churn + (length + len - nextKeeperKeys) > churnLimit) break
      if (runCount[o] === 0) touched.push(o)
      runKeys[o] = keys
      runCount[o] = count
      runLoad += load[j]
      length += len
      keeper = nextKeeper
      keeperKeys = nextKeeperKeys
      if (ownerExhausted) exhausted = o
      slices++
      j++
    }
    if (slices === 1) {
      out.copyFrom(c, i, k++)
    } else {
      const runChurn = length - keeperKeys
      out.start[k] = start[i]
      out.end[k] = end[j - 1]
      out.owner[k] = keeper
      out.load[k] = runLoad
      out.hot[k] = c.hot[i] // its first part's hottest key: still inside it, its load still a lower bound
      out.hotLoad[k] = c.hotLoad[i]
      out.rep[k] = -1 // (a fresh Columns has it, but `out` may be `c`)
      out.src[k++] = -1 // the merged slice's replica list is just its keeper
      for (const o of touched) ownedCount[o] -= runCount[o]
      ownedCount[keeper]++
      sliceCount -= slices - 1
      churn += runChurn
      ops.push({ op: 'merge', start: start[i], end: end[j - 1], server: ids[keeper], slices, load: runLoad, churn: runChurn })
    }
    for (const o of touched) {
      runKeys[o] = 0
      runCount[o] = 0
    }
    touched.length = 0
    i = j
  }
  return { cols: out.truncate(k), churn, ops }
}

/**
 * @param {Array<{start:number,end:number,servers:string[],load:number}>} slices in key order
 * @param {string[]} serverIds every server of the assignment (including ones without slices)
 * @param {number} churnLimit merge budget, in keys
 * @param {Set<string>} [frozen] servers whose slices must stay as they are
 * @returns {{ slices: object[], churn: number, ops: object[] }}
 */
function mergePhase (slices, serverIds, churnLimit, frozen = new Set()) {
  const index = indexServers(serverIds)
  const r = mergeColumns(toColumns(slices, index), index.ids, serverIds.length, churnLimit, frozenFlags(index, frozen))
  return { slices: toWorking(r.cols, index, slices), churn: r.churn, ops: r.ops }
}

function copySlice (s) {
  return { start: s.start, end: s.end, servers: s.servers.slice(), load: s.load }
}

module.exports = { mergePhase, mergeColumns, copySlice }
