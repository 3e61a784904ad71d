'use strict'

const { InvalidArgumentError, UnknownServerError, MemberConflictError } = require('../core/errors')
const { ID } = require('./options')

// printable ASCII host[:port], no path: a control character is no part of a host (found by fuzz/)
const URL_RE = /^https?:\/\/[\x21-\x2e\x30-\x7e]+$/

// A registration or renewal answer carries a map or diff up to this size; a
// larger one reaches the member by push, gzipped (a newcomer's once its batch
// has placed it): a join storm's renewals must not each carry the map.
const INLINE_MAP_BYTES = 16 * 1024
// To a member that holds what it needs (no generation since changed its
// slices), an answer carries a newer map only up to this size: it keeps
// members' maps near the latest when that is cheap, but a busy spell's large
// diffs do not go to every member (docs/control-plane.md, "Who needs a generation").
const LAZY_MAP_BYTES = 2 * 1024

const bad = (msg) => { throw new InvalidArgumentError(msg) }

/**
 * The two calls every member makes, whatever carries them (HTTP in
 * controller/routes.js, a lease stream in controller/lease-streams.js):
 * registration and lease renewal, over the shared state `c`. Each returns
 * `[fields, map]`: the answer's own fields, and the map or diff it carries
 * (`{ key, raw }`, raw being serialized JSON), or null.
 */
function createMemberCalls (c) {
  /**
   * What an answer carries to bring a caller at `generation` up to the
   * published map: `{ key, raw }` of a diff (or chain) when it holds a
   * generation still in the history, else of the full map; null when it is
   * not behind, or when that is over `maxBytes` (a push brings it instead).
   */
  function mapFor (generation, maxBytes) {
    if (!c.published || generation >= c.published.generation) return null
    const b = c.pusher.bodyFor(generation)
    if (b.raw.length > maxBytes) return null
    return { key: b.diff ? 'diff' : 'assignment', raw: b.raw }
  }

  /** A member's registration: `[fields, map]` of the answer. */
  function register (body) {
    const { id, url, controlUrl, generation = 0 } = body || {}
    if (typeof id !== 'string' || !ID.test(id)) bad('invalid id: expected 1-128 characters of [A-Za-z0-9._-]')
    if (!Number.isSafeInteger(generation) || generation < 0) bad('invalid generation: expected a non-negative integer')
    if (typeof url !== 'string' || !URL_RE.test(url)) bad('invalid url: expected http(s)://host:port')
    if (typeof controlUrl !== 'string' || !URL_RE.test(controlUrl)) bad('invalid controlUrl: expected http(s)://host:port')
    if (url === controlUrl) bad('invalid controlUrl: the control plane must listen on its own port')
    // An id belongs to the member holding its lease: another process cannot
    // take it (and its traffic) over with other URLs until that lease lapsed
    // or the member deregistered. A restarted member retries until then.
    const known = c.servers.get(id)
    if (known && (known.url !== url || known.controlUrl !== controlUrl) && c.leases.remaining(id) > 0) {
      throw new MemberConflictError(`server id ${id} is held by a live member at other URLs: register again once its lease lapsed (in ${Math.ceil(c.leases.remaining(id))} ms) or it deregistered`)
    }
    c.noteGeneration(generation)
    c.addServer(id, url, controlUrl, generation)
    c.counts.registrations++
    // The answer carries a lease: the member holds the current map once it
    // installs the answer's map (or a push's).
    return [{ lease: c.grantLease(id) }, mapFor(generation, INLINE_MAP_BYTES)]
  }

  /** One renewal (docs/control-plane.md, "Heartbeats"): O(1) but for the map it may carry. */
  function renew (id, body) {
    const s = c.servers.get(id)
    if (!s) throw new UnknownServerError(`unknown app server ${id}: register first`)
    const { generation, drainedGeneration } = body || {}
    if (!Number.isSafeInteger(generation) || generation < 0) bad('invalid generation: expected a non-negative integer')
    if (!Number.isSafeInteger(drainedGeneration) || drainedGeneration < 0) bad('invalid drainedGeneration: expected a non-negative integer')
    s.generation = generation
    c.counts.renewals++
    // It holds this generation: a push of it is not needed (the pusher skips it).
    c.pusher.noteHeld(`server:${id}`, generation)
    // Nobody drains a generation it does not hold, nor one not issued yet.
    c.noteDrained(id, Math.min(drainedGeneration, generation, c.assignment ? c.assignment.generation : 0))
    // The lease counts only for a member that holds the last generation that
    // changed its slices (lease.minGeneration): the answer carries what it
    // lacks (a diff, or the whole map) when it is behind that, and the
    // member installs it first.
    const needed = c.pusher.needs(id)
    const map = mapFor(generation, generation < needed ? INLINE_MAP_BYTES : LAZY_MAP_BYTES)
    // Behind what it needs by more than an answer carries: a push brings it (gzipped), even where pushes are selective.
    if (!map && generation < needed) c.pusher.want(`server:${id}`)
    return [{ lease: c.grantLease(id) }, map]
  }

  return { register, renew, mapFor }
}

/** `fields` as JSON with `map.raw` (already serialized JSON) spliced in as `map.key`. */
function encode (fields, map) {
  const head = JSON.stringify(fields)
  if (!map) return Buffer.from(head)
  const open = head.length > 2 ? head.slice(0, -1) + ',' : '{'
  return Buffer.concat([Buffer.from(`${open}"${map.key}":`), map.raw, Buffer.from('}')])
}

module.exports = { createMemberCalls, encode, INLINE_MAP_BYTES, LAZY_MAP_BYTES, URL_RE }
