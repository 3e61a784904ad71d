'use strict'

/**
 * The pure half of fenced handoff (docs/ownership.md): given what members may
 * hold now and the layout the strategy wants, build the *revoke* layout that
 * is safe to push to everyone in any order, and name the servers that must
 * stop admitting something before the target layout may be granted.
 *
 * A piece of keyspace is `moving` in the revoke layout when the set of
 * servers that may admit it now (every server of a non-moving slice in
 * `current`, or a moving slice's holders) differs from its servers in
 * `next`, or when it is already moving in `current` (a handoff in progress
 * that a newer target supersedes: its earlier losers are still tracked by the
 * caller). A new primary among the same servers is not a change. Every server
 * that may admit a moving piece now must acknowledge the revoke (drain what it
 * admitted under older maps) before the grant. When those servers all stay
 * (the piece only gains replicas: docs/replication.md) they are its `holders`
 * and keep admitting it meanwhile; otherwise nobody admits it until the grant,
 * and routers send it to its new primary, which holds requests for it. Nothing
 * is ever granted by a revoke layout, so its delivery order does not matter.
 *
 * @param {object} current assignment members may hold now (may have moving slices)
 * @param {object} next target layout (moving marks are ignored)
 * @returns {{ revoke: object, losers: string[], moving: number }}
 *   revoke: layout (no generation) with `moving` marks (and `holders`); losers:
 *   servers that admit some range in `current` whose servers change in
 *   `next` (they must acknowledge), sorted; moving: total key-range length
 *   marked moving
 */
function planHandoff (current, next) {
  const slices = []
  const losers = new Set()
  let moving = 0
  let i = 0
  for (const target of next.slices) {
    const targetServers = target.servers
    // pieces of `target` cut at `current`'s boundaries, coalesced per state
    let start = target.start
    let run = null
    while (start < target.end) {
      while (current.slices[i].end <= start) i++
      const cur = current.slices[i]
      const end = Math.min(cur.end, target.end)
      const admitters = cur.moving ? (cur.holders || NONE) : cur.servers
      const isMoving = cur.moving === true || !sameSet(admitters, targetServers)
      let holders = null
      if (isMoving) {
        for (const id of admitters) losers.add(id)
        moving += end - start
        // everyone admitting it now stays: they keep serving during the handoff
        if (admitters.length > 0 && admitters.every((id) => targetServers.includes(id))) {
          holders = targetServers.filter((id) => admitters.includes(id))
        }
      }
      const tag = holders ? holders.join('\0') : ''
      if (run && run.moving === isMoving && run.tag === tag) {
        run.end = end
      } else {
        run = { start, end, moving: isMoving, holders, tag, servers: targetServers }
        slices.push(run)
      }
      start = end
    }
  }
  const revoke = {
    servers: next.servers,
    slices: slices.map((p) => {
      if (!p.moving) return { start: p.start, end: p.end, servers: p.servers.slice() }
      return p.holders
        ? { start: p.start, end: p.end, servers: p.servers.slice(), moving: true, holders: p.holders }
        : { start: p.start, end: p.end, servers: p.servers.slice(), moving: true }
    })
  }
  return { revoke, losers: [...losers].sort(), moving }
}

const NONE = Object.freeze([])

/** Same members, in any order (both lists are duplicate-free). */
function sameSet (a, b) {
  if (a.length !== b.length) return false
  for (const id of a) if (!b.includes(id)) return false
  return true
}

module.exports = { planHandoff }
