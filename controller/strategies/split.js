'use strict'

const { copySlice } = require('./merge')

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
 */

/**
 * @param {Array<{start:number,end:number,servers:string[],load:number}>} slices in key order
 * @param {{maxSlices:number, minSliceLength:number, frozen?:Set<string>}} limits
 *   frozen = servers whose slices must stay as they are
 * @returns {{ slices: object[], ops: object[] }}
 */
function splitPhase (slices, { maxSlices, minSliceLength, frozen = new Set() }) {
  const splittable = (s) => !frozen.has(s.servers[0])
  let total = 0
  let counted = 0
  for (const s of slices) {
    if (!splittable(s)) continue
    total += s.load
    counted++
  }
  const mean = counted > 0 ? total / counted : Infinity // no known slice: nothing to split
  let candidates = []
  slices.forEach((s, i) => {
    if (splittable(s) && s.load > mean && s.end - s.start >= 2 * minSliceLength) candidates.push(i)
  })
  const room = Math.max(0, maxSlices - slices.length)
  if (candidates.length > room) {
    candidates.sort((a, b) => slices[b].load - slices[a].load || slices[a].start - slices[b].start)
    candidates = candidates.slice(0, room)
  }
  const chosen = new Set(candidates)
  const out = []
  const ops = []
  slices.forEach((s, i) => {
    if (!chosen.has(i)) {
      out.push(copySlice(s))
      return
    }
    const mid = s.start + Math.floor((s.end - s.start) / 2)
    const half = s.load / 2
    out.push({ start: s.start, end: mid, servers: s.servers.slice(), load: half })
    out.push({ start: mid, end: s.end, servers: s.servers.slice(), load: half })
    ops.push({ op: 'split', start: s.start, mid, end: s.end, server: s.servers[0], load: s.load })
  })
  return { slices: out, ops }
}

module.exports = { splitPhase }
