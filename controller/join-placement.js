'use strict'

const { cloneAssignment } = require('../core/assignment')

/**
 * Give servers that just joined their first slices at once (docs/control-plane.md,
 * "Batched membership"), without re-laying the keyspace: each joiner takes
 * about its share of the (slice, server) roles from the servers holding the
 * most, one role at a time, in the same position in the slice's list (a
 * donor's primary role makes the joiner primary). A donor down to its last
 * role splits that slice in two first (same servers, so no key changes hands
 * by the split), so a joiner gets a role even when slices are fewer than
 * servers. Among donors with as many roles, the one holding most keys
 * gives first, so repeated splits halve the widest slices. The balancing
 * rounds then even out the load.
 *
 * Pure: the input is not modified.
 * @param {object} assignment the layout with the joiners in `servers` (holding nothing)
 * @param {string[]} joiners ids to place
 * @param {{ maxSlices?: number }} [options] never grow past maxSlices slices
 * @returns {object} the new layout (the input itself when there is nothing to do)
 */
function placeJoiners (assignment, joiners, { maxSlices = Infinity } = {}) {
  const ids = Object.keys(assignment.servers)
  const fresh = joiners.filter((id) => Object.hasOwn(assignment.servers, id))
  if (fresh.length === 0 || ids.length <= fresh.length) return assignment
  const next = cloneAssignment(assignment)
  const slices = next.slices
  const held = new Map(ids.map((id) => [id, []])) // id -> slice objects it holds a role in
  for (const s of slices) for (const id of s.servers) held.get(id).push(s)
  for (const id of fresh) if (held.get(id).length > 0) return assignment // a joiner already placed: leave it to the strategy
  let roles = 0
  for (const list of held.values()) roles += list.length
  const share = Math.max(1, Math.floor(roles / ids.length))
  // donors, most roles first: a binary max-heap on (roles, id); joiners join
  // it as they receive roles, so a later joiner may take from an earlier one
  const keysOf = (list) => list.reduce((n, x) => n + (x.end - x.start), 0)
  const entries = new Map(ids.map((id) => [id, { id, list: held.get(id), keys: keysOf(held.get(id)), at: -1 }]))
  const heap = new DonorHeap([...entries.values()])
  let count = slices.length
  for (const joiner of [...fresh].sort()) {
    for (let q = 0; q < share; q++) {
      const donor = heap.top()
      if (!donor || donor.id === joiner || donor.list.length === 0) break
      let pick = -1
      for (let k = donor.list.length - 1; k >= 0; k--) if (!donor.list[k].servers.includes(joiner)) { pick = k; break }
      if (pick < 0) break
      let s = donor.list[pick]
      if (donor.list.length === 1) {
        if (s.end - s.start < 2 || count >= maxSlices) break
        const half = { start: s.start + Math.floor((s.end - s.start) / 2), end: s.end, servers: s.servers.slice() }
        s.end = half.start
        slices.push(half)
        count++
        for (const id of half.servers) {
          held.get(id).push(half)
          heap.raised(entries.get(id))
        }
        s = half
        pick = donor.list.length - 1
      }
      donor.list.splice(pick, 1)
      s.servers[s.servers.indexOf(donor.id)] = joiner
      held.get(joiner).push(s)
      donor.keys -= s.end - s.start
      entries.get(joiner).keys += s.end - s.start
      heap.lowered(donor)
      heap.raised(entries.get(joiner))
    }
  }
  slices.sort((a, b) => a.start - b.start)
  return next
}

/** A max-heap of servers by roles held, then keys held, then id (deterministic), that tracks each entry's place. */
class DonorHeap {
  constructor (items) {
    this.a = items
    items.forEach((x, i) => { x.at = i })
    for (let i = (items.length >> 1) - 1; i >= 0; i--) this.#down(i)
  }

  #more (x, y) {
    if (x.list.length !== y.list.length) return x.list.length > y.list.length
    return x.keys > y.keys || (x.keys === y.keys && x.id < y.id)
  }

  #swap (i, j) {
    const t = this.a[i]
    this.a[i] = this.a[j]
    this.a[j] = t
    this.a[i].at = i
    this.a[j].at = j
  }

  top () {
    return this.a[0]
  }

  /** `x` holds fewer roles than before. */
  lowered (x) {
    this.#down(x.at)
  }

  /** `x` holds more roles than before. */
  raised (x) {
    let i = x.at
    while (i > 0) {
      const parent = (i - 1) >> 1
      if (!this.#more(this.a[i], this.a[parent])) return
      this.#swap(i, parent)
      i = parent
    }
  }

  #down (i) {
    const a = this.a
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let m = i
      if (l < a.length && this.#more(a[l], a[m])) m = l
      if (r < a.length && this.#more(a[r], a[m])) m = r
      if (m === i) return
      this.#swap(i, m)
      i = m
    }
  }
}

module.exports = { placeJoiners }
