'use strict'

const { sliceKey } = require('../core/keyspace')
const { MissingKeyError } = require('../core/errors')

/** Default key extraction: `?key=` first, then the X-Chopper-Key header. */
function defaultKeyFrom (req) {
  const q = req.query.key
  if (typeof q === 'string' && q.length > 0) return q
  const h = req.headers['x-chopper-key']
  return typeof h === 'string' && h.length > 0 ? h : undefined
}

/**
 * Express middleware enforcing ownership: 400 without a key, 421 (with our
 * generation) for a key this server does not own, else counts the request,
 * sets `req.sliceKey` and `X-Served-By`, and calls the app.
 * @param {import('./shard-guard').ShardGuard} guard
 * @param {{ keyFrom?: (req) => string|undefined, enforce?: boolean }} [options]
 *   enforce: false serves every key and only counts (for baselines such as
 *   HAProxy hashing in front of the same servers, where there is no slice map).
 */
function shardGuardMiddleware (guard, { keyFrom = defaultKeyFrom, enforce = true } = {}) {
  return function chopperShardGuard (req, res, next) {
    res.setHeader('X-Served-By', guard.serverId)
    const appKey = keyFrom(req)
    if (appKey === undefined) return next(new MissingKeyError('missing key: pass ?key=K or an X-Chopper-Key header'))
    const routed = req.headers['x-chopper-generation']
    if (routed !== undefined) guard.observeRoutedGeneration(Number(routed))
    const key = sliceKey(appKey)
    if (guard.admitSliceKey(key) === -1 && enforce) {
      res.setHeader('X-Chopper-Generation', String(guard.generation))
      return next(guard.notOwnerError(appKey))
    }
    req.sliceKey = key
    next()
  }
}

module.exports = { shardGuardMiddleware, defaultKeyFrom }
