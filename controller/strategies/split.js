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
 */

/**
 * The split phase on columns (./columns.js), as the round runs it.
 * @param {Columns} c slices in key order (not mutated)
 * @param {string[]} ids server ids, sorted (owner indices refer to them)
 * @param {{maxSlices:number, minSliceLength:number, frozen:Uint8Array, setFrozen?:Uint8Array, noise?:number, unit?:number}} limits
 *   setFrozen: per replica set (`c.rep`), 1 = one of its servers is frozen; noise and unit: see above
 * @returns {{ cols: Columns, ops: object[] }}
 */
function splitColumns (c, ids, { maxSlices, minSliceLength, frozen, setFrozen = NONE, noise = 0, unit = 1 }) {
  const { n, start, end, owner, load, rep } = c
  const stale = (i) => (rep[i] >= 0 ? setFrozen[rep[i]] : frozen[owner[i]])
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
  const room = Math.max(0, maxSlices - n)
  if (candidates.length > room) {
    candidates.sort((a, b) => load[b] - load[a] || start[a] - start[b])
    candidates = candidates.slice(0, room).sort((a, b) => a - b) // back to key order
  }
  const out = new Columns(n + candidates.length)
  const ops = []
  let k = 0
  let next = 0 // position in candidates (key order) of the next slice to split
  for (let i = 0; i < n; i++) {
    if (next === candidates.length || candidates[next] !== i) {
      out.copyFrom(c, i, k++)
      continue
    }
    next++
    const mid = start[i] + Math.floor((end[i] - start[i]) / 2)
    const half = load[i] / 2
    out.copyFrom(c, i, k) // both halves keep the slice's owner and replica list
    out.end[k] = mid
    out.load[k++] = half
    out.copyFrom(c, i, k)
    out.start[k] = mid
    out.load[k++] = half
    ops.push({ op: 'split', start: start[i], mid, end: end[i], server: ids[owner[i]], load: load[i] })
  }
  return { cols: out, ops }
}

/** `load` is above `mean`, by more than `noise` standard deviations of its sampling noise. */
function aboveNoise (load, mean, noise, unit) {
  return load > mean && (noise === 0 || load - mean > noise * Math.sqrt(load * unit))
}

/**
 * @param {Array<{start:number,end:number,servers:string[],load:number}>} slices in key order
 * @param {{maxSlices:number, minSliceLength:number, frozen?:Set<string>, noise?:number, unit?:number}} limits
 *   frozen = servers whose slices must stay as they are; noise and unit: see splitColumns
 * @returns {{ slices: object[], ops: object[] }}
 */
function splitPhase (slices, { maxSlices, minSliceLength, frozen = new Set(), noise = 0, unit = 1 }) {
  const index = indexServers(slices.map((s) => s.servers[0]))
  const limits = { maxSlices, minSliceLength, frozen: frozenFlags(index, frozen), noise, unit }
  const r = splitColumns(toColumns(slices, index), index.ids, limits)
  return { slices: toWorking(r.cols, index, slices), ops: r.ops }
}

module.exports = { splitPhase, splitColumns }
