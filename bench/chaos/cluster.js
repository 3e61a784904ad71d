'use strict'

const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const pino = require('pino')
const { createController } = require('../../controller')
const { DynamoStateStore } = require('../../controller/state-store')
const { createFrontend } = require('../../frontend')
const { spawnRedis, startDynalite } = require('../../apps/kv-cache/embedded')
const { sliceKey } = require('../../core/keyspace')
const { SliceMap } = require('../../core/slice-map')
const { pollUntil } = require('../../core/poll')
const { InvalidArgumentError, InternalError } = require('../../core/errors')
const { startAppServerProcess } = require('./appserver-process')
const { validateToken } = require('../../core/cluster-auth')

/** Every option of startChaosCluster and its default. */
const defaults = Object.freeze({
  servers: 3,
  frontends: 2,
  controllers: 2, // a leader and a standby sharing a state table in the dynalite (docs/controller-ha.md)
  periodMs: 1000, // balancing period; everything else is the controller's default
  // Negative controls only (to check the bench can see a violation): undefined = the system's defaults.
  handoff: undefined, // controller: 'fenced' | 'none'
  consistency: undefined, // app servers: 'strict' | 'available'
  heldReads: undefined, // app servers: kv-cache's heldReads; undefined keeps its default
  logDir: undefined, // required: controller, front end and app server logs go here
  logLevel: 'info', // controller and front ends (bench.log)
  appLogLevel: 'warn', // app servers (app-N.log)
  // The cluster token every component signs control calls with, as npm start
  // runs (docs/security.md). undefined: a random one for the run.
  clusterToken: undefined,
  readyTimeoutMs: 30000
})

/**
 * The system under test: two controllers (a leader and a standby, sharing a state table in the dynalite) and the front ends in this process,
 * one in-process dynalite shared by all, and `servers` kv-cache app servers,
 * each in its own child process with its own redis-server, which this module
 * spawns and can restart on the same port.
 *
 * @param {object} options see `defaults`
 * @returns {Promise<ChaosCluster>}
 */
async function startChaosCluster (options = {}) {
  const opts = { ...defaults, ...options }
  if (typeof opts.logDir !== 'string') throw new InvalidArgumentError('invalid logDir: expected a directory path')
  for (const k of ['servers', 'frontends']) {
    if (!Number.isInteger(opts[k]) || opts[k] < 1 || opts[k] > 16) throw new InvalidArgumentError(`invalid ${k}: expected an integer from 1 to 16`)
  }
  const clusterToken = opts.clusterToken === undefined ? crypto.randomBytes(32).toString('base64url') : validateToken(opts.clusterToken)
  fs.mkdirSync(opts.logDir, { recursive: true })
  const benchLog = path.join(opts.logDir, 'bench.log')
  const logger = pino({ level: opts.logLevel }, pino.destination({ dest: benchLog, sync: true }))
  const closers = []
  const closeAll = async () => {
    for (const fn of closers.splice(0).reverse()) {
      try { await fn() } catch (err) { logger.warn({ err }, 'error while stopping the chaos cluster') }
    }
  }

  const ids = Array.from({ length: opts.servers }, (_, i) => `app-${i + 1}`)
  const members = new Map() // id -> { proc, redis, incarnation }
  const controllers = [] // { controller, store, port }; the leader is whichever leads
  let leader = null // the last controller seen leading
  let dynamo
  let frontends = []
  const current = () => {
    const now = controllers.find((c) => c.controller.leading)
    if (now) leader = now.controller
    return leader
  }

  try {
    dynamo = await startDynalite({ logger })
    closers.push(() => dynamo.close())
    for (let i = 0; i < opts.controllers; i++) {
      await startController(i)
      if (i === 0) await pollUntil(() => controllers[0].controller.leading, { timeoutMs: opts.readyTimeoutMs, what: 'the first controller to lead' })
    }
    closers.push(async () => {
      for (const c of controllers) {
        await c.controller.close()
        c.store.close()
      }
    })
    const controllerUrl = controllers.map((c) => c.controller.url).join(',')

    for (const id of ids) {
      const redis = await spawnRedis({ logger })
      if (!redis) throw new InternalError('redis-server is not on PATH: the chaos bench restarts Redis and needs the real one')
      members.set(id, { proc: null, redis, incarnation: 0 })
    }
    closers.push(async () => {
      for (const m of members.values()) if (m.redis) await m.redis.close()
    })
    closers.push(async () => {
      await Promise.all([...members.values()].map((m) => m.proc && m.proc.close()))
    })
    for (const id of ids) await startServer(id)

    frontends = []
    for (let i = 0; i < opts.frontends; i++) {
      const fe = createFrontend({ id: `fe-${i + 1}`, controllerUrl, clusterToken, logger })
      const urls = await fe.start()
      closers.push(() => fe.close())
      frontends.push({ id: fe.id, ...urls, frontend: fe })
    }
    await waitSettled({ timeoutMs: opts.readyTimeoutMs })
  } catch (err) {
    await closeAll()
    throw err
  }

  /** Start controller `i` (again, on its old port after a kill), a standby unless nobody leads. */
  async function startController (i) {
    const store = new DynamoStateStore({ table: 'chopper-controller', endpoint: dynamo.endpoint, logger })
    const port = controllers[i] ? controllers[i].port : 0
    const controller = createController({ periodMs: opts.periodMs, startupFenceMs: 0, clusterToken, store, controllerId: `controller-${i + 1}`, port, logger: logger.child({ controllerId: `controller-${i + 1}` }), ...(opts.handoff ? { handoff: opts.handoff } : {}) })
    await controller.start()
    controllers[i] = { controller, store, port: Number(new URL(controller.url).port) }
    return controller
  }

  /** Kill the leading controller as SIGKILL would (no lease released); resolves its index and last published map. */
  async function killLeader () {
    const i = controllers.findIndex((c) => c.controller === current())
    const { controller, store } = controllers[i]
    const published = controller.published
    await controller.crash()
    store.close()
    logger.warn({ controllerId: `controller-${i + 1}`, epoch: published && published.epoch }, 'chaos: leader controller killed')
    return { index: i, published }
  }

  /** Fork a (new) app server process for `id` on its Redis; resolves once it has registered. */
  async function startServer (id) {
    const m = members.get(id)
    if (!m) throw new InvalidArgumentError(`unknown app server id ${JSON.stringify(id)}`)
    if (m.proc && !m.proc.exitInfo()) throw new InternalError(`app server ${id} is still running (pid ${m.proc.pid})`)
    m.incarnation++
    m.proc = await startAppServerProcess({
      id,
      controllerUrl: controllers.map((c) => c.controller.url).join(','),
      dynamoEndpoint: dynamo.endpoint,
      redisUrl: m.redis.url,
      logFile: path.join(opts.logDir, `${id}.log`),
      logLevel: opts.appLogLevel,
      consistency: opts.consistency,
      heldReads: opts.heldReads,
      clusterToken
    })
    logger.info({ server: id, pid: m.proc.pid, incarnation: m.incarnation, url: m.proc.url }, 'chaos: app server process started')
    return m.proc
  }

  /** Stop `id`'s redis-server and start a new, empty one on the same port (the app server reconnects). */
  async function restartRedis (id) {
    const m = members.get(id)
    const { port } = m.redis
    await m.redis.close()
    m.redis = null
    m.redis = await spawnRedis({ logger, port })
    logger.info({ server: id, port }, 'chaos: redis-server restarted')
    return m.redis
  }

  /** Resolves once the controller lists `id` at `url` with a live lease and the current map. */
  function waitRegistered (id, { url, timeoutMs = 30000 } = {}) {
    return pollUntil(() => {
      const s = current().status()
      const e = s.servers[id]
      return Boolean(e && (!url || e.url === url) && e.leaseRemainingMs > 0 && e.generation === s.generation)
    }, { timeoutMs, intervalMs: 20, what: `app server ${id} to be registered` })
  }

  /** Resolves once every server is registered, no handoff runs, and every member holds the current map. */
  function waitSettled ({ timeoutMs = 30000 } = {}) {
    return pollUntil(() => {
      const c = current()
      const a = c.published
      const s = c.status()
      return Boolean(a && ids.every((id) => s.servers[id] && s.servers[id].generation === a.generation) &&
        !s.handoff.inProgress && frontends.every((f) => f.frontend.table.generation === a.generation))
    }, { timeoutMs, intervalMs: 20, what: 'every component to hold the current assignment' })
  }

  /** The primary owner of each key under the controller's current map. */
  function ownersOf (keys) {
    const a = current().published
    const out = new Map()
    if (!a) return out
    const map = new SliceMap(a)
    for (const key of keys) out.set(key, map.ownerOf(sliceKey(key)))
    return out
  }

  return {
    ids,
    /** The leading controller (the last one seen leading, during a failover). */
    get controller () { return current() },
    controllers: () => controllers.map((c) => c.controller),
    killLeader,
    restartController: startController,
    clusterToken, // for the bench's own control calls (slice moves)
    logger,
    logDir: opts.logDir,
    get controllerUrl () { return current().url },
    frontends,
    frontendUrls: frontends.map((f) => f.url),
    member: (id) => members.get(id),
    startServer,
    restartRedis,
    waitRegistered,
    waitSettled,
    ownersOf,
    close: closeAll
  }
}

module.exports = { startChaosCluster, defaults }
