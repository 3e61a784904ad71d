'use strict'

const { Registry } = require('prom-client')
const { resolveOptions, defaults } = require('./options')
const { createMetrics } = require('./metrics')
const { DynamoStore } = require('./dynamo-store')
const { RedisCache } = require('./redis-cache')
const { MemoryCache } = require('./memory-cache')
const { KvService } = require('./kv-service')
const { createRoutes } = require('./routes')
const { spawnRedis, startDynalite } = require('./embedded')
const { FenceClient, FENCE_PATH } = require('./fence-client')
const { NewestMap } = require('./newest-map')
const { componentLogger, silent } = require('../../core/logger')

/**
 * The KV-cache app (paper 4.2 and 6.1): Redis as a per-server look-aside
 * cache in front of DynamoDB, the source of truth.
 *
 * Cache choice, in order: `redisUrl` when given; else a private redis-server
 * spawned on a free port when `spawnRedis` is true and the binary is on PATH
 * (closed with the app); else an in-process TTL cache (with a warning when
 * that is because the binary is missing).
 *
 * Replicated slices (docs/replication.md): any replica serves reads, the
 * primary serves writes and holds and fences the key on the other replicas
 * (kv-writer.js). It finds their data URLs in `req.chopperServers` when the
 * shard guard provides it, else in the last assignment the ownership hooks
 * were called with.
 *
 * @param {object} [options] see `defaults` in ./options.js
 * @returns {Promise<{ app, onAcquire, onRelease, onAssignment, close, cache: { backend, url }, service }>}
 *   the app contract appserver-lib hosts
 */
async function create (options = {}) {
  const o = resolveOptions(options)
  const log = componentLogger('kv-cache', o.logger).child({ serverId: o.serverId })
  const metrics = createMetrics(o.registry || new Registry())
  const closers = [] // run in reverse on close or on a failed start
  const closeAll = async () => {
    while (closers.length) {
      try {
        await closers.pop()()
      } catch (err) {
        log.warn({ err }, 'error while closing')
      }
    }
  }

  try {
    const store = new DynamoStore({ table: o.table, endpoint: o.dynamoEndpoint, region: o.region, timeoutMs: o.dynamoTimeoutMs, logger: log })
    closers.push(() => store.close())
    await store.ensureTable({ create: o.createTable })

    const cache = await openCache(o, log, metrics, closers)
    metrics.backend.set({ backend: cache.backend }, 1)
    const fencer = new FenceClient({ serverId: o.serverId, timeoutMs: o.fenceTimeoutMs, clusterToken: o.clusterToken, metrics, logger: log })
    closers.push(() => fencer.close())
    const newest = new NewestMap()
    closers.push(() => newest.close())
    const service = new KvService({
      store,
      cache,
      metrics,
      fencer,
      holdLapseMs: o.holdLapseMs,
      batchWrites: o.batchWrites,
      pipelineReleases: o.pipelineReleases,
      heldReads: o.heldReads,
      heldReadWaitMs: o.heldReadWaitMs,
      heldReadTimeoutMs: o.fenceTimeoutMs,
      serverId: o.serverId,
      replicaDropped: (id, slice, generation) => newest.dropped(id, slice, generation),
      logger: log
    })
    closers.push(() => service.settle())
    log.info({ table: o.table, dynamoEndpoint: o.dynamoEndpoint || 'aws', cache: cache.backend, redisUrl: redact(cache.url), signedFences: o.clusterToken !== undefined }, 'kv-cache ready')

    let closed = false
    return {
      app: createRoutes({ service, maxValueBytes: o.maxValueBytes, serverId: o.serverId, urlOf: (id, req) => newest.urlOf(id, req), awaitGeneration: (g, ms, signal) => newest.waitFor(g, ms, signal), clusterToken: o.clusterToken, metrics, logger: log }),
      // Admission under leases: a value is only ever served by servers the
      // last write held and fenced (docs/ownership.md, docs/replication.md).
      consistency: 'strict',
      // A write's hold for a replica joining the slice (a handoff that adds it)
      // is placed at once, not held until the grant: the hold then stands when
      // the grant lands, and the write is not stalled for the whole handoff
      // with its key held, and its reads waiting, on every other replica.
      // A replica's read asked of the writer (X-KV-Fence: read) is admitted
      // at once too, never held for a newer map while the replica's readers
      // wait: the route answers 421 itself unless this server admits the
      // slice for reads now.
      admitJoining: (req) => req.method === 'POST' && req.path === FENCE_PATH,
      onAcquire: (ranges, ctx) => {
        newest.learn(ctx)
        service.onAcquire(ranges)
      },
      onRelease: (ranges, ctx) => {
        newest.learn(ctx)
        service.onRelease(ranges)
      },
      // every map, also one that changes only another server's part of a slice we hold
      onAssignment: (ctx) => newest.learn(ctx),
      cache: { backend: cache.backend, url: cache.url },
      service, // the HTTP-free core, for tests and tooling
      async close () {
        if (closed) return
        closed = true
        await closeAll()
      }
    }
  } catch (err) {
    await closeAll()
    throw err
  }
}

/** A Redis URL fit for logs: any password replaced. */
function redact (url) {
  if (!url) return url
  try {
    const u = new URL(url)
    if (u.password) u.password = '***'
    return u.toString()
  } catch {
    return 'redis://(unparseable)'
  }
}

async function openCache (o, log, metrics, closers) {
  let url = o.redisUrl
  if (!url && o.spawnRedis) {
    const redis = await spawnRedis({ logger: log })
    if (redis) {
      closers.push(() => redis.close())
      url = redis.url
    } else {
      log.warn('redis-server is not installed (not on PATH) and no redisUrl is set: using an in-process TTL cache instead of Redis. Install redis-server or set REDIS_URL for the paper\'s topology.')
    }
  }
  if (!url) {
    if (!o.spawnRedis) log.info('no redisUrl and spawnRedis is false: using an in-process TTL cache')
    const cache = new MemoryCache({ ttlMs: o.cacheTtlMs })
    closers.push(() => cache.close())
    return cache
  }
  const cache = new RedisCache({
    url,
    ttlMs: o.cacheTtlMs,
    timeoutMs: o.redisTimeoutMs,
    serverId: o.serverId,
    logger: log,
    onHealth (healthy, err) {
      metrics.degraded.set(healthy ? 0 : 1)
      if (healthy) log.info({ redisUrl: redact(url) }, 'Redis reachable: cache in use')
      else log.warn({ redisUrl: redact(url), err }, 'Redis unreachable: serving from DynamoDB until it returns')
    }
  })
  closers.push(() => cache.close())
  metrics.degraded.set(1) // until the first 'ready'
  if (!await cache.waitReady(Math.max(o.redisTimeoutMs, 2000))) {
    log.warn({ redisUrl: redact(url) }, 'Redis not reachable at start: serving from DynamoDB until it is')
  }
  return cache
}

/**
 * Shared embedded dependencies for a local cluster (cluster/local-cluster.js
 * calls this once, before creating the app servers): with no dynamoEndpoint,
 * one in-process dynalite that every app server uses, since DynamoDB is the
 * shared source of truth. Redis is per server, so create() handles it.
 * @returns {Promise<{ options: object, close: () => Promise<void> }>} options to merge into every create()
 */
async function prepareCluster ({ dynamoEndpoint, logger = silent } = {}) {
  if (dynamoEndpoint) return { options: {}, close: async () => {} }
  const dynamo = await startDynalite({ logger })
  logger.warn({ endpoint: dynamo.endpoint }, 'no DynamoDB endpoint configured: using an in-process dynalite (data is lost when the cluster stops)')
  return { options: { dynamoEndpoint: dynamo.endpoint }, close: () => dynamo.close() }
}

module.exports = { create, prepareCluster, defaults }
