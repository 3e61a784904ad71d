'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { InvalidArgumentError } = require('../../core/errors')

/**
 * What the dashboard draws, computed from plain data: pure functions, no I/O.
 *
 * The heatmap cannot draw slices directly: their number and bounds change every
 * round (split, merge). So each round is resampled onto a fixed grid: the
 * keyspace cut into `buckets` equal ranges, as Key Visualizer does with its
 * key buckets.
 */

/**
 * One heatmap column: per bucket, the load that fell in its keys (each slice's
 * load spread over the slice in proportion to overlap: a load report says
 * nothing finer than a slice) and the owner covering most of the bucket.
 * @param {{slices: {start:number,end:number,servers:string[]}[]}} assignment sorted slices tiling [0, 2^32)
 * @param {ArrayLike<number>} loads load per slice of `assignment`
 * @param {{buckets?: number, previous?: {servers: string[], owner: number[]}}} [options]
 *   `previous`: the last round's column, to list the buckets whose owner changed since
 * @returns {{servers: string[], owner: number[], load: number[], moved: number[]}}
 *   `owner[b]` indexes `servers` (the primaries' ids, sorted); `moved` lists the
 *   buckets whose owner differs from `previous` (empty without it)
 */
function keyspaceColumn (assignment, loads, { buckets = 256, previous } = {}) {
  if (!Number.isInteger(buckets) || buckets < 1 || buckets > 65536) throw new InvalidArgumentError('buckets must be an integer from 1 to 65536')
  const slices = assignment.slices
  if (!loads || loads.length !== slices.length) throw new InvalidArgumentError('loads must have one entry per slice')
  const servers = [...new Set(slices.map((s) => s.servers[0]))].sort()
  const index = new Map(servers.map((id, i) => [id, i]))
  const owner = new Array(buckets)
  const load = new Array(buckets)
  let i = 0
  for (let b = 0; b < buckets; b++) {
    const lo = Math.floor((b * KEYSPACE_SIZE) / buckets)
    const hi = Math.floor(((b + 1) * KEYSPACE_SIZE) / buckets)
    while (i < slices.length && slices[i].end <= lo) i++
    let sum = 0
    let best = -1
    let bestCover = 0
    let cover = null // owner index -> keys covered, only when several slices meet in the bucket
    for (let j = i; j < slices.length && slices[j].start < hi; j++) {
      const s = slices[j]
      const o = Math.min(s.end, hi) - Math.max(s.start, lo)
      if (loads[j] > 0) sum += (loads[j] * o) / (s.end - s.start)
      const who = index.get(s.servers[0])
      let c = o
      if (best !== -1 || cover) {
        cover = cover || new Map([[best, bestCover]])
        c = (cover.get(who) || 0) + o
        cover.set(who, c)
      }
      // Ties go to the lower server index, so a column does not depend on slice order.
      if (c > bestCover || (c === bestCover && who < best)) {
        best = who
        bestCover = c
      }
    }
    owner[b] = best
    load[b] = round3(sum)
  }
  return { servers, owner, load, moved: movedBuckets(previous, { servers, owner }) }
}

/**
 * Buckets whose owner differs between two columns (compared by server id: each
 * column numbers its own servers).
 * @returns {number[]}
 */
function movedBuckets (previous, column) {
  if (!previous || previous.owner.length !== column.owner.length) return []
  const out = []
  for (let b = 0; b < column.owner.length; b++) {
    if (previous.servers[previous.owner[b]] !== column.servers[column.owner[b]]) out.push(b)
  }
  return out
}

/**
 * Per server: how many slices name it beyond the primary (`servers[1..]`), the
 * replicas hot-slice replication would add. Every id in `assignment.servers`
 * is present, 0 when it holds no replica (always, today).
 * @returns {Object<string, number>}
 */
function replicaCounts (assignment) {
  const out = {}
  for (const id of Object.keys(assignment.servers)) out[id] = 0
  for (const s of assignment.slices) {
    for (let k = 1; k < s.servers.length; k++) {
      if (Object.hasOwn(out, s.servers[k])) out[s.servers[k]]++
    }
  }
  return out
}

// Three decimals keep a 256-bucket column small on the wire; loads are request counts per period.
function round3 (v) {
  return Math.round(v * 1000) / 1000
}

module.exports = { keyspaceColumn, movedBuckets, replicaCounts }
