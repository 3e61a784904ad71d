'use strict'

const { createController } = require('../../controller')
const { createFrontend } = require('../../frontend')
const { loadApp, prepareShared } = require('../../apps')
const { startAppProcesses } = require('../lib/app-process')
const { startDynaliteProcess } = require('../lib/dynalite-process')
const { startHaproxy } = require('./haproxy-process')
const { startRouterProcess } = require('./router-process')
const { InvalidArgumentError } = require('../../core/errors')
const { silent } = require('../../core/logger')
const { pollUntil } = require('../../core/poll')

/**
 * The contenders, in run order. Each serves the same seeded workload with
 * fresh app servers (cold caches, empty queues), so none inherits another's
 * state. The Chopper contenders use the front end's default replica choice
 * ('p2c', power of two choices on in-flight requests), except `chopper-lc`:
 * the same as `chopper` with least connected (`replicaChoice: 'lc'`), which
 * `frontendOptions` sets over --frontend-options. `chopper-client` runs no
 * front end: the load generator routes through @chopper/client, straight to
 * the app servers (its routing CPU is the load generator's, not a router's).
 */
const CONTENDERS = Object.freeze({
  chopper: { label: 'Chopper', router: 'chopper front end', strategy: 'chopper', replication: 'on (strategy default: a standby for every slice, more for hot ones)' },
  'chopper-client': { label: 'Chopper client', router: '@chopper/client in the load generator (no front end)', strategy: 'chopper', client: true, replication: 'on (as chopper); reads chosen in the caller, p2c on its own in-flight counts and the servers\' reports' },
  'chopper-lc': { label: 'Chopper, least connected', router: 'chopper front end', strategy: 'chopper', frontendOptions: Object.freeze({ replicaChoice: 'lc' }), replication: 'on (as chopper); reads to the replica with the fewest in flight' },
  'chopper-single': { label: 'Chopper, no replication', router: 'chopper front end', strategy: 'chopper', strategyOptions: Object.freeze({ replicate: false }), replication: 'off' },
  'chopper-hot-only': { label: 'Chopper, replicas for hot slices only', router: 'chopper front end', strategy: 'chopper', strategyOptions: Object.freeze({ minReplicas: 1 }), replication: 'minReplicas 1 (Slicer: only what is hot)' },
  'consistent-hash': { label: 'Consistent hashing', router: 'chopper front end', strategy: 'consistent-hash' },
  'haproxy-ch': { label: 'HAProxy consistent hash', router: 'HAProxy', balance: 'balance url_param key + hash-type consistent' },
  'haproxy-bounded': { label: 'HAProxy bounded loads', router: 'HAProxy', balance: 'hash-type consistent + hash-balance-factor 125' },
  'haproxy-random2': { label: 'HAProxy random(2)', router: 'HAProxy', balance: 'balance random(2) (no affinity)' }
})
const CONTENDER_NAMES = Object.freeze(Object.keys(CONTENDERS))

/**
 * The app options every app server process of a run gets: the scenario's,
 * the in-process TTL cache for kv-cache unless the scenario chose otherwise.
 */
function appOptionsOf (experiment) {
  const appOptions = { ...experiment.appOptions }
  if (experiment.app === 'kv-cache' && appOptions.spawnRedis === undefined) appOptions.spawnRedis = false
  return appOptions
}

/**
 * Start one contender's system under test on 127.0.0.1: the shared parts
 * (controller and front ends, or HAProxy; kv-cache's in-process DynamoDB) in
 * this process, and each app server in a process of its own
 * (bench/lib/app-process.js), wrapped in the capacity model.
 * @param {string} name a key of CONTENDERS
 * @param {object} experiment a normalised scenario experiment block
 * @param {{ logger?, clusterToken?: string }} [options] clusterToken: the Chopper side's control calls are signed with it (docs/security.md)
 * @returns {Promise<{ name, target: string[], serverIds: string[], servers: object[], controller: object|null, haproxy: object|null, close: () => Promise<void> }>}
 *   `servers`: the app server processes ({ id, pid, url, stats, flush, close }); `dynamoPid`: kv-cache's
 *   DynamoDB (dynalite) process, undefined for other apps
 */
async function startContender (name, experiment, { logger = silent, clusterToken } = {}) {
  if (!Object.hasOwn(CONTENDERS, name)) throw new InvalidArgumentError(`invalid contender: expected one of ${CONTENDER_NAMES.join(', ')}, got ${JSON.stringify(name)}`)
  const c = CONTENDERS[name]
  const closers = []
  const closeAll = async () => {
    for (const fn of closers.splice(0).reverse()) {
      try { await fn() } catch (err) { logger.warn({ err }, 'error while stopping a contender') }
    }
  }
  try {
    const appModule = loadApp(experiment.app)
    let appOptions = appOptionsOf(experiment)
    // kv-cache's DynamoDB (dynalite) in a process of its own, not beside the front ends
    let dynamoPid
    if (experiment.app === 'kv-cache' && !appOptions.dynamoEndpoint) {
      const dynamo = await startDynaliteProcess({ latencyMs: experiment.storeLatencyMs })
      closers.push(() => dynamo.close())
      appOptions.dynamoEndpoint = dynamo.endpoint
      dynamoPid = dynamo.pid
    }
    const shared = await prepareShared(appModule, { ...appOptions, logger })
    closers.push(() => shared.close())
    appOptions = { ...appOptions, ...shared.options }
    const ids = Array.from({ length: experiment.servers }, (_, i) => `app-${i + 1}`)
    const run = c.strategy
      ? await startChopperSide(c, experiment, ids, appOptions, closers, logger, clusterToken)
      : await startHaproxySide(name, experiment, ids, appOptions, closers)
    return { name, serverIds: ids, ...run, dynamoPid, close: closeAll }
  } catch (err) {
    await closeAll()
    throw err
  }
}

/**
 * Controller and front ends, each in a process of its own (`routers:
 * 'separate'`, as deployed: the controller's rounds do not stall the front
 * ends' event loop) or all in this one (`'shared'`); the app servers register
 * with the controller. Returns `controller.status()` (a promise either way).
 */
async function startChopperSide (c, experiment, ids, appOptions, closers, logger, clusterToken) {
  const separate = experiment.routers === 'separate'
  const logLevel = process.env.CHOPPER_EXPERIMENT_LOG || undefined
  const controllerOptions = {
    host: '127.0.0.1',
    port: 0,
    strategy: c.strategy,
    strategyOptions: c.strategy === 'chopper' ? { ...experiment.strategyOptions, ...c.strategyOptions } : {},
    periodMs: experiment.periodMs,
    loadMetric: experiment.loadMetric,
    startupFenceMs: 0, // a fresh cluster: no predecessor's leases to wait out
    clusterToken
  }
  let controller
  if (separate) {
    controller = await startRouterProcess('controller', controllerOptions, { logLevel })
    closers.push(() => controller.close())
  } else {
    const local = createController({ ...controllerOptions, logger })
    const { url } = await local.start()
    closers.push(() => local.close())
    controller = { url, status: async () => local.status() }
  }
  const controllerUrl = controller.url
  const servers = await startServers(experiment, ids, { appOptions, controllerUrl, clusterToken }, closers)
  const frontends = []
  // chopper-client: no front end; the load generator routes through @chopper/client (bench/experiments/harness.js).
  for (let i = 0; i < (c.client ? 0 : experiment.frontends); i++) {
    const options = {
      id: `fe-${i + 1}`,
      host: '127.0.0.1',
      advertiseHost: '127.0.0.1',
      port: 0,
      controllerUrl,
      connections: experiment.connections,
      upstreamTimeoutMs: experiment.timeoutMs + 5000,
      clusterToken,
      ...experiment.frontendOptions, // --frontend-options (run.js), e.g. {"dataServer":"node","upstreamClient":"undici"}
      ...c.frontendOptions // the contender's own (chopper-lc)
    }
    if (separate) {
      const fe = await startRouterProcess('frontend', options, { logLevel })
      closers.push(() => fe.close())
      frontends.push({ url: fe.url, pid: fe.pid, generation: async () => (await fe.status()).generation })
    } else {
      const fe = createFrontend({ ...options, logger })
      const urls = await fe.start()
      closers.push(() => fe.close())
      frontends.push({ url: urls.url, generation: async () => fe.table.generation })
    }
  }
  // Settled: every server registered and holding the current map, no handoff, every front end routing with it.
  await pollUntil(async () => {
    const s = await controller.status()
    if (!s.generation || s.handoff.inProgress || !ids.every((id) => s.servers[id] && s.servers[id].generation === s.generation)) return false
    for (const f of frontends) if ((await f.generation()) !== s.generation) return false
    return true
  }, { timeoutMs: 30000, intervalMs: 20, what: 'every component to hold the current assignment' })
  const routerPids = separate ? [controller.pid, ...frontends.map((f) => f.pid)] : []
  // The client's targets are the app servers (probed; the client picks among them by key).
  const target = c.client ? servers.map((s) => s.url) : frontends.map((f) => f.url)
  return { target, servers, controller: { url: controllerUrl, status: controller.status }, routerPids, haproxy: null, client: c.client ? { controllerUrl } : null }
}

/** App servers without a controller (no ownership checks) behind a generated HAProxy. */
async function startHaproxySide (name, experiment, ids, appOptions, closers) {
  const servers = await startServers(experiment, ids, { appOptions, enforceOwnership: false }, closers)
  const haproxy = await startHaproxy({ balance: name, servers: servers.map((s) => ({ id: s.id, url: s.url })) })
  closers.push(() => haproxy.stop())
  return { target: [haproxy.url], servers, controller: null, haproxy }
}

async function startServers (experiment, ids, config, closers) {
  // CHOPPER_EXPERIMENT_LOG sets the app servers' log level too (default: error only)
  const logLevel = process.env.CHOPPER_EXPERIMENT_LOG || undefined
  const servers = await startAppProcesses(experiment.app, ids, { ...config, capacity: experiment.capacity, ...(logLevel ? { logLevel } : {}) })
  closers.push(() => Promise.all(servers.map((s) => s.close())))
  return servers
}

module.exports = { CONTENDERS, CONTENDER_NAMES, startContender }
