'use strict'

/**
 * The pure half of fenced handoff (docs/ownership.md): given what members may
 * hold now and the layout the strategy wants, build the *revoke* layout that
 * is safe to push to everyone in any order, and name the servers that must
 * stop admitting something before the target layout may be granted.
 *
 * A piece of keyspace is `moving` in the revoke layout when the server that
 * may admit it now (the primary of a non-moving slice in `current`) is not its
 * primary in `next`, or when it is already moving in `current` (a handoff in
 * progress that a newer target supersedes: its earlier losers are still
 * tracked by the caller). Moving pieces are routed to their new primary, which
 * holds requests for them until the grant arrives. Nothing is ever granted by
 * a revoke layout, so its delivery order does not matter.
 *
 * @param {object} current assignment members may hold now (may have moving slices)
 * @param {object} next target layout (moving marks are ignored)
 * @returns {{ revoke: object, losers: string[], moving: number }}
 *   revoke: layout (no generation) with `moving` marks; losers: servers that
 *   admit some range in `current` that they do not own in `next`, sorted;
 *   moving: total key-range length marked moving
 */
function planHandoff (current, next) {
  const slices = []
  const losers = new Set()
  let moving = 0
  let i = 0
  for (const target of next.slices) {
    const owner = target.servers[0]
    // pieces of `target` cut at `current`'s boundaries, coalesced per state
    let start = target.start
    let run = null
    while (start < target.end) {
      while (current.slices[i].end <= start) i++
      const cur = current.slices[i]
      const end = Math.min(cur.end, target.end)
      const admitter = cur.moving ? null : cur.servers[0]
      const isMoving = cur.moving === true || admitter !== owner
      if (admitter !== null && admitter !== owner) losers.add(admitter)
      if (isMoving) moving += end - start
      if (run && run.moving === isMoving) {
        run.end = end
      } else {
        run = { start, end, moving: isMoving }
        slices.push(run)
      }
      start = end
    }
  }
  const revoke = {
    servers: next.servers,
    slices: slices.map((p) => {
      const target = next.slices[findSlice(next.slices, p.start)]
      return p.moving
        ? { start: p.start, end: p.end, servers: target.servers.slice(), moving: true }
        : { start: p.start, end: p.end, servers: target.servers.slice() }
    })
  }
  return { revoke, losers: [...losers].sort(), moving }
}

function findSlice (slices, key) {
  let lo = 0
  let hi = slices.length - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1
    if (slices[mid].start <= key) lo = mid
    else hi = mid - 1
  }
  return lo
}

module.exports = { planHandoff }
