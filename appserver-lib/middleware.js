'use strict'

const { performance } = require('node:perf_hooks')
const { sliceKey } = require('../core/keyspace')
const { MissingKeyError, InvalidArgumentError } = require('../core/errors')
const { defaultKeyFrom } = require('../core/request-key')
const { isSafe } = require('../core/http-methods')
const { OWNER_HINT } = require('../core/http')

/** How a request's cost (busy time reported per slice) is measured; see shardGuardMiddleware. */
const COST_MODES = ['wall', 'cpu']
// Symbols, not public fields: setRequestCost and settleRequest are the API.
// Declared with the request shapes (request-shapes.js) that are born with them.
const { STATED_COST, SETTLE } = require('./request-shapes')

/**
 * State the cost of a request (ms) yourself, instead of what the middleware
 * measures (wall or CPU time): for example a modelled service time, or the
 * work a request queued elsewhere. The last call before the response closes
 * wins. Only requests the shard guard admitted are counted.
 * @param {import('express').Request} req
 * @param {number} ms a finite number >= 0
 */
function setRequestCost (req, ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) throw new InvalidArgumentError(`invalid cost: expected a finite number of ms >= 0, got ${String(ms)}`)
  req[STATED_COST] = ms
}

/**
 * Say that a request's effects are complete (its writes are applied and
 * fenced) although its response is not finished yet: a handoff stops waiting
 * for it. For an app that streams or delays its answer after committing, such
 * as the experiments' capacity model, which holds each response until its
 * modelled completion. A no-op for requests a handoff does not wait for.
 * @param {import('express').Request} req
 */
function settleRequest (req) {
  const settle = req[SETTLE]
  if (settle !== undefined) settle()
}

/** Requests a handoff must drain before the next owner starts (handoffDrain 'writes'). */
const isWrite = (method) => !isSafe(method)

/**
 * What the app learns about an admitted request, all from the map that
 * admitted it: the slice key, the generation (a fencing token for writes), the
 * slice's servers (primary first), the servers admitting it now (a subset
 * during a handoff) and the servers' URLs (docs/replication.md).
 */
function describe (req, key, token, slice) {
  req.sliceKey = key
  req.chopperGeneration = token.generation
  req.chopperReplicas = token.map.replicas[slice]
  req.chopperAdmitters = token.map.admitters[slice]
  req.chopperServers = token.map.assignment.servers
}

/**
 * Express middleware enforcing ownership: 400 without a key; 421 (with our
 * generation and, when our map names other servers for the key, their ids in
 * X-Chopper-Owner) for a key this server may not admit, after holding it briefly
 * when the map that decides it is on its way (a fenced handoff, or a front end
 * that already routes with a newer generation); else counts the request,
 * tracks it as in flight until the response closes (a handoff waits for it),
 * sets `req.sliceKey`, `req.chopperGeneration` (the generation it was
 * admitted under: a fencing token for the app's writes), `req.chopperReplicas`
 * (the slice's servers under that map, primary first), `X-Served-By` and, as
 * the answer's head is written, `X-Chopper-Inflight` (admitted requests not
 * yet answered, this one included: front ends weigh replicas by it), and
 * calls the app. When the response closes, the request's cost goes to its
 * slice's range in the map that admitted it.
 * @param {import('./shard-guard').ShardGuard} guard
 * @param {{ keyFrom?: (req) => string|undefined, enforce?: boolean, cost?: 'wall'|'cpu', admitJoining?: (req) => boolean }} [options]
 *   enforce: false serves every key and only counts (for baselines such as
 *   HAProxy hashing in front of the same servers, where there is no slice map).
 *   cost: 'wall' (default) measures from admission until the response closes
 *   (includes waiting on I/O and on the event loop); 'cpu' measures the
 *   process's CPU time across the synchronous part of the handler (for
 *   CPU-bound apps; work the handler defers is not seen). setRequestCost
 *   overrides either.
 *   admitJoining: requests for which it returns true are admitted at once for
 *   a slice this server is joining (a handoff that adds it; the grant is still
 *   on its way) instead of held until the grant: for the app's coordination
 *   requests that are safe to take early, such as kv-cache's write holds.
 */
function shardGuardMiddleware (guard, { keyFrom = defaultKeyFrom, enforce = true, cost = 'wall', admitJoining = null } = {}) {
  if (!COST_MODES.includes(cost)) throw new InvalidArgumentError(`invalid cost: expected one of ${COST_MODES.join(', ')}, got ${JSON.stringify(cost)}`)
  if (admitJoining !== null && typeof admitJoining !== 'function') throw new InvalidArgumentError('invalid admitJoining: expected a function (req) => boolean')

  // The token (one per map) carries the map that admitted the request: its
  // replicas for the app, its slice range for the cost, whatever map is
  // installed when the request ends. A closure rather than a property added
  // to `res` (measured: an expando on Node's response objects cost more per
  // request than the closure).
  function admittedWall (req, res, next, key, slice) {
    let write = isWrite(req.method)
    const token = guard.begin(write)
    reportInflight(res)
    const t0 = performance.now()
    if (write) req[SETTLE] = () => { if (write) { write = false; guard.settle(token) } }
    res.once('close', () => {
      const stated = req[STATED_COST]
      guard.end(token, slice, stated === undefined ? performance.now() - t0 : stated, write)
    })
    describe(req, key, token, slice)
    next()
  }

  function admittedCpu (req, res, next, key, slice) {
    let write = isWrite(req.method)
    const token = guard.begin(write)
    reportInflight(res)
    let cpuMs = 0
    if (write) req[SETTLE] = () => { if (write) { write = false; guard.settle(token) } }
    res.once('close', () => {
      const stated = req[STATED_COST]
      guard.end(token, slice, stated === undefined ? cpuMs : stated, write)
    })
    describe(req, key, token, slice)
    const c0 = process.cpuUsage()
    next()
    const d = process.cpuUsage(c0)
    cpuMs = (d.user + d.system) / 1000
  }

  const admitted = cost === 'cpu' ? admittedCpu : admittedWall

  // The answer says how many requests this server holds as it leaves (this
  // one included): front ends count the part that is not theirs when they
  // choose among a slice's replicas (core/replica-router.js). Set as the
  // head is written, not on arrival, so an app that holds its answer (the
  // experiments' capacity model) reports its queue at that moment.
  function reportInflight (res) {
    const writeHead = res.writeHead
    res.writeHead = function writeHeadWithInflight (...args) {
      if (!this.headersSent) this.setHeader('X-Chopper-Inflight', String(guard.running))
      return writeHead.apply(this, args)
    }
  }

  // A refusal because our map names other servers says which (OWNER_HINT,
  // core/http.js): a router cut from the controllers, whose map is older than
  // ours, can try them rather than wait for a map it cannot get. A lease
  // refusal names nobody: without a lease our map may be out of date.
  function refuse (req, res, next, appKey, key, verdict) {
    res.setHeader('X-Chopper-Generation', String(guard.generation))
    if (verdict === -2) return next(guard.leaseExpiredError())
    const servers = guard.serversOf(key)
    if (servers !== null) res.setHeader(OWNER_HINT, servers.length === 1 ? servers[0] : servers.join(','))
    next(guard.notOwnerError(appKey))
  }

  return function chopperShardGuard (req, res, next) {
    res.setHeader('X-Served-By', guard.serverId)
    const appKey = keyFrom(req)
    if (appKey === undefined) return next(new MissingKeyError('missing key: pass ?key=K or an X-Chopper-Key header'))
    const header = req.headers['x-chopper-generation']
    const routed = header === undefined ? 0 : Number(header)
    if (header !== undefined) guard.observeRoutedGeneration(routed)
    const key = sliceKey(appKey)
    const joining = admitJoining !== null && admitJoining(req) === true
    const verdict = guard.admitSliceKey(key, joining)
    if (verdict >= 0) return admitted(req, res, next, key, verdict)
    if (!enforce) {
      req.sliceKey = key
      req.chopperGeneration = guard.generation
      return next()
    }
    if (verdict === -2 || (verdict === -1 && guard.shouldHold(key, routed))) {
      // decided again after the hold
      if (verdict === -1) guard.stats.misdirected--
      else guard.stats.leaseRefused--
      // A client that goes away while held must not be admitted afterwards: its
      // 'close' would already have fired, and the in-flight count never drop.
      let gone = false
      const onClose = () => { gone = true }
      res.once('close', onClose)
      guard.admitOrHold(key, routed, () => gone, joining).then((v) => {
        res.off('close', onClose)
        if (gone) return
        if (v >= 0) admitted(req, res, next, key, v)
        else refuse(req, res, next, appKey, key, v)
      }, next)
      return
    }
    refuse(req, res, next, appKey, key, verdict)
  }
}

module.exports = { shardGuardMiddleware, defaultKeyFrom, setRequestCost, settleRequest, COST_MODES }
