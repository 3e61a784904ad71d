'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { lastAtOrBelow } = require('../../core/sorted-search')
const { validateAssignment, evenAssignment, cloneAssignment } = require('../../core/assignment')
const { resolveOptions, expect, toLoads, checkServers, checkMembershipChange, resolveInputs } = require('./inputs')
const { addServersByLoop, removeServersByLoop } = require('./batch')

/**
 * Neighbour offload (seed 001, TUM "Advanced Distributed Load Balancing"):
 * servers sit on the keyspace in order, each owning a contiguous range cut
 * into `buckets` equal buckets. A server whose load exceeds the mean by more
 * than `threshold` hands whole buckets at one edge of its range to its
 * least-loaded adjacent neighbour; both then re-cut their ranges into
 * `buckets` buckets again.
 *
 * A *run* is a maximal range of adjacent slices with one owner. With the
 * layouts this strategy makes, each server has one run; an assignment made by
 * another strategy may give a server several, and each is treated alone. The
 * keyspace is a line, not a ring: the run at 0 has no left neighbour (a
 * server owning both ends would not be contiguous).
 *
 * One round, on the per-slice loads of the last period (load is spread
 * uniformly within a slice):
 *  1. mean = total load / number of known servers; an overloaded server has
 *     load > mean x (1 + threshold). Overloaded servers act hottest first
 *     (ties: id).
 *  2. Its candidate receivers are the owners of the runs adjacent to its
 *     runs, least loaded first (ties: id, then left side first). The seed
 *     offloads to the least-loaded neighbour; when nothing can go there
 *     the other neighbour is tried.
 *  3. Its run is cut into `buckets` equal-width buckets. Buckets are taken
 *     from the edge facing the receiver, one at a time, while the moved load
 *     stays within `offloadPercent`% of the donor's load, the receiver ends
 *     no hotter than the donor (so the pair's maximum strictly falls), the
 *     donor keeps at least one bucket, and the round's churn stays within
 *     `churnLimit`. A transfer must carry some load.
 *  4. A server takes part in at most one transfer per round, as donor or
 *     receiver, so chains cannot pass load along within a round.
 *  5. Every run is re-cut into `buckets` slices (free: no key changes owner),
 *     so next period's loads arrive per bucket.
 * Only the boundary between two adjacent runs moves, so each server's keys
 * stay contiguous, and the only transfers are between neighbours.
 *
 * Servers with unknown load (`inputs.unknownServers`) are frozen as in
 * chopper: never donor or receiver, left out of the mean, their slices kept
 * exactly as they are.
 */

const NAME = 'neighbour-offload'

/** Every option and its default, in one place (docs/algorithm.md). */
const defaults = Object.freeze({
  buckets: 10, // N: buckets per server range (seed 001 tried 3, 6, 9)
  offloadPercent: 10, // T: at most this % of the donor's load moves per round (seed 001 tried 10, 25, 45)
  threshold: 0.1, // a server is overloaded above mean x (1 + threshold); not given in the seed
  churnLimit: 0.2 // keys that may change owner per round, fraction of the keyspace (as chopper's budgets)
})

const checks = {
  buckets: expect.intAtLeast(1, 1024),
  offloadPercent: (v) => (typeof v === 'number' && v > 0 && v <= 100 ? null : 'a number in (0, 100] (percent of the donor\'s load)'),
  threshold: (v) => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? null : 'a finite number >= 0 (fraction above the mean load)'),
  churnLimit: expect.fraction
}

const options = (o) => resolveOptions(NAME, defaults, checks, o)

/** Float tolerance for "within T%": N equal buckets of uniform load are exactly T% each. */
const EPS = 1e-9

/** Cumulative load up to key x, interpolating uniformly inside a slice. */
function loadIndex (slices, load) {
  const starts = slices.map((s) => s.start)
  const prefix = new Float64Array(slices.length + 1)
  for (let i = 0; i < slices.length; i++) prefix[i + 1] = prefix[i] + load[i]
  const upTo = (x) => {
    if (x >= KEYSPACE_SIZE) return prefix[slices.length]
    const lo = lastAtOrBelow(starts, x)
    const s = slices[lo]
    return prefix[lo] + (load[lo] * (x - s.start)) / (s.end - s.start)
  }
  return (a, b) => Math.max(0, upTo(b) - upTo(a))
}

/** Maximal same-owner ranges, in key order. */
function runsOf (slices) {
  const runs = []
  for (const s of slices) {
    const last = runs[runs.length - 1]
    if (last && last.owner === s.servers[0]) last.end = s.end
    else runs.push({ owner: s.servers[0], start: s.start, end: s.end })
  }
  return runs
}

/** Bucket boundaries b_0..b_n of [start, end) (some buckets empty when the range is shorter than n). */
function boundaries (start, end, n) {
  const out = []
  for (let k = 0; k <= n; k++) out.push(start + Math.floor(((end - start) * k) / n))
  return out
}

/**
 * The assignment for `runs`: each run of a known server cut into `n`
 * buckets; a frozen server's keys keep `base`'s slices exactly.
 */
function layout (base, runs, n, frozen, servers, between) {
  const slices = []
  const loads = []
  let i = 0
  for (const r of runs) {
    if (frozen.has(r.owner)) {
      while (base.slices[i].end <= r.start) i++
      for (let k = i; k < base.slices.length && base.slices[k].start < r.end; k++) {
        const s = base.slices[k]
        const start = Math.max(s.start, r.start)
        const end = Math.min(s.end, r.end)
        slices.push({ start, end, servers: [r.owner] })
        loads.push(between(start, end))
      }
      continue
    }
    const b = boundaries(r.start, r.end, n)
    for (let k = 0; k < n; k++) {
      if (b[k + 1] <= b[k]) continue
      slices.push({ start: b[k], end: b[k + 1], servers: [r.owner] })
      loads.push(between(b[k], b[k + 1]))
    }
  }
  const out = { generation: base.generation, slices, servers: {} }
  for (const id of Object.keys(servers).sort()) out.servers[id] = { url: servers[id].url }
  return { assignment: out, loads: Float64Array.from(loads) }
}

/**
 * The initial layout: each server, in id order, one contiguous 1/n of the
 * keyspace, cut into `buckets` slices. Generation 1.
 */
function initial (servers, opts) {
  const o = options(opts)
  checkServers(servers)
  const even = evenAssignment(servers, 1)
  return layout(even, runsOf(even.slices), o.buckets, new Set(), even.servers, () => 0).assignment
}

/**
 * How far a donor run gives edge buckets to the neighbour on `side`.
 * @returns {{ cut: number, moved: number, churn: number }|null} the new boundary, or null when nothing can go
 */
function planTransfer (run, side, donorLoad, receiverLoad, o, budget, between) {
  const b = boundaries(run.start, run.end, o.buckets)
  const limit = (donorLoad * o.offloadPercent) / 100 * (1 + EPS)
  let best = null
  // k = buckets given; the donor keeps at least one non-empty bucket
  for (let k = 1; k < o.buckets; k++) {
    const cut = side === 'right' ? b[o.buckets - k] : b[k]
    const [lo, hi] = side === 'right' ? [cut, run.end] : [run.start, cut]
    if (hi - lo >= run.end - run.start || hi <= lo) continue
    const moved = between(lo, hi)
    if (moved > limit || hi - lo > budget || receiverLoad + moved > donorLoad - moved) break
    if (moved > 0) best = { cut, moved, churn: hi - lo }
  }
  return best
}

/**
 * One round with its bookkeeping.
 * @returns {{ assignment: object, loads: Float64Array, churn: number,
 *   ops: {op:'offload', from:string, to:string, start:number, end:number, load:number}[] }}
 */
function offloadRound (assignment, loads, opts, inputs) {
  const o = options(opts)
  validateAssignment(assignment)
  const load = toLoads(loads, assignment.slices.length)
  const { unknownServers: frozen } = resolveInputs(assignment, inputs)
  const base = cloneAssignment(assignment)
  const between = loadIndex(base.slices, load)
  const runs = runsOf(base.slices)
  const ids = Object.keys(base.servers)
  const known = ids.filter((id) => !frozen.has(id))
  const serverLoad = new Map(ids.map((id) => [id, 0]))
  for (const r of runs) serverLoad.set(r.owner, serverLoad.get(r.owner) + between(r.start, r.end))
  let total = 0
  for (const id of known) total += serverLoad.get(id)
  const ops = []
  let churn = 0
  if (known.length > 0 && total > 0) {
    const mean = total / known.length
    const touched = new Set()
    const donors = known
      .filter((id) => serverLoad.get(id) > mean * (1 + o.threshold))
      .sort((a, b) => serverLoad.get(b) - serverLoad.get(a) || (a < b ? -1 : 1))
    for (const d of donors) {
      if (touched.has(d)) continue
      const candidates = []
      runs.forEach((r, i) => {
        if (r.owner !== d) return
        for (const [side, j] of [['left', i - 1], ['right', i + 1]]) {
          const nb = runs[j]
          if (!nb || nb.owner === d || frozen.has(nb.owner) || touched.has(nb.owner)) continue
          candidates.push({ run: r, side, neighbour: nb })
        }
      })
      candidates.sort((a, b) => serverLoad.get(a.neighbour.owner) - serverLoad.get(b.neighbour.owner) ||
        (a.neighbour.owner < b.neighbour.owner ? -1 : a.neighbour.owner > b.neighbour.owner ? 1 : 0) ||
        (a.side === 'left' ? -1 : 1) || a.run.start - b.run.start)
      for (const c of candidates) {
        const to = c.neighbour.owner
        const plan = planTransfer(c.run, c.side, serverLoad.get(d), serverLoad.get(to), o, o.churnLimit * KEYSPACE_SIZE - churn, between)
        if (plan === null) continue
        const [start, end] = c.side === 'right' ? [plan.cut, c.run.end] : [c.run.start, plan.cut]
        if (c.side === 'right') { c.run.end = plan.cut; c.neighbour.start = plan.cut } else { c.run.start = plan.cut; c.neighbour.end = plan.cut }
        serverLoad.set(d, serverLoad.get(d) - plan.moved)
        serverLoad.set(to, serverLoad.get(to) + plan.moved)
        churn += plan.churn
        touched.add(d)
        touched.add(to)
        ops.push({ op: 'offload', from: d, to, start, end, load: plan.moved })
        break
      }
    }
  }
  const out = layout(base, runs, o.buckets, frozen, base.servers, between)
  return { ...out, churn, ops }
}

/**
 * One balancing round (see above). Same generation as the input.
 * @param {object} assignment
 * @param {ArrayLike<number>} loads per slice of `assignment`
 * @param {object} [opts] see `defaults`
 * @param {{unknownServers?: string[]}} [inputs] unknown servers are frozen
 */
function rebalance (assignment, loads, opts, inputs) {
  return offloadRound(assignment, loads, opts, inputs).assignment
}

/**
 * Add a server. To stay contiguous it must own a range at once: it takes the
 * upper part of the hottest known server's run (ties: widest, then lowest
 * start), cut where the run's load halves (the midpoint when idle), so it
 * takes about half that server's load. Both runs are re-cut into buckets.
 */
function addServer (assignment, id, url, loads, opts, inputs) {
  const o = options(opts)
  const load = checkMembershipChange('join', assignment, id, { url, loads })
  const { unknownServers: frozen } = resolveInputs(assignment, inputs)
  const base = cloneAssignment(assignment)
  const between = loadIndex(base.slices, load)
  const runs = runsOf(base.slices)
  const servers = { ...base.servers, [id]: { url } }
  const runLoad = runs.map((r) => between(r.start, r.end))
  let pick = -1
  runs.forEach((r, i) => {
    if (frozen.has(r.owner) || r.end - r.start < 2) return
    if (pick < 0) { pick = i; return }
    const p = runs[pick]
    if (runLoad[i] > runLoad[pick] || (runLoad[i] === runLoad[pick] && r.end - r.start > p.end - p.start)) pick = i
  })
  if (pick < 0) {
    // every run is frozen or one key long: nowhere to cut without touching an
    // unknown server, so the new server joins empty (it is nobody's neighbour)
    return layout(base, runs, o.buckets, frozen, servers, between).assignment
  }
  const r = runs[pick]
  const half = runLoad[pick] / 2
  let cut = r.start + Math.floor((r.end - r.start) / 2)
  if (half > 0) {
    // binary search on the key where the run's cumulative load reaches half
    let lo = r.start + 1
    let hi = r.end - 1
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2)
      if (between(r.start, mid) >= half) hi = mid
      else lo = mid + 1
    }
    cut = lo
  }
  runs.splice(pick + 1, 0, { owner: id, start: cut, end: r.end })
  r.end = cut
  return layout(base, runs, o.buckets, frozen, servers, between).assignment
}

/**
 * Remove a server: each of its runs goes whole to its less-loaded adjacent
 * known neighbour (ties: id), so the receiver stays contiguous. When neither
 * neighbour is known (or it has none), the run goes to the least-loaded known
 * server, which then owns two runs; only when every remaining server is
 * unknown may one of them receive it.
 */
function removeServer (assignment, id, loads, opts, inputs) {
  const o = options(opts)
  const load = checkMembershipChange('leave', assignment, id, { loads })
  const { unknownServers } = resolveInputs(assignment, inputs)
  const base = cloneAssignment(assignment)
  const between = loadIndex(base.slices, load)
  const servers = { ...base.servers }
  delete servers[id]
  const frozen = new Set([...unknownServers].filter((s) => s !== id))
  const serverLoad = new Map(Object.keys(servers).map((s) => [s, 0]))
  const runs = runsOf(base.slices)
  for (const r of runs) if (r.owner !== id) serverLoad.set(r.owner, serverLoad.get(r.owner) + between(r.start, r.end))
  const better = (a, b) => serverLoad.get(a) - serverLoad.get(b) || (a < b ? -1 : 1)
  const remaining = Object.keys(servers)
  const knownRemaining = remaining.filter((s) => !frozen.has(s))
  runs.forEach((r, i) => {
    if (r.owner !== id) return
    const beside = [runs[i - 1], runs[i + 1]].filter((x) => x && x.owner !== id).map((x) => x.owner)
    const knownBeside = beside.filter((s) => !frozen.has(s))
    // an unknown server never receives keys while a known one remains, even at
    // the cost of contiguity: the receiver then owns two runs
    const pool = knownBeside.length > 0 ? knownBeside : knownRemaining.length > 0 ? knownRemaining : remaining
    const to = pool.slice().sort(better)[0]
    r.owner = to
    serverLoad.set(to, serverLoad.get(to) + between(r.start, r.end))
  })
  // the given run and its receiver's run are now one run (and one bucket set)
  const merged = runsOf(runs.map((r) => ({ start: r.start, end: r.end, servers: [r.owner] })))
  // a frozen receiver keeps its own slices; the given keys are cut from base's slices too
  const keep = new Set([...frozen])
  return layout(base, merged, o.buckets, keep, servers, between).assignment
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
  offloadRound
}
