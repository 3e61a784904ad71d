'use strict'

const { take } = require('./scratch')
const { KEYSPACE_SIZE } = require('../../core/keyspace')

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
    this.start = take(Float64Array, n) // keys go up to 2^32, beyond Int32/Uint32 for `end`
    this.end = take(Float64Array, n)
    this.owner = take(Int32Array, n) // index into the sorted server ids
    this.load = take(Float64Array, n)
    this.src = take(Int32Array, n)
    this.rep = take(Int32Array, n, -1)
    this.hot = take(Float64Array, n, -1)
    this.hotLoad = take(Float64Array, n)
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
 * Replica sets of two or more servers (server indices, primary first), all in
 * one flat pool: set r is `pool[offset[r] .. offset[r] + size[r])`.
 *
 * Why: with a standby replica for every slice (minReplicas 2, the default)
 * every slice has a set, and one small array per slice per phase put the
 * round back where objects per phase had it (340 to 500 ms at 1,000 x 100,
 * most of it allocation and garbage collection). Sets only ever shrink or
 * keep their size in place (a moved share swaps one server for another), so
 * a set is written once, when the table is built.
 */
class ReplicaSets {
  /**
   * @param {number} capacity sets at most
   * @param {number} members servers over all sets at most
   */
  constructor (capacity, members) {
    this.count = 0
    this.offset = take(Int32Array, capacity)
    this.size = take(Int32Array, capacity)
    this.pool = take(Int32Array, members)
    this.used = 0
  }

  /** Append `from[lo .. hi)` as a new set; returns its index. */
  add (from, lo, hi) {
    const r = this.count++
    this.offset[r] = this.used
    this.size[r] = hi - lo
    for (let k = lo; k < hi; k++) this.pool[this.used++] = from[k]
    return r
  }

  /** True when set r holds server s. */
  has (r, s) {
    const o = this.offset[r]
    for (let k = o; k < o + this.size[r]; k++) if (this.pool[k] === s) return true
    return false
  }

  /** Same servers in the same order (the primary stays the primary). */
  same (a, b) {
    return a === b || this.sameAs(a, this, b)
  }

  /** Set r holds the servers of set q of `other` (another table, or this one), in the same order. */
  sameAs (r, other, q) {
    const n = this.size[r]
    if (n !== other.size[q]) return false
    const x = this.offset[r]
    const y = other.offset[q]
    for (let k = 0; k < n; k++) if (this.pool[x + k] !== other.pool[y + k]) return false
    return true
  }

  /** Set r as a fresh array of server indices. */
  toArray (r) {
    const o = this.offset[r]
    return Array.from(this.pool.subarray(o, o + this.size[r]))
  }
}

/**
 * The replica lists of assignment slices as server indices: `rep[i]` is slice
 * i's set in `sets`, or -1 for a slice on one server.
 * @param {Array<{servers:string[]}>} slices
 * @param {Map<string, number>} indexOf
 * @param {Int32Array} owner per slice, its first server's index (toColumns has looked them up)
 * @returns {{ rep: Int32Array, sets: ReplicaSets }}
 */
function indexSets (slices, indexOf, owner) {
  let count = 0
  let members = 0
  for (let i = 0; i < slices.length; i++) {
    const k = slices[i].servers.length
    if (k < 2) continue
    count++
    members += k
  }
  const rep = take(Int32Array, slices.length, -1)
  const sets = new ReplicaSets(count, members)
  for (let i = 0; i < slices.length; i++) {
    const names = slices[i].servers
    if (names.length >= 2) rep[i] = appendSet(sets, owner[i], names, indexOf)
  }
  return { rep, sets }
}

/**
 * Append the list `names` (ids; `first`, its first, already looked up) to
 * `sets` as server indices; returns its index. With `check`, returns -1 (and
 * appends nothing) when an id is unknown or listed twice.
 */
function appendSet (sets, first, names, indexOf, check = false) {
  const o = sets.used
  sets.pool[o] = first
  for (let k = 1; k < names.length; k++) {
    const s = indexOf.get(names[k])
    if (check) {
      if (s === undefined) return -1
      for (let j = o; j < o + k; j++) if (sets.pool[j] === s) return -1
    }
    sets.pool[o + k] = s
  }
  const r = sets.count++
  sets.offset[r] = o
  sets.size[r] = names.length
  sets.used = o + names.length
  return r
}

/**
 * toColumns and indexSets in one pass: the slices as columns, and their
 * lists of two or more servers as `rep` and `sets`.
 * Why: the round's input is a million objects at 10,000 servers, each read
 * a cache miss or more, and the two passes read every one of them twice.
 * With `check`, the same pass checks each slice as validateAssignment does
 * (core/assignment.js; its head checked apart) and returns null at the
 * first fault, or at a slice with `holders`, for the caller to ask
 * validateAssignment why: a separate validating pass read every slice once
 * more.
 * `moving[i]` is 1 when input slice i has a `moving` field (a result slice
 * never shares its object: toResultSlices).
 * @returns {{ cols: Columns, rep: Int32Array, sets: ReplicaSets, moving: Uint8Array }|null}
 */
function toColumnsWithSets (slices, index, loads, check = false) {
  const n = slices.length
  const c = new Columns(n)
  const rep = take(Int32Array, n, -1)
  const moving = take(Uint8Array, n)
  // room for two servers a slice (a standby for every slice, the default); grown when short
  const sets = new ReplicaSets(n, 2 * n)
  let expected = 0
  for (let i = 0; i < n; i++) {
    const s = slices[i]
    if (check) {
      if (!plainSlice(s, expected)) return null
      expected = s.end
    }
    fillSlice(c, i, s, index, loads)
    if (s.moving !== undefined) moving[i] = 1
    const names = s.servers
    // an unknown id is looked up as undefined, which an Int32Array stores as 0
    if (check && c.owner[i] === 0 && index.indexOf.get(names[0]) !== 0) return null
    if (names.length < 2) continue
    if (sets.used + names.length > sets.pool.length) {
      const pool = take(Int32Array, Math.max(2 * sets.pool.length, sets.used + names.length))
      pool.set(sets.pool)
      sets.pool = pool
    }
    const r = appendSet(sets, c.owner[i], names, index.indexOf, check)
    if (r < 0) return null
    rep[i] = r
  }
  if (check && expected !== KEYSPACE_SIZE) return null
  return { cols: c, rep, sets, moving }
}

/**
 * Slice `s` has validateAssignment's shape and starts at `expected`: integer
 * bounds, a non-empty list, a boolean `moving` if any, and no `holders`
 * (the ids are checked once looked up).
 */
function plainSlice (s, expected) {
  if (s === null || typeof s !== 'object' || s.start !== expected) return false
  const end = s.end
  if (!Number.isInteger(end) || end <= expected || end > KEYSPACE_SIZE) return false
  const names = s.servers
  if (!Array.isArray(names) || names.length === 0 || s.holders !== undefined) return false
  return s.moving === undefined || typeof s.moving === 'boolean'
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
  for (let i = 0; i < slices.length; i++) fillSlice(c, i, slices[i], index, loads)
  if (hotKeys) fillHotKeys(c, hotKeys)
  return c
}

/** Slice i of the columns from the object `s` (see toColumns). */
function fillSlice (c, i, s, index, loads) {
  c.start[i] = s.start
  c.end[i] = s.end
  c.owner[i] = index.indexOf.get(s.servers[0])
  c.load[i] = loads ? loads[i] : s.load
  c.src[i] = i
}

/** Each slice's hottest key (resolved inputs.hotKeys, by slice; null for none) into the columns. */
function fillHotKeys (c, hotKeys) {
  for (let i = 0; i < c.n; i++) {
    const h = hotKeys[i]
    if (h) {
      c.hot[i] = h.key
      c.hotLoad[i] = h.load
    }
  }
}

/**
 * Replica list of slice i: a fresh array, never shared with the input.
 * @param {ReplicaSets} [sets] the round's replica sets (see `rep`)
 */
function serversOf (c, i, index, srcSlices, sets) {
  const r = c.rep[i]
  if (r >= 0) {
    const size = sets.size[r]
    const o = sets.offset[r]
    // sized up front: a pushed-to array reserves room for 17 (most of the round's garbage)
    const out = new Array(size)
    for (let k = 0; k < size; k++) out[k] = index.ids[sets.pool[o + k]]
    return out
  }
  return c.src[i] >= 0 ? srcSlices[c.src[i]].servers.slice() : [index.ids[c.owner[i]]]
}

/**
 * The round's result slices from its final columns. A slice that the round
 * left as it was (same start, end and servers, in order, and not `moving`)
 * is the input's own object, not a copy; every other slice is a new
 * `{ start, end, servers }` with a fresh list.
 * Why: at 10,000 servers a round changes about 1 % of a million slices, and
 * copying the other 99 % was a fifth of the round, most of it garbage
 * collection (docs/algorithm.md, "Performance"). Sharing is safe because no
 * one mutates an assignment's slices: every strategy and the controller copy
 * a slice before they change it (core/assignment.js cloneAssignment), and
 * map diffs already share unchanged slices between generations.
 * With the input as columns (`input`), it decides from them alone: reading
 * a million input objects again cost as much as the copies it saves.
 * @param {Columns} c the final columns
 * @param {{ids:string[], indexOf:Map<string, number>}} index
 * @param {Array<{start:number, end:number, servers:string[]}>} srcSlices the round's input slices
 * @param {ReplicaSets|null} sets the round's replica sets (`c.rep`), if any
 * @param {{rep:Int32Array, sets:ReplicaSets, start:Float64Array, end:Float64Array, owner:Int32Array, moving:Uint8Array}|null} input
 *   the input's columns as read (`src` indexes them), before the phases changed any; null: read `srcSlices`
 * @param {Map<number, number[]>} [reordered] slices whose servers the primary phase reordered (indices)
 */
function toResultSlices (c, index, srcSlices, sets, input, reordered) {
  const out = new Array(c.n)
  for (let i = 0; i < c.n; i++) {
    const j = c.src[i]
    if (j >= 0 && (input ? sameAsInput(c, i, sets, input, j) : sameAsSlice(c, i, srcSlices[j]))) {
      out[i] = srcSlices[j]
      continue
    }
    out[i] = { start: c.start[i], end: c.end[i], servers: serversOf(c, i, index, srcSlices, sets) }
  }
  // replaced, not changed: the object may be the input's
  if (reordered) for (const [i, list] of reordered) out[i] = { start: c.start[i], end: c.end[i], servers: list.map((s) => index.ids[s]) }
  return out
}

/** Slice i of the columns is input slice j as it was (see toResultSlices), decided from the input's columns. */
function sameAsInput (c, i, sets, input, j) {
  if (input.start[j] !== c.start[i] || input.end[j] !== c.end[i] || input.moving[j] !== 0) return false
  const r = c.rep[i]
  if (r < 0) return true // its list is the input's list (`src`)
  const q = input.rep[j]
  if (q < 0) return sets.size[r] === 1 && sets.pool[sets.offset[r]] === input.owner[j] // the input's one server
  return sets.sameAs(r, input.sets, q)
}

/**
 * Slice i of the columns is `was` as it was, read from the object: the
 * single-owner round, which reads no input columns and gives no slice a
 * replica set, so the slice keeps the input's list (`src`).
 */
function sameAsSlice (c, i, was) {
  return c.rep[i] < 0 && was.start === c.start[i] && was.end === c.end[i] && was.moving === undefined
}

/** Working slices `{ start, end, servers, load }` from columns. */
function toWorking (c, index, srcSlices) {
  const out = new Array(c.n)
  for (let i = 0; i < c.n; i++) {
    out[i] = { start: c.start[i], end: c.end[i], servers: serversOf(c, i, index, srcSlices), load: c.load[i] }
  }
  return out
}

module.exports = { Columns, ReplicaSets, indexSets, indexServers, frozenFlags, toColumns, toColumnsWithSets, fillHotKeys, serversOf, toResultSlices, toWorking }
