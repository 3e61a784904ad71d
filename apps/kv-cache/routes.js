'use strict'

const express = require('express')
const { sliceKey } = require('../../core/keyspace')
const { jsonErrorHandler, RETRY_NEWER_MAP, OWNER_HINT } = require('../../core/http')
const { defaultKeyFrom } = require('../../core/request-key')
const { generationOf: generationOfVersion, clockOf } = require('./version')

/** A release's version may run ahead of this server's clock by at most this (clock skew between replicas). */
const MAX_VERSION_AHEAD_MS = 5000
const { FENCE_PATH, PHASES, READ_PHASE, fenceContext } = require('./fence-client')
const { RequestVerifier } = require('../../core/cluster-auth')
const {
  InvalidArgumentError,
  MalformedBodyError,
  MethodNotAllowedError,
  MissingKeyError,
  NotFoundError,
  NotOwnerError,
  NotPrimaryError,
  PayloadTooLargeError,
  ReplicaUnavailableError
} = require('../../core/errors')

/** How long a release of a generation this server has not installed yet waits for that map (appserver-lib's holdMs). */
const RELEASE_GENERATION_WAIT_MS = 2000
const LIFTS = Object.freeze(['release', 'abort', 'lapse']) // the fence phases that lift a hold

/** DynamoDB's partition-key limit; longer keys would fail there with a vaguer message. */
const MAX_KEY_BYTES = 2048
const DEFAULT_CONTENT_TYPE = 'application/octet-stream'

/**
 * The data routes: GET, PUT and DELETE on /kv?key=K (or X-Chopper-Key, the
 * same precedence as appserver-lib's shard guard, which normally runs first
 * and sets req.sliceKey and req.chopperGeneration). The value is the PUT body,
 * stored byte for byte with its Content-Type and returned as such. Writes carry
 * the generation they were admitted under: one fenced off by a newer owner
 * answers 421 CHOPPER_ERR_FENCED_WRITE, and the front end refreshes its map
 * and retries.
 *
 * Replicated slices (docs/replication.md): `req.chopperReplicas` (set by the
 * shard guard) lists the slice's servers, primary first. Any of them serves
 * GETs; a PUT or DELETE on one that is not the writer answers 421
 * CHOPPER_ERR_NOT_PRIMARY, and the writer holds and fences the key on the
 * others through `POST /kv/_fence` (below). Without `req.chopperReplicas`
 * this server is the slice's only owner, as before replication.
 *
 * Every answer that did work says what kind in `X-KV-Outcome: hit | miss |
 * shared | write | fence` (shared: a miss answered by a DynamoDB read another
 * GET started), for cost models that wrap the app (bench/lib/capacity.js).
 *
 * @param {object} options
 * @param {import('./kv-service').KvService} options.service
 * @param {number} options.maxValueBytes
 * @param {string} options.serverId this server's id, as in the assignment
 * @param {(id: string, req) => string|undefined} options.urlOf a server's data URL
 * @param {(generation: number, timeoutMs: number, signal?: AbortSignal) => Promise<boolean>} [options.awaitGeneration]
 *   resolves true once this server installed `generation` or a newer map (false after the timeout, or once `signal` aborts)
 * @param {ReturnType<import('./metrics').createMetrics>} options.metrics
 * @param {string} [options.clusterToken] fence requests must be signed with it
 */
/**
 * A write refused because a replica could not be held was certainly not
 * applied, and the map that drops that replica (once the controller saw it
 * die) decides: say so (RETRY_NEWER_MAP), so a front end holds and retries it
 * rather than failing it.
 */
async function retryOnNewerMap (res, write) {
  try {
    return await write
  } catch (err) {
    if (err instanceof ReplicaUnavailableError) res.setHeader(RETRY_NEWER_MAP.name, RETRY_NEWER_MAP.value)
    throw err
  }
}

function createRoutes ({ service, maxValueBytes, serverId, urlOf, awaitGeneration = async () => false, clusterToken, metrics, logger }) {
  const router = express.Router()
  // Fences arrive on the data port, so they carry their own signature.
  const fenceVerifier = clusterToken === undefined ? null : new RequestVerifier({ token: clusterToken })
  const tooLarge = (n) => new PayloadTooLargeError(`value too large${Number.isFinite(n) ? ` (${n} bytes)` : ''}: the limit (maxValueBytes) is ${maxValueBytes} bytes`)

  const readBody = express.raw({ type: () => true, limit: maxValueBytes })

  function keyOf (req) {
    const key = defaultKeyFrom(req)
    if (key === undefined) throw new MissingKeyError('missing key: pass ?key=K or an X-Chopper-Key header')
    if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw new InvalidArgumentError(`key too long: ${Buffer.byteLength(key)} bytes; DynamoDB allows ${MAX_KEY_BYTES}`)
    return { key, slice: typeof req.sliceKey === 'number' ? req.sliceKey : sliceKey(key) }
  }

  /**
   * The other replicas a write must hold and fence, after checking that this
   * server is the slice's writer: its primary, or (while the primary does not
   * admit the slice yet: a handoff that gives it replicas) its first admitter,
   * the front end's rule (core/replica-router.js).
   */
  function writeReplicas (req) {
    const servers = req.chopperReplicas
    if (!Array.isArray(servers) || servers.length === 0) return [] // a single owner (or no shard guard)
    const admitters = Array.isArray(req.chopperAdmitters) ? req.chopperAdmitters : null
    const writer = admitters === null || admitters.length === 0 || admitters.includes(servers[0]) ? servers[0] : admitters[0]
    if (writer !== serverId) {
      metrics.notPrimary.inc()
      res421Generation(req)
      // The writer our map names, as the shard guard's 421 names owners: a
      // router whose older map cannot be refreshed (cut from the controllers) tries it.
      if (req.res) req.res.setHeader(OWNER_HINT, writer)
      throw new NotPrimaryError(`server ${serverId} is a replica, not the writer, of key ${JSON.stringify(defaultKeyFrom(req))}'s slice; writes go to ${writer}`)
    }
    const out = []
    for (const id of servers) if (id !== serverId) out.push({ id, url: urlOf(id, req) })
    return out
  }

  // Like the shard guard's 421: the generation we decided under, so a front
  // end that routed with an older map knows to refresh it.
  function res421Generation (req) {
    if (req.res && req.chopperGeneration !== undefined) req.res.setHeader('X-Chopper-Generation', String(req.chopperGeneration))
  }

  router.route('/kv')
    .get(async (req, res) => {
      const { key, slice } = keyOf(req)
      const item = await service.get(key, slice)
      res.setHeader('X-KV-Outcome', item ? (item.cached ? 'hit' : item.shared ? 'shared' : 'miss') : 'miss')
      if (!item) throw new NotFoundError(`no value for key ${JSON.stringify(key)}`)
      res.status(200)
      res.setHeader('Content-Type', item.contentType)
      res.setHeader('Content-Length', item.value.length)
      res.setHeader('X-Chopper-Cache', item.cached ? 'hit' : 'miss')
      res.end(item.value)
    })
    .put((req, res, next) => {
      // Refuse a declared oversize before reading a byte of it.
      const declared = Number(req.headers['content-length'])
      if (declared > maxValueBytes) return next(tooLarge(declared))
      keyOf(req)
      readBody(req, res, (err) => next(err && bodyError(err, tooLarge)))
    }, async (req, res) => {
      const { key, slice } = keyOf(req)
      const value = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0)
      const contentType = req.headers['content-type'] || DEFAULT_CONTENT_TYPE
      if (req.is('application/json', '+json')) {
        try {
          JSON.parse(value.toString('utf8'))
        } catch (err) {
          throw new MalformedBodyError(`malformed JSON value: ${err.message}`)
        }
      }
      const replicas = writeReplicas(req)
      res.setHeader('X-KV-Outcome', 'write')
      await retryOnNewerMap(res, service.put(key, slice, value, contentType, { generation: generationOf(req), replicas }))
      res.status(204).end()
    })
    .delete(async (req, res) => {
      const { key, slice } = keyOf(req)
      const replicas = writeReplicas(req)
      res.setHeader('X-KV-Outcome', 'write')
      await retryOnNewerMap(res, service.delete(key, slice, { generation: generationOf(req), replicas }))
      res.status(204).end()
    })
    .all((req, res, next) => {
      res.setHeader('Allow', 'GET, HEAD, PUT, DELETE')
      next(new MethodNotAllowedError(`method ${req.method} not allowed on /kv; use GET, PUT or DELETE`))
    })

  /**
   * Internal: a writing primary holds (`X-KV-Fence: hold`), fences
   * (`release`, with `X-KV-Version`) or lets go of (`abort`) key K on this
   * replica; a release this replica did not take comes again later as
   * `lapse` (drop the entry, lift the hold: kv-writer.js #liftLater). It is
   * a request for K, so the shard guard admits it only while this server
   * admits K's slice (421 otherwise, which the writer counts as done for the
   * write, and sends a release or abort again later). With a cluster token
   * the request must be signed with it, for this server, over its key,
   * headers and body (fenceContext); without one
   * authentication is only this: the headers must be complete and consistent
   * and the sender a listed replica of the slice, and anyone who can reach
   * the data port can send one (see the README).
   *
   * `X-KV-Fence: read` is a replica's read of K while a write of this server
   * holds it there (heldReads ask, kv-reader.js): answered with this
   * server's own read of K, 204 when that is version `X-KV-Version` (the
   * replica's cached one), else 200 with the value, or 404. It is answered
   * only while this server admits K's slice for reads, not merely joining it
   * (the shard guard admits fences of a joiner at once): otherwise 421, which
   * tells the replica this server serves nothing of it.
   */
  router.post(FENCE_PATH, (req, res, next) => {
    // A release may carry the written value (write-through to this replica's cache).
    const declared = Number(req.headers['content-length'])
    if (declared > maxValueBytes) return next(tooLarge(declared))
    readBody(req, res, (err) => next(err && bodyError(err, tooLarge)))
  }, async (req, res) => {
    if (fenceVerifier) verifyFence(req)
    const { key, slice } = keyOf(req)
    const { phase, fenceId, version, heldReads, unlisted } = fenceOf(req, key)
    const gen = Number(req.headers['x-chopper-generation'])
    // Plausible versions only: not of a generation this server has not reached, so a
    // forged release cannot put an entry above the next real write's version. Pushes
    // reach members in any order, so the writer may have admitted its write under a
    // map this server installs a moment later: wait for it (as the shard guard holds
    // a request routed with a newer generation) before refusing.
    if (phase === 'release' && req.chopperGeneration !== undefined && gen > req.chopperGeneration) {
      const gone = new AbortController() // the writer stopped waiting (its fence timeout): so do we
      const onClose = () => gone.abort()
      res.once('close', onClose)
      const reached = await awaitGeneration(gen, RELEASE_GENERATION_WAIT_MS, gone.signal)
      res.off('close', onClose)
      if (gone.signal.aborted) return // nobody left to answer; the hold lapses if no other release lifts it
      if (!reached) throw refuseFence(req, 'X-KV-Version is of a generation this server has not installed')
    }
    metrics.fencesReceived.inc({ phase })
    logger.debug({ key, phase, fenceId, from: req.headers['x-kv-fence-from'], version: version && version.toString() }, 'fence')
    const written = phase === 'release' && req.headers['content-type'] !== undefined && Buffer.isBuffer(req.body)
      ? { value: req.body, contentType: req.headers['content-type'] }
      : undefined
    // No modelled work of its own (bench/lib/capacity.js): a step of someone else's request.
    res.setHeader('X-KV-Outcome', 'fence')
    if (phase === READ_PHASE) {
      if (Array.isArray(req.chopperAdmitters) && !req.chopperAdmitters.includes(serverId)) {
        res421Generation(req)
        throw new NotOwnerError(`server ${serverId} does not admit key ${JSON.stringify(key)}'s slice for reads now`)
      }
      const item = await service.answerAsk(key, slice)
      if (!item) throw new NotFoundError(`no value for key ${JSON.stringify(key)}`)
      res.setHeader('X-KV-Version', item.ver.toString())
      if (version !== undefined && item.ver === version) return res.status(204).end()
      res.status(200)
      res.setHeader('Content-Type', item.contentType)
      res.setHeader('Content-Length', item.value.length)
      return res.end(item.value)
    }
    if (phase === 'hold') {
      const from = req.headers['x-kv-fence-from']
      service.hold(key, slice, fenceId, { from, url: urlOf(from, req), generation: gen, heldReads }) // synchronous: no Redis call
    } else {
      if (unlisted) metrics.unlistedLifts.inc({ phase })
      // A writer the map no longer lists may have been overtaken by a newer
      // one that did not hold us for every write since: its release lifts as
      // a lapse (drop the entry, the next read fills from DynamoDB), not cached.
      if (phase === 'lapse' || (phase === 'release' && unlisted)) await service.lapse(key, slice, fenceId)
      else await service.release(key, slice, fenceId, phase === 'release' ? version : undefined, written)
    }
    res.status(204).end()
  })

  function verifyFence (req) {
    const h = req.headers
    try {
      fenceVerifier.verify({
        method: req.method,
        path: req.originalUrl,
        headers: h,
        rawBody: Buffer.isBuffer(req.body) ? req.body : undefined,
        context: fenceContext({ to: serverId, phase: h['x-kv-fence'], fenceId: h['x-kv-fence-id'], from: h['x-kv-fence-from'], generation: h['x-chopper-generation'], version: h['x-kv-version'], contentType: h['content-type'], heldReads: h['x-kv-held-reads'] })
      })
    } catch (err) {
      metrics.fencesRefused.inc()
      logger.warn({ from: h['x-kv-fence-from'], ip: req.socket.remoteAddress, err }, 'fence request refused')
      throw err
    }
  }

  function refuseFence (req, what) {
    metrics.fencesRefused.inc()
    logger.warn({ from: req.headers['x-kv-fence-from'], ip: req.socket.remoteAddress, what }, 'fence request refused')
    return new InvalidArgumentError(`invalid fence request: ${what}`)
  }

  /**
   * The fence's phase, id, version and held-reads mode. `unlisted`: the
   * sender is not a replica of the slice in this server's map, but it lifts
   * (release, abort, lapse) a hold it took here while it was one. Maps reach
   * members in any order, so a writer's hold may come under the map that
   * lists it and its release under the next, which does not; refusing that
   * release would leave the key held here until the hold lapses
   * (holdLapseMs), every read of it waiting heldReadWaitMs first.
   */
  function fenceOf (req, key) {
    const refuse = (what) => refuseFence(req, what)
    const phase = req.headers['x-kv-fence']
    if (!PHASES.includes(phase) && phase !== READ_PHASE) throw refuse(`X-KV-Fence must be one of ${[...PHASES, READ_PHASE].join(', ')}`)
    const gen = req.headers['x-chopper-generation']
    if (typeof gen !== 'string' || !/^\d{1,15}$/.test(gen)) throw refuse('X-Chopper-Generation (the writer\'s generation) is required')
    const fenceId = req.headers['x-kv-fence-id']
    if (typeof fenceId !== 'string' || !/^[A-Za-z0-9._:-]{1,200}$/.test(fenceId)) throw refuse('X-KV-Fence-Id is required')
    const from = req.headers['x-kv-fence-from']
    const servers = req.chopperReplicas
    const unlisted = typeof from === 'string' && Array.isArray(servers) && !servers.includes(from)
    if (typeof from !== 'string' || from === serverId || (unlisted && !(LIFTS.includes(phase) && service.holdFrom(key, fenceId) === from))) {
      throw refuse(`X-KV-Fence-From must name another replica of the key's slice, got ${JSON.stringify(from)}`)
    }
    let version
    if (phase === 'release') {
      const v = req.headers['x-kv-version']
      if (typeof v !== 'string' || !/^\d{1,32}$/.test(v)) throw refuse('X-KV-Version (the written version) is required to release')
      version = BigInt(v)
      if (generationOfVersion(version) !== Number(gen)) throw refuse('X-KV-Version is not of the generation in X-Chopper-Generation')
      // Not from the future either (the generation is checked by the caller, which may wait for it).
      if (clockOf(version) > BigInt(Date.now() + MAX_VERSION_AHEAD_MS) * 1000n) throw refuse('X-KV-Version is ahead of this server\'s clock')
    }
    // How the writer of a hold wants reads of the key answered here while it holds it
    // (kv-reader.js, heldReads): X-KV-Held-Reads: ask, else wait.
    const asked = req.headers['x-kv-held-reads']
    if (asked !== undefined && (phase !== 'hold' || asked !== 'ask')) throw refuse('X-KV-Held-Reads is ask, on a hold only')
    const heldReads = asked === undefined ? 'wait' : 'ask'
    if (phase === READ_PHASE && req.headers['x-kv-version'] !== undefined) {
      const v = req.headers['x-kv-version']
      if (typeof v !== 'string' || !/^\d{1,32}$/.test(v)) throw refuse('X-KV-Version (the version the asking replica has cached) must be a decimal integer')
      version = BigInt(v)
    }
    return { phase, fenceId, version, heldReads, unlisted }
  }

  router.use(jsonErrorHandler(logger))
  return router
}

/**
 * The assignment generation the shard guard admitted the request under; 0
 * standalone (no guard), where versions are then ordered by the clock alone.
 */
function generationOf (req) {
  return req.chopperGeneration ?? 0
}

/** body-parser errors as ours, with messages that say what to fix. */
function bodyError (err, tooLarge) {
  if (err.type === 'entity.too.large') return tooLarge(err.length)
  if (err.status === 400) return new MalformedBodyError(`malformed body: ${err.message}`)
  return err // 415 (unsupported content encoding) keeps its status
}

module.exports = { createRoutes, MAX_KEY_BYTES }
