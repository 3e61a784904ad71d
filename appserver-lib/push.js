'use strict'

const { resolveMap } = require('../core/map-diff')
const { MalformedBodyError, statusOf, toHttpBody } = require('../core/errors')
const { MAP_HEADER } = require('../core/cluster-auth')

/**
 * Apply one map push from the controller (a full map or a diff from the
 * generation held, core/map-diff.js), whichever way it came: `PUT
 * /v1/assignment` on the control port (control-app.js) or the lease stream
 * (core/lease-stream.js). Resolves `{ status, body }` of the answer.
 *
 * The answer to a revoke waits until the requests admitted under older maps
 * finished (bounded by `drainTimeoutMs`; the controller falls back on the
 * lease when this times out), so the next owner starts after them. A diff
 * from another base is answered 409 with the generation held: the controller
 * sends a diff from there, or the full map. Other refusals reject.
 * @param {import('./shard-guard').ShardGuard} guard
 * @param {object} body the parsed push
 */
async function applyPush (guard, body, { drainTimeoutMs, logger }) {
  try {
    const { changed, hooks } = guard.setAssignment(resolveMap(guard.map && guard.map.assignment, body))
    let hookError
    try {
      await hooks
    } catch (err) {
      // The map is installed; a failed hook is the app's to report.
      hookError = err.message
    }
    const drained = await guard.waitDrained(drainTimeoutMs)
    return { status: 200, body: { accepted: true, changed, generation: guard.generation, drainedGeneration: guard.drainedGeneration, drained, ...(hookError ? { hookError } : {}) } }
  } catch (err) {
    // A stale push is routine (registration can install a newer map first): debug, without a
    // stack. Anything else is not.
    if (err.code === 'CHOPPER_ERR_STALE_GENERATION' || err.code === 'CHOPPER_ERR_DIFF_BASE') logger.debug({ code: err.code, reason: err.message }, 'assignment push rejected')
    else logger.warn({ err }, 'assignment push rejected')
    if (err.code === 'CHOPPER_ERR_DIFF_BASE') return { status: 409, body: { ...toHttpBody(err), generation: guard.generation } }
    throw err
  }
}

/**
 * The lease stream's side of a push (core/lease-stream.js `servePush`):
 * the raw body, checked against the map signature it came with when the
 * cluster has a token, then applied. Never rejects: a refusal is an answer.
 * @param {{ guard, verifier: import('../core/cluster-auth').RequestVerifier|null, drainTimeoutMs: number, logger }} options
 */
function streamPushes ({ guard, verifier, drainTimeoutMs, logger }) {
  return async function servePush ({ raw, signature }) {
    try {
      if (verifier) verifier.verifyMap({ headers: { [MAP_HEADER]: signature }, rawBody: raw })
      let body
      try {
        body = JSON.parse(raw.toString('utf8'))
      } catch {
        throw new MalformedBodyError('expected a JSON assignment body')
      }
      return await applyPush(guard, body, { drainTimeoutMs, logger })
    } catch (err) {
      return { status: statusOf(err), body: toHttpBody(err) }
    }
  }
}

module.exports = { applyPush, streamPushes }
