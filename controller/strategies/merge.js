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
 */

/** A run of adjacent slices being considered for one merge. */
class Run {
  constructor (first, ownedCount) {
    this.ownedCount = ownedCount // slices per primary owner in the whole assignment
    this.slices = [first]
    this.load = first.load
    this.length = first.end - first.start
    const owner = first.servers[0]
    this.keys = new Map([[owner, this.length]]) // key-range length per owner inside the run
    this.count = new Map([[owner, 1]]) // slices per owner inside the run
    this.keeper = owner
    this.keeperKeys = this.length
    // owners whose every slice is inside the run: only the keeper may be one
    this.exhausted = ownedCount.get(owner) === 1 ? new Set([owner]) : new Set()
  }

  /** Key-range length that changes owner if the run is merged now. */
  get churn () {
    return this.length - this.keeperKeys
  }

  /**
   * What the run would look like with slice `s` appended, or null if that
   * would leave a server without slices. Commit with `add(trial)`.
   */
  tryAdd (s) {
    const owner = s.servers[0]
    const len = s.end - s.start
    const keys = (this.keys.get(owner) || 0) + len
    const count = (this.count.get(owner) || 0) + 1
    let keeper = this.keeper
    let keeperKeys = this.keeperKeys
    if (owner === keeper) keeperKeys = keys
    else if (keys > keeperKeys || (keys === keeperKeys && owner < keeper)) {
      keeper = owner
      keeperKeys = keys
    }
    const ownerExhausted = count === this.ownedCount.get(owner)
    for (const id of this.exhausted) if (id !== keeper) return null
    if (ownerExhausted && owner !== keeper) return null
    return { s, owner, len, keys, count, keeper, keeperKeys, ownerExhausted, churn: this.length + len - keeperKeys }
  }

  add (t) {
    this.slices.push(t.s)
    this.load += t.s.load
    this.length += t.len
    this.keys.set(t.owner, t.keys)
    this.count.set(t.owner, t.count)
    this.keeper = t.keeper
    this.keeperKeys = t.keeperKeys
    if (t.ownerExhausted) this.exhausted.add(t.owner)
  }
}

/**
 * @param {Array<{start:number,end:number,servers:string[],load:number}>} slices in key order
 * @param {string[]} serverIds every server of the assignment (including ones without slices)
 * @param {number} churnLimit merge budget, in keys
 * @param {Set<string>} [frozen] servers whose slices must stay as they are
 * @returns {{ slices: object[], churn: number, ops: object[] }}
 */
function mergePhase (slices, serverIds, churnLimit, frozen = new Set()) {
  const n = slices.length
  const mergeable = (s) => !frozen.has(s.servers[0])
  let total = 0
  let counted = 0
  for (const s of slices) {
    if (!mergeable(s)) continue
    total += s.load
    counted++
  }
  // mean slice load before any merge, over the slices whose loads are known;
  // with none, 0: loads are >= 0, so nothing is strictly below it
  const threshold = counted > 0 ? total / counted : 0
  const ownedCount = new Map(serverIds.map((id) => [id, 0]))
  for (const s of slices) ownedCount.set(s.servers[0], ownedCount.get(s.servers[0]) + 1)

  const minSlices = serverIds.length
  let sliceCount = n
  let churn = 0
  const out = []
  const ops = []
  let i = 0
  while (i < n) {
    if (i + 1 === n || !mergeable(slices[i]) || !mergeable(slices[i + 1]) ||
      !(slices[i].load + slices[i + 1].load < threshold)) {
      out.push(copySlice(slices[i])) // cannot start a run: skip the bookkeeping
      i++
      continue
    }
    const run = new Run(slices[i], ownedCount)
    let j = i + 1
    // appending slices[j] removes one more slice from the total
    while (j < n && sliceCount - run.slices.length >= minSlices) {
      const s = slices[j]
      if (!mergeable(s) || !(run.load + s.load < threshold)) break
      const trial = run.tryAdd(s)
      if (trial === null || churn + trial.churn > churnLimit) break
      run.add(trial)
      j++
    }
    if (run.slices.length === 1) {
      out.push(copySlice(slices[i]))
    } else {
      const first = run.slices[0]
      const last = run.slices[run.slices.length - 1]
      out.push({ start: first.start, end: last.end, servers: [run.keeper], load: run.load })
      for (const [id, c] of run.count) ownedCount.set(id, ownedCount.get(id) - c)
      ownedCount.set(run.keeper, ownedCount.get(run.keeper) + 1)
      sliceCount -= run.slices.length - 1
      churn += run.churn
      ops.push({ op: 'merge', start: first.start, end: last.end, server: run.keeper, slices: run.slices.length, load: run.load, churn: run.churn })
    }
    i = j
  }
  return { slices: out, churn, ops }
}

function copySlice (s) {
  return { start: s.start, end: s.end, servers: s.servers.slice(), load: s.load }
}

module.exports = { mergePhase, copySlice }
