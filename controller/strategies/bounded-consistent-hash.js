'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { validateAssignment, cloneAssignment } = require('../../core/assignment')
const { resolveOptions, expect, toLoads, checkServers, checkMembershipChange, resolveInputs } = require('./inputs')
const { ringPoints } = require('./consistent-hash')
const { addServersByLoop, removeServersByLoop } = require('./batch')

/**
 * Consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam,
 * "Consistent Hashing with Bounded Loads", SODA 2018; HAProxy's
 * `hash-balance-factor`), written as an ordinary assignment.
 *
 * The ring is consistent-hash.js's: point i of server `id` is
 * farmhash.fingerprint32(`${id}#${i}`), a key belongs to the first point
 * clockwise with point >= key, equal points go to the lower id. Each ring
 * segment is cut further at the current slice boundaries, so every *piece*
 * lies in one segment and one slice; its load is its slice's load of the last
 * period, spread in proportion to key range.
 *
 * Capacity = balanceFactor x mean server load. Pieces are placed hottest first
 * (ties: lower start): a piece goes to its segment's server when that server
 * has room (load + piece <= capacity), otherwise it walks clockwise, point by
 * point, to the first server with room: the paper's rule, with pieces as the
 * balls. When no server has room the piece goes to the least-loaded server.
 * If every piece weighs at most (balanceFactor - 1) x mean, some server
 * always has room (else the total would exceed n x mean), so no server ends
 * above capacity.
 *
 * The layout is a function of the ring and the loads, not of the previous
 * layout: with all loads 0 it is exactly the plain ring. There is no churn
 * budget; churn is what the bound requires.
 *
 * Servers whose load is unknown (`inputs.unknownServers`) are frozen: the
 * pieces they own now stay with them, their stale loads count in no mean, and
 * a walking piece passes their points by. They receive nothing, except in
 * removeServer when every remaining server is unknown (the leaving keys must
 * go somewhere; they then go to their plain ring successors).
 */

const NAME = 'bounded-consistent-hash'

/** Every option and its default, in one place (docs/algorithm.md). */
const defaults = Object.freeze({
  vnodes: 100, // points per server, as consistent-hash
  balanceFactor: 1.25 // Mirrokni et al.'s c; HAProxy's hash-balance-factor 125
})

const checks = {
  vnodes: expect.intAtLeast(1, 10000),
  balanceFactor: expect.ratio
}

const options = (o) => resolveOptions(NAME, defaults, checks, o)

/**
 * Ring segments in key order as [start, end, ringIndex]: keys in
 * (previous point, point] belong to the point; keys past the last point wrap
 * to the first.
 */
function segments (points) {
  const out = []
  let start = 0
  points.forEach(({ point }, k) => {
    if (point + 1 > start) out.push([start, point + 1, k])
    start = point + 1
  })
  if (start < KEYSPACE_SIZE) out.push([start, KEYSPACE_SIZE, 0])
  return out
}

/**
 * Pieces: ring segments cut at the assignment's slice boundaries, each with
 * its current owner, ring index and estimated load.
 */
function pieces (assignment, load, points) {
  const segs = segments(points)
  const out = []
  let j = 0
  assignment.slices.forEach((s, i) => {
    const perKey = load[i] / (s.end - s.start)
    while (segs[j][1] <= s.start) j++
    for (let k = j; k < segs.length && segs[k][0] < s.end; k++) {
      const start = Math.max(s.start, segs[k][0])
      const end = Math.min(s.end, segs[k][1])
      out.push({ start, end, current: s.servers[0], ring: segs[k][2], load: perKey * (end - start), owner: null })
    }
  })
  return out
}

/**
 * Servers by load (ties: id) in a binary min-heap: loads only grow, so an
 * update sifts down. Keeps a round near-linear at thousands of servers.
 */
class LeastLoaded {
  constructor (ids) {
    this.ids = ids.slice().sort()
    this.load = new Map(this.ids.map((id) => [id, 0]))
    this.pos = new Map(this.ids.map((id, i) => [id, i]))
  }

  less (a, b) {
    const x = this.load.get(a)
    const y = this.load.get(b)
    return x < y || (x === y && a < b)
  }

  peek () {
    return this.ids[0]
  }

  add (id, amount) {
    this.load.set(id, this.load.get(id) + amount)
    const h = this.ids
    let i = this.pos.get(id)
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let m = i
      if (l < h.length && this.less(h[l], h[m])) m = l
      if (r < h.length && this.less(h[r], h[m])) m = r
      if (m === i) break
      ;[h[i], h[m]] = [h[m], h[i]]
      this.pos.set(h[i], i)
      this.pos.set(h[m], m)
      i = m
    }
  }
}

/**
 * The bounded-load layout.
 * @param {object} assignment a valid assignment (its slices give the pieces and current owners)
 * @param {Float64Array} load per slice of `assignment`
 * @param {string[]} ids servers of the new layout, sorted
 * @param {{vnodes:number, balanceFactor:number}} o
 * @param {Set<string>} frozen servers that keep what they own and receive nothing
 * @param {boolean} [unbounded] place by the plain ring (no capacity), still skipping nothing but the leaving server
 * @returns {{ slices: object[], loads: Float64Array }} coalesced slices and their estimated loads
 */
function boundedLayout (assignment, load, ids, o, frozen, unbounded = false) {
  const points = ringPoints(ids, o.vnodes)
  const all = pieces(assignment, load, points)
  const eligible = ids.filter((id) => !frozen.has(id))
  const present = new Set(ids)
  const free = []
  let total = 0
  for (const p of all) {
    if (frozen.has(p.current) && present.has(p.current)) {
      p.owner = p.current // frozen: stays as it is, its load counts nowhere
    } else {
      free.push(p)
      total += p.load
    }
  }
  const known = new Map(eligible.map((id) => [id, 0]))
  const heap = new LeastLoaded(eligible)
  const cap = unbounded ? Infinity : (o.balanceFactor * total) / eligible.length
  free.sort((a, b) => b.load - a.load || a.start - b.start)
  for (const p of free) {
    const least = heap.peek()
    let owner = least // no server has room: the least loaded takes it (ties: id)
    if (known.get(least) + p.load <= cap) {
      // some server has room, so the walk ends within one turn of the ring
      for (let step = 0, k = p.ring; step < points.length; step++, k = (k + 1) % points.length) {
        const id = points[k].owner
        if (known.has(id) && known.get(id) + p.load <= cap) { owner = id; break }
      }
    }
    p.owner = owner
    known.set(owner, known.get(owner) + p.load)
    heap.add(owner, p.load)
  }
  const slices = []
  const loads = []
  for (const p of all) {
    const last = slices[slices.length - 1]
    if (last && last.servers[0] === p.owner) {
      last.end = p.end
      loads[loads.length - 1] += p.load
    } else {
      slices.push({ start: p.start, end: p.end, servers: [p.owner] })
      loads.push(p.load)
    }
  }
  return { slices, loads: Float64Array.from(loads) }
}

function withServers (assignment, slices, servers) {
  const out = { generation: assignment.generation, slices, servers: {} }
  for (const id of Object.keys(servers).sort()) out.servers[id] = { url: servers[id].url }
  return out
}

/**
 * The plain ring for `servers` (generation 1): no loads yet, so no bound bites.
 * @param {Object<string, {url:string}>} servers
 * @param {object} [opts] { vnodes, balanceFactor }
 */
function initial (servers, opts) {
  const o = options(opts)
  checkServers(servers)
  const ids = Object.keys(servers).sort()
  const whole = { generation: 1, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: [ids[0]] }], servers }
  const { slices } = boundedLayout(whole, new Float64Array(1), ids, o, new Set())
  return withServers(whole, slices, servers)
}

/**
 * One period: the bounded-load layout for the last period's loads.
 * @param {object} assignment
 * @param {ArrayLike<number>} loads per slice of `assignment`
 * @param {object} [opts]
 * @param {{unknownServers?: string[]}} [inputs] unknown servers are frozen (see above)
 */
function rebalance (assignment, loads, opts, inputs) {
  return boundedRound(assignment, loads, opts, inputs).assignment
}

/**
 * rebalance with its estimated per-slice loads of the new layout.
 * @returns {{ assignment: object, loads: Float64Array }}
 */
function boundedRound (assignment, loads, opts, inputs) {
  const o = options(opts)
  validateAssignment(assignment)
  const load = toLoads(loads, assignment.slices.length)
  const { unknownServers } = resolveInputs(assignment, inputs)
  const base = cloneAssignment(assignment)
  const ids = Object.keys(base.servers)
  if (ids.every((id) => unknownServers.has(id))) return { assignment: base, loads: load }
  const { slices, loads: nextLoads } = boundedLayout(base, load, ids, o, unknownServers)
  return { assignment: withServers(base, slices, base.servers), loads: nextLoads }
}

/**
 * Add a server: the ring gains its points and the bound is recomputed with it
 * (load 0, so it has the most room). Without loads this is the plain ring.
 */
function addServer (assignment, id, url, loads, opts, inputs) {
  const o = options(opts)
  const load = checkMembershipChange('join', assignment, id, { url, loads })
  const { unknownServers } = resolveInputs(assignment, inputs)
  const base = cloneAssignment(assignment)
  const servers = { ...base.servers, [id]: { url } }
  const { slices } = boundedLayout(base, load, Object.keys(servers).sort(), o, unknownServers)
  return withServers(base, slices, servers)
}

/**
 * Remove a server: the ring loses its points and the bound is recomputed
 * without it. Its keys go to known servers; when every remaining server is
 * unknown they go to their plain ring successors.
 */
function removeServer (assignment, id, loads, opts, inputs) {
  const o = options(opts)
  const load = checkMembershipChange('leave', assignment, id, { loads })
  const { unknownServers } = resolveInputs(assignment, inputs)
  const base = cloneAssignment(assignment)
  const servers = { ...base.servers }
  delete servers[id]
  const ids = Object.keys(servers).sort()
  const frozen = new Set([...unknownServers].filter((s) => s !== id))
  const allUnknown = ids.every((s) => frozen.has(s))
  // all unknown: nobody is frozen out as a destination, and no bound (their loads are guesses)
  const { slices } = boundedLayout(base, load, ids, o, allUnknown ? new Set() : frozen, allUnknown)
  if (allUnknown) {
    // they still keep their own keys: only the leaving server's pieces moved
    return withServers(base, keepOwn(base, slices, id), servers)
  }
  return withServers(base, slices, servers)
}

/** `layout` owners for the keys `leaving` owned, `base` owners elsewhere, coalesced. */
function keepOwn (base, layout, leaving) {
  const out = []
  let i = 0
  let j = 0
  let pos = 0
  while (pos < KEYSPACE_SIZE) {
    const b = base.slices[i]
    const l = layout[j]
    const end = Math.min(b.end, l.end)
    const owner = b.servers[0] === leaving ? l.servers[0] : b.servers[0]
    const last = out[out.length - 1]
    if (last && last.servers[0] === owner) last.end = end
    else out.push({ start: pos, end, servers: [owner] })
    pos = end
    if (b.end === end) i++
    if (l.end === end) j++
  }
  return out
}

module.exports = {
  name: NAME,
  defaults,
  initial,
  rebalance,
  addServer,
  removeServer,
  // batches: one call per server in turn (./batch.js); the slices change with each
  addServers: addServersByLoop(addServer),
  removeServers: removeServersByLoop(removeServer),
  boundedRound,
  ringPoints
}
