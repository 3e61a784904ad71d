'use strict'

const { sliceKey } = require('../core/keyspace')
const { MissingKeyError } = require('../core/errors')
const { defaultKeyFrom } = require('../core/request-key')

/**
 * Express middleware enforcing ownership: 400 without a key; 421 (with our
 * generation) for a key this server may not admit, after holding it briefly
 * when the map that decides it is on its way (a fenced handoff, or a front end
 * that already routes with a newer generation); else counts the request,
 * tracks it as in flight until the response closes (a handoff waits for it),
 * sets `req.sliceKey` and `req.chopperGeneration` (the generation it was
 * admitted under: a fencing token for the app's writes) and `X-Served-By`, and
 * calls the app.
 * @param {import('./shard-guard').ShardGuard} guard
 * @param {{ keyFrom?: (req) => string|undefined, enforce?: boolean }} [options]
 *   enforce: false serves every key and only counts (for baselines such as
 *   HAProxy hashing in front of the same servers, where there is no slice map).
 */
function shardGuardMiddleware (guard, { keyFrom = defaultKeyFrom, enforce = true } = {}) {
  function admitted (req, res, next, key) {
    const token = guard.begin()
    // A closure rather than a property added to `res` (measured: an expando on
    // Node's response objects cost more per request than the closure).
    res.once('close', () => guard.end(token))
    req.sliceKey = key
    req.chopperGeneration = token.generation
    next()
  }

  function refuse (req, res, next, appKey, verdict) {
    res.setHeader('X-Chopper-Generation', String(guard.generation))
    next(verdict === -2 ? guard.leaseExpiredError() : guard.notOwnerError(appKey))
  }

  return function chopperShardGuard (req, res, next) {
    res.setHeader('X-Served-By', guard.serverId)
    const appKey = keyFrom(req)
    if (appKey === undefined) return next(new MissingKeyError('missing key: pass ?key=K or an X-Chopper-Key header'))
    const header = req.headers['x-chopper-generation']
    const routed = header === undefined ? 0 : Number(header)
    if (header !== undefined) guard.observeRoutedGeneration(routed)
    const key = sliceKey(appKey)
    const verdict = guard.admitSliceKey(key)
    if (verdict >= 0) return admitted(req, res, next, key)
    if (!enforce) {
      req.sliceKey = key
      req.chopperGeneration = guard.generation
      return next()
    }
    if (verdict === -1 && guard.shouldHold(key, routed)) {
      guard.stats.misdirected-- // decided again after the hold
      // A client that goes away while held must not be admitted afterwards: its
      // 'close' would already have fired, and the in-flight count never drop.
      let gone = false
      const onClose = () => { gone = true }
      res.once('close', onClose)
      guard.admitOrHold(key, routed, () => gone).then((v) => {
        res.off('close', onClose)
        if (gone) return
        if (v >= 0) admitted(req, res, next, key)
        else refuse(req, res, next, appKey, v)
      }, next)
      return
    }
    refuse(req, res, next, appKey, verdict)
  }
}

module.exports = { shardGuardMiddleware, defaultKeyFrom }
