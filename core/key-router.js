'use strict'

const {
  NoAssignmentError, UpstreamUnreachableError, UpstreamUnavailableError,
  UpstreamTimeoutError, InvalidArgumentError, WriteIndeterminateError
} = require('./errors')
const { DEFER } = require('./replica-router')
const { silent } = require('./logger')
const { isSafe, isRead } = require('./http-methods')

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])
// undici refused the request itself (a header it does not accept): the caller's fault, 400.
const CLIENT_FAULT_CODES = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED'])
// Nothing reached the app server: any replayable request may be sent elsewhere.
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH'])
// A request may have reached the app server before its connection broke: only
// reads are sent again then. A PUT or DELETE is idempotent in RFC 9110's sense
// (9.2.2), but not against other clients' writes: replayed after another
// client's write of the key was answered, a PUT that had already taken effect
// takes effect a second time and undoes that write (the chaos run's history
// checker caught one, 2026-11-26). A write whose connection broke is answered
// 503 CHOPPER_ERR_WRITE_INDETERMINATE instead: it may or may not have applied
// (isSafe, core/http-methods.js).
// A key can meet several handoffs in a row (a hot slice moved twice): retry a
// few times, always within the hold deadline.
const MAX_RETRIES = 4
// A 421 from a server whose map is newer than ours names the key's servers
// (X-Chopper-Owner, core/http.js OWNER_HINT). When no newer map comes, the
// request tries the named server, as one of its retries: at once when the
// pull just failed (we are cut from the controllers, and a push cannot reach
// us either), else after this share of the hold, time enough for the push
// or one of the pulls (every 100 ms) that normally bring the map. Safe
// without the map: the named server's shard guard admits only what its own
// map gives it, and answers 421 otherwise.
const HINT_AFTER_SHARE = 0.25

const NOTHING = Object.freeze({ inc () {}, labels () { return NOTHING } })
/** The counters a router keeps when its owner has no metrics (the client). */
const NO_METRICS = Object.freeze({ upstreamErrors: NOTHING, retries: NOTHING, misdirected: NOTHING })

function retryableAfter (err, method) {
  return NOT_SENT_CODES.has(err.code) || isSafe(method)
}

/**
 * The server a 421 `outcome` names (core/forwarder.js `owners`) that this
 * request may try: one of `map`'s servers (an id it does not know is
 * ignored: it has no URL for it) not in `tried`; for a write only the
 * primary, the first named. null when there is none, or when the refusing
 * server's map is not newer than `generation`, the one the request was sent
 * with: then its hint is no better than ours.
 */
function hintedServer (outcome, generation, map, read, tried) {
  if (outcome.owners == null || !(outcome.generation > generation)) return null
  const ids = outcome.owners.split(',')
  const n = read ? ids.length : 1
  for (let i = 0; i < n; i++) {
    const id = ids[i].trim()
    if (Object.hasOwn(map.assignment.servers, id) && !tried.includes(id)) return id
  }
  return null
}

/**
 * The routing of one request by key, shared by the front end (an HTTP
 * server around it: frontend/proxy.js) and the client (an undici Dispatcher
 * around it: client/dispatcher.js): key -> slice -> server -> forward, and
 * the hold and retry when that server cannot take it.
 *
 * The server: `replicas` (core/replica-router.js) picks it. Reads of a
 * slice that several servers admit choose among them with the replica-choice
 * policy; writes go to the primary (or the first holder while the primary
 * does not admit the slice yet); a slice nobody admits goes to its primary,
 * which holds the request until the grant.
 *
 * On 421 (our map is stale, the slice is being handed off, or the owner's
 * lease ran out) or an unreachable owner (killed, or gone after a drain), wait
 * up to `holdMs` for a newer map (a push wakes us; we also pull) and retry on
 * the server it names, when the request can be replayed (no body, or a body
 * held whole) and, after a broken connection (not a refused one), only when
 * it is a read: a write whose connection broke after it was sent may have
 * applied, and fails with CHOPPER_ERR_WRITE_INDETERMINATE. A read of a
 * replicated slice retries on another replica without waiting. When the 421
 * came from a server with a newer map and no newer map arrives (we are cut
 * from the controllers), the request tries the server that 421 names instead
 * (HINT_AFTER_SHARE). So a request that meets a handoff or a dead server is
 * delayed, not failed, unless it is a write the dead server may have applied.
 *
 * A request is an *exchange*, one object its owner builds:
 *   { method, path, appKey, key (its slice key), size, read, body (null, a
 *     Buffer, or a stream), replayable, sink (where the answer goes: see
 *     core/forwarder.js), upstream (set here: the attempt's handle, whose
 *     abort() the owner calls when its caller leaves),
 *     headersFor(generation) → the flat header list to send,
 *     fail(err) → the request failed with a Chopper error (core/errors.js) }
 *
 * @param {object} options
 * @param {import('./routing-table').RoutingTable} options.table the map
 * @param {import('./replica-router').ReplicaRouter} options.replicas replica choice and its counters
 * @param {{ attempt: Function }} options.forwarder core/forwarder.js
 * @param {object} [options.metrics] prom-client counters upstreamErrors, retries, misdirected (frontend/metrics.js)
 * @param {number} [options.holdMs] how long a request waits for a newer map
 * @returns {{ route: (exchange) => void, table, replicas, forwarder }}
 */
function createKeyRouter ({ table, replicas, forwarder, metrics = NO_METRICS, holdMs = 3000, logger = silent }) {
  const hintAfterMs = holdMs * HINT_AFTER_SHARE
  // The headers every answer gets, per map and owner: built once, shared read-only.
  let extraFor = null
  let extraMap = null
  function responseHeadersFor (map, owner) {
    if (extraMap !== map) {
      extraMap = map
      extraFor = new Map()
    }
    let h = extraFor.get(owner)
    if (!h) {
      h = ['x-served-by', owner, 'x-chopper-generation', String(map.generation)]
      extraFor.set(owner, h)
    }
    return h
  }

  function attempt (ex, map, owner, slot, done) {
    const generation = map.generation
    ex.upstream = forwarder.attempt({
      origin: map.urlOf(owner),
      request: { method: ex.method, path: ex.path, headers: ex.headersFor(generation), body: ex.body },
      sink: ex.sink,
      extra: responseHeadersFor(map, owner),
      done,
      tracker: replicas,
      slot,
      size: ex.size
    })
  }

  const attemptAsync = (ex, map, owner, slot) => new Promise((resolve, reject) => {
    attempt(ex, map, owner, slot, (err, outcome) => (err ? reject(err) : resolve(outcome)))
  })

  /**
   * The general path: no map yet, an LC* deferral, or a first attempt that
   * met a 421 or a transport error (`first`: its result). Retries and holds.
   */
  async function retry (ex, first) {
    if (!table.map) await table.refresh()
    if (!table.map) throw new NoAssignmentError('no slice assignment yet: the controller has not pushed one')
    const { method, read, key, appKey, replayable } = ex
    let tried // servers that failed this request (421, unreachable): a read takes another replica while there is one
    let deadline = 0
    let hint = null // the server a 421 named, for the next attempt
    for (let n = 0; ; n++) {
      let owner, origin, generation, outcome
      try {
        if (n === 0 && first !== undefined) {
          ({ owner, origin, generation } = first)
          if (first.err) throw first.err
          outcome = first.outcome
        } else {
          let slot
          if (hint !== null) {
            slot = replicas.slotOf(hint) // not where our map routes the key: that server's guard decides
            hint = null
          } else {
            slot = await replicas.place(table, key, read, ex.size, tried)
          }
          const map = table.map
          owner = replicas.ids[slot]
          origin = map.urlOf(owner)
          generation = map.generation
          outcome = await attemptAsync(ex, map, owner, slot)
        }
      } catch (err) {
        if (CLIENT_FAULT_CODES.has(err.code)) throw new InvalidArgumentError(`request cannot be forwarded: ${err.message}`, { cause: err })
        metrics.upstreamErrors.inc({ server: owner, code: err.code || 'UNKNOWN' })
        if (TIMEOUT_CODES.has(err.code)) throw new UpstreamTimeoutError(`app server ${owner} did not answer in time`, { cause: err })
        if (NOT_SENT_CODES.has(err.code) && owner !== undefined) replicas.suspect(owner) // refused: other replicas take its reads for a while
        if (n === 0 && replayable && !NOT_SENT_CODES.has(err.code) && isSafe(method)) {
          // A broken connection, not a refused one: most often a keep-alive
          // socket the server had just closed. Try once more (the same owner,
          // or for a read of a replicated slice, whichever replica the policy picks).
          deadline = Date.now() + holdMs
          metrics.retries.inc({ reason: 'connection' })
          continue
        }
        if (n < MAX_RETRIES && replayable && retryableAfter(err, method)) {
          // A fresh hold from here: the controller moves a dead server's slices
          // only once its lease lapsed, whatever this request already waited.
          deadline = Math.max(deadline, Date.now() + holdMs)
          tried = tried ? [...tried, owner] : [owner]
          // Any newer map will not do: wait for one that routes the key
          // elsewhere (a read of a replicated slice may have another replica already).
          let next = table.map
          while (next && !replicas.routesElsewhere(next, key, read, tried) && Date.now() < deadline) {
            next = await table.waitNewer(next.generation, { timeoutMs: deadline - Date.now() })
          }
          if (next && replicas.routesElsewhere(next, key, read, tried)) {
            metrics.retries.inc({ reason: 'unreachable' })
            continue
          }
        }
        if (owner !== undefined && !isSafe(method) && !NOT_SENT_CODES.has(err.code)) {
          logger.warn({ server: owner, origin, method, err }, 'connection broke after a write was sent: its outcome is unknown')
          throw new WriteIndeterminateError(`the connection to app server ${owner} broke after the ${method} was sent (${err.code || err.message}): it may or may not have been applied; read the key to find out`, { cause: err })
        }
        logger.warn({ server: owner, origin, err }, 'app server unreachable')
        throw new UpstreamUnreachableError(`app server ${owner} at ${origin} is unreachable (${err.code || err.message})`, { cause: err })
      }
      if (outcome === null) return // committed: the answer streams to the sink
      metrics.misdirected.inc()
      if (n >= MAX_RETRIES || !replayable) {
        throw new UpstreamUnavailableError(`slice ownership for key ${JSON.stringify(appKey)} is moving; retry the request`)
      }
      if (n === 0) deadline = Date.now() + holdMs
      tried = tried ? [...tried, owner] : [owner]
      if (read && replicas.routesElsewhere(table.map, key, read, tried)) {
        // One replica is behind or no longer holds the slice; another that
        // our map names may serve the read now, without waiting for a map.
        metrics.retries.inc({ reason: 'misdirected' })
        continue
      }
      // The server told us we are behind, or that it cannot admit the key yet:
      // a newer map decides; wait for it (bounded), then try whoever it names.
      const named = table.generation <= generation ? hintedServer(outcome, generation, table.map, read, tried) : null
      if (named === null) {
        await table.refresh()
        if (table.generation <= generation) await table.waitNewer(generation, { timeoutMs: deadline - Date.now() })
      } else {
        // Not waiting on the pull itself: cut from the controllers, it hangs
        // until its timeout. Its answer, or a push, wakes waitNewer.
        table.refresh()
        if (!table.pullFailing) await table.waitNewer(generation, { timeoutMs: Math.min(hintAfterMs, deadline - Date.now()) })
        if (table.generation <= generation) {
          hint = named
          metrics.retries.inc({ reason: 'hint' })
          continue
        }
      }
      if (table.generation <= generation && n > 0) {
        throw new UpstreamUnavailableError(`slice ownership for key ${JSON.stringify(appKey)} is moving; retry the request`)
      }
      metrics.retries.inc({ reason: 'misdirected' })
    }
  }

  function slow (ex, first) {
    retry(ex, first).catch((err) => ex.fail(err))
  }

  /** Route one exchange; its outcome goes to its sink, or to its fail(). */
  function route (ex) {
    const map = table.map
    if (map === null) return slow(ex)
    const slot = replicas.pick(map, map.indexOf(ex.key), ex.read, ex.size)
    if (slot === DEFER) return slow(ex) // LC*: every replica runs a long job; wait on the slow path
    // The common case, with no promise: one attempt on the server the map names.
    const owner = replicas.ids[slot]
    attempt(ex, map, owner, slot, (err, outcome) => {
      if (!err && outcome === null) return
      slow(ex, { err, outcome, owner, origin: map.urlOf(owner), generation: map.generation })
    })
  }

  return { route, table, replicas, forwarder }
}

module.exports = { createKeyRouter, isRead, NO_METRICS }
