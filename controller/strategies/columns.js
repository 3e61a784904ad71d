'use strict'

/**
 * Slices as parallel typed arrays ("columns"), the form the round works on.
 *
 * Why: at 10,000 servers x 100 slices a round handles a million slices. As
 * `{ start, end, servers, load }` objects each phase allocated a million new
 * objects and arrays, and garbage collection took most of the round
 * (docs/algorithm.md, "Performance"). Columns are allocated once per phase,
 * and objects are built once, for the result.
 *
 * Servers are numbered by their position in the *sorted* id list, so index
 * order is id order (`a < b` on ids, UTF-16 code units, as the rules' "ties:
 * lower id" compare them).
 *
 * `src[i]` says what slice i's replica list is: the index of the input slice
 * whose `servers` array it keeps (unmerged, unmoved slices and split halves),
 * or -1 when the slice was merged or moved and its list is just `[owner]`.
 *
 * `rep[i]` is -1 for a slice on one server, or the index of its replica set
 * (server indices, primary first) in the round's table of sets, when the
 * replication phase (./replicate.js) gave it several servers. Such a slice's
 * list is that set, whatever `src` says.
 *
 * `hot[i]` is the slice's hottest key (a slice key inside it) when the app
 * servers' reports named one, else -1, and `hotLoad[i]` the load that key
 * carried at least (inputs.hotKeys, core/hot-keys.js). A merged slice keeps
 * its first part's, still a key inside it and a lower bound.
 */
class Columns {
  constructor (n) {
    this.n = n
    this.start = new Float64Array(n) // keys go up to 2^32, beyond Int32/Uint32 for `end`
    this.end = new Float64Array(n)
    this.owner = new Int32Array(n) // index into the sorted server ids
    this.load = new Float64Array(n)
    this.src = new Int32Array(n)
    this.rep = new Int32Array(n).fill(-1)
    this.hot = new Float64Array(n).fill(-1)
    this.hotLoad = new Float64Array(n)
  }

  /** Copy slice `i` of `from` to position `k` of this. */
  copyFrom (from, i, k) {
    this.start[k] = from.start[i]
    this.end[k] = from.end[i]
    this.owner[k] = from.owner[i]
    this.load[k] = from.load[i]
    this.src[k] = from.src[i]
    this.rep[k] = from.rep[i]
    this.hot[k] = from.hot[i]
    this.hotLoad[k] = from.hotLoad[i]
  }

  /** The first `n` slices only (phases allocate for the worst case). */
  truncate (n) {
    const c = new Columns(0)
    c.n = n
    for (const f of ['start', 'end', 'owner', 'load', 'src', 'rep', 'hot', 'hotLoad']) c[f] = this[f].subarray(0, n)
    return c
  }
}

/**
 * Server ids sorted, with a lookup from id to index.
 * @param {Iterable<string>} ids
 */
function indexServers (ids) {
  const sorted = [...new Set(ids)].sort()
  return { ids: sorted, indexOf: new Map(sorted.map((id, i) => [id, i])) }
}

/** Frozen server ids as a per-index flag array. */
function frozenFlags (index, frozen) {
  const flags = new Uint8Array(index.ids.length)
  for (const id of frozen) {
    const i = index.indexOf.get(id)
    if (i !== undefined) flags[i] = 1
  }
  return flags
}

/**
 * Columns from working slices `{ start, end, servers, load }` (the phases'
 * public, object-based form) or assignment slices with a separate `loads`,
 * and optionally each slice's hottest key (resolved inputs.hotKeys).
 */
function toColumns (slices, index, loads, hotKeys = null) {
  const c = new Columns(slices.length)
  for (let i = 0; i < slices.length; i++) {
    const s = slices[i]
    c.start[i] = s.start
    c.end[i] = s.end
    c.owner[i] = index.indexOf.get(s.servers[0])
    c.load[i] = loads ? loads[i] : s.load
    c.src[i] = i
    const h = hotKeys && hotKeys[i]
    if (h) {
      c.hot[i] = h.key
      c.hotLoad[i] = h.load
    }
  }
  return c
}

/**
 * Replica list of slice i: a fresh array, never shared with the input.
 * @param {Array<ArrayLike<number>>} [sets] the round's replica sets (see `rep`)
 */
function serversOf (c, i, index, srcSlices, sets) {
  if (c.rep[i] >= 0) return Array.from(sets[c.rep[i]], (s) => index.ids[s])
  return c.src[i] >= 0 ? srcSlices[c.src[i]].servers.slice() : [index.ids[c.owner[i]]]
}

/** Working slices `{ start, end, servers, load }` from columns. */
function toWorking (c, index, srcSlices) {
  const out = new Array(c.n)
  for (let i = 0; i < c.n; i++) {
    out[i] = { start: c.start[i], end: c.end[i], servers: serversOf(c, i, index, srcSlices), load: c.load[i] }
  }
  return out
}

module.exports = { Columns, indexServers, frozenFlags, toColumns, serversOf, toWorking }
