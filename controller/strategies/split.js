'use strict'

const { Columns, indexServers, frozenFlags, toColumns, toWorking } = require('./columns')

const NONE = new Uint8Array(0)

/**
 * Chopper's split phase (paper 5.2.4): every slice whose load is above the
 * mean slice load is cut in two at its midpoint, `start + floor(len / 2)`;
 * both halves stay on the slice's server and each gets half of its load.
 * (The paper writes ranges as (a, b]; with our half-open [start, end) the
 * cut point is the same.)
 *
 * Limits the paper leaves open:
 *  - `minSliceLength`: both halves must be at least this long, so a slice
 *    shorter than 2 * minSliceLength is never split (with the default of 1,
 *    a one-key slice cannot be split);
 *  - `maxSlices`: when splitting every candidate would exceed this total,
 *    the hottest candidates (ties: lower start) are split first.
 * The mean is taken once, over the slices as they enter the phase.
 *
 * Slices owned by a *frozen* server (load unknown this period) are never
 * split, and their stale loads are left out of the mean (docs/algorithm.md,
 * "Servers with unknown load").
 *
 * A replicated slice (docs/algorithm.md, "Replication") is split like any
 * other, and both halves keep its whole replica set: a split changes no
 * server's keys, so it stays free. Unless one of its servers is frozen.
 *
 * `noise` (not in the paper; chopper's `splitNoise`, with replication on): a
 * slice is split only when its load is above the mean by more than `noise`
 * standard deviations of its own sampling noise. A load L stands for about
 * L / `unit` requests (`unit`: load per request), a Poisson count, so its
 * noise is sqrt(L × unit). 0 = the paper's threshold.
 *
 * Hot-key cuts (not in the paper; chopper's `hotKeyShare` as `hotShare`):
 * a slice to split whose hottest key (`c.hot`, from the app servers'
 * majority votes, core/hot-keys.js) carried at least `hotShare` of its load
 * is cut around that key instead of at its midpoint: [start, h), [h, h + 1)
 * and [h + 1, end), leaving out the empty ones. The key's one-key slice gets
 * the load it carried at least; the rest of the load goes to the others by
 * width. Halving would need up to 32 rounds (and as many new maps) to get a
 * hot key alone in a wide slice; this takes one, and a one-key slice is never
 * split again. Only with `minSliceLength` 1 (a one-key slice is shorter than
 * any larger minimum). Under `maxSlices`, a cut that does not fit may still
 * halve.
 */

/**
 * The split phase on columns (./columns.js), as the round runs it.
 * @param {Columns} c slices in key order (not mutated)
 * @param {string[]} ids server ids, sorted (owner indices refer to them)
 * @param {{maxSlices:number, minSliceLength:number, frozen:Uint8Array, setFrozen?:Uint8Array, noise?:number, unit?:number, hotShare?:number,
 *   hotOnly?:boolean, stale?:Uint8Array}} limits
 *   setFrozen: per replica set (`c.rep`), 1 = one of its servers is frozen; noise and unit: see above;
 *   hotShare: see "Hot-key cuts" above (0 = off); hotOnly: make the hot-key cuts only (chopper's round
 *   runs them before replication); stale: per slice, 1 = leave it as it is and out of the mean
 *   (instead of `frozen` and `setFrozen`)
 * @returns {{ cols: Columns, ops: object[] }} `cols` is `c` itself when nothing splits (no copy;
 *   a steady round splits nothing, and a copy was a million slices' worth of columns at 10,000 servers)
 */
function splitColumns (c, ids, { maxSlices, minSliceLength, frozen, setFrozen = NONE, noise = 0, unit = 1, hotShare = 0, hotOnly = false, stale: staleFlags = null }) {
  const { n, start, end, owner, load, rep, hot, hotLoad } = c
  const stale = staleFlags ? (i) => staleFlags[i] : (i) => (rep[i] >= 0 ? setFrozen[rep[i]] : frozen[owner[i]])
  let total = 0
  let counted = 0
  for (let i = 0; i < n; i++) {
    if (stale(i)) continue
    total += load[i]
    counted++
  }
  const mean = counted > 0 ? total / counted : Infinity // no known slice: nothing to split
  let candidates = []
  for (let i = 0; i < n; i++) {
    if (!stale(i) && aboveNoise(load[i], mean, noise, unit) && end[i] - start[i] >= 2 * minSliceLength) candidates.push(i)
  }
  // A hot-key cut makes 2 or 3 slices of one; the midpoint, 2.
  const cuts = new Map() // candidate -> true: cut around its hot key
  const extra = (i) => (cuts.get(i) ? (hot[i] > start[i]) + (hot[i] + 1 < end[i]) : 1)
  if (hotShare > 0 && minSliceLength === 1) {
    for (const i of candidates) if (hot[i] >= 0 && load[i] > 0 && hotLoad[i] >= hotShare * load[i]) cuts.set(i, true)
  }
  if (hotOnly) candidates = candidates.filter((i) => cuts.get(i))
  let room = Math.max(0, maxSlices - n)
  // nothing to split, or no room for any piece (a layout at maxSlices): the input as it is
  if (candidates.length === 0 || room === 0) return { cols: c, ops: [] }
  let need = 0
  for (const i of candidates) need += extra(i)
  if (need > room) {
    // the hottest first (ties: lower start); a cut that does not fit may still halve
    candidates.sort((a, b) => load[b] - load[a] || start[a] - start[b])
    const taken = []
    for (const i of candidates) {
      if (room === 0) break
      if (extra(i) > room) cuts.delete(i)
      room -= extra(i)
      taken.push(i)
    }
    candidates = taken.sort((a, b) => a - b) // back to key order
    need = 0
    for (const i of candidates) need += extra(i)
  }
  const out = new Columns(n + need)
  const ops = []
  let k = 0
  let next = 0 // position in candidates (key order) of the next slice to split
  const piece = (i, from, to, pieceLoad, withHot) => {
    out.copyFrom(c, i, k) // every piece keeps the slice's owner and replica list
    out.start[k] = from
    out.end[k] = to
    out.load[k] = pieceLoad
    if (!withHot) {
      out.hot[k] = -1
      out.hotLoad[k] = 0
    }
    k++
  }
  for (let i = 0; i < n; i++) {
    if (next === candidates.length || candidates[next] !== i) {
      out.copyFrom(c, i, k++)
      continue
    }
    next++
    if (cuts.get(i)) {
      // [start, h), [h, h + 1), [h + 1, end): the key alone in the middle, the rest of the
      // load spread over the other pieces by width
      const h = hot[i]
      const rest = Math.max(0, load[i] - hotLoad[i])
      const others = end[i] - start[i] - 1
      if (h > start[i]) piece(i, start[i], h, rest * (h - start[i]) / others, false)
      piece(i, h, h + 1, Math.min(load[i], hotLoad[i]), true)
      if (h + 1 < end[i]) piece(i, h + 1, end[i], rest * (end[i] - h - 1) / others, false)
      ops.push({ op: 'split', start: start[i], mid: h, end: end[i], hotKey: h, server: ids[owner[i]], load: load[i] })
      continue
    }
    const mid = start[i] + Math.floor((end[i] - start[i]) / 2)
    const half = load[i] / 2
    // the hot key, if any, stays with the half that holds it
    piece(i, start[i], mid, half, hot[i] >= 0 && hot[i] < mid)
    piece(i, mid, end[i], half, hot[i] >= mid)
    ops.push({ op: 'split', start: start[i], mid, end: end[i], server: ids[owner[i]], load: load[i] })
  }
  return { cols: out, ops }
}

/** `load` is above `mean`, by more than `noise` standard deviations of its sampling noise. */
function aboveNoise (load, mean, noise, unit) {
  return load > mean && (noise === 0 || load - mean > noise * Math.sqrt(load * unit))
}

/**
 * @param {Array<{start:number,end:number,servers:string[],load:number,hot?:{key:number,load:number}}>} slices in key order
 *   hot: the slice's hottest key and the load it carried at least (see "Hot-key cuts")
 * @param {{maxSlices:number, minSliceLength:number, frozen?:Set<string>, noise?:number, unit?:number, hotShare?:number}} limits
 *   frozen = servers whose slices must stay as they are; noise, unit and hotShare: see splitColumns
 * @returns {{ slices: object[], ops: object[] }}
 */
function splitPhase (slices, { maxSlices, minSliceLength, frozen = new Set(), noise = 0, unit = 1, hotShare = 0 }) {
  const index = indexServers(slices.map((s) => s.servers[0]))
  const limits = { maxSlices, minSliceLength, frozen: frozenFlags(index, frozen), noise, unit, hotShare }
  const hotKeys = slices.map((s) => (s.hot ? { key: s.hot.key, load: s.hot.load } : null))
  const r = splitColumns(toColumns(slices, index, undefined, hotKeys), index.ids, limits)
  return { slices: toWorking(r.cols, index, slices), ops: r.ops }
}

module.exports = { splitPhase, splitColumns }
