'use strict'

const { Registry } = require('prom-client')
const { createController } = require('../controller')
const { defaults: controllerDefaults } = require('../controller/controller')
const { DynamoStateStore } = require('../controller/state-store')
const { startDynalite } = require('../apps/kv-cache/embedded')
const { createFrontend, startFrontendCluster } = require('../frontend')
const { loadApp, prepareShared, startApp } = require('../apps')
const { InvalidArgumentError } = require('../core/errors')
const { checkPolicy } = require('../core/replica-choice')
const { silent } = require('../core/logger')
const { pollUntil } = require('../core/poll')
const { validateToken } = require('../core/cluster-auth')

/** Every option of startLocalCluster and its default (the `npm start` flags). */
const defaults = Object.freeze({
  app: 'compute',
  controllers: 1, // more than one: a leader and standbys (docs/controller-ha.md)
  frontends: 2,
  servers: 3,
  strategy: 'chopper',
  strategyOptions: {},
  loadMetric: 'cost', // what the controller balances: 'cost' (busy ms) or 'requests'
  quietBelow: controllerDefaults.quietBelow, // the controller's quiet rounds: no server busy for this fraction of the period -> no rebalancing (0: balance at any load)
  periodMs: 5000,
  port: 8080, // first front end; the rest follow. 0 = ephemeral ports everywhere
  // Processes per front end (node:cluster, frontend/cluster.js). 1 here: the
  // local cluster already runs several front ends and app servers on one machine.
  frontendWorkers: 1,
  logFormat: undefined, // for front-end workers (their own processes): 'pretty' | 'json' | undefined = pretty on a terminal
  host: '127.0.0.1',
  appOptions: {}, // passed to the app's create()
  frontendOptions: {},
  replicaChoice: undefined, // front ends' replica choice (core/replica-choice.js); undefined: theirs (p2c)
  readyTimeoutMs: 30000,
  // The shared cluster secret every component signs and checks control calls
  // with (docs/security.md); bin/cluster.js (npm start) always passes one.
  // undefined: the control plane is unauthenticated.
  clusterToken: undefined,
  logger: silent
})

/**
 * Boot a controller, app servers and front ends on localhost, and wait until
 * every front end routes with the controller's current assignment.
 * @returns {Promise<{ controller, frontends, servers, close }>}
 */
async function startLocalCluster (options = {}) {
  const opts = { ...defaults, ...withoutUndefined(options) }
  if (!Number.isInteger(opts.frontendWorkers) || opts.frontendWorkers < 1 || opts.frontendWorkers > 64) throw new InvalidArgumentError('invalid frontendWorkers: expected an integer from 1 to 64')
  if (!Number.isInteger(opts.controllers) || opts.controllers < 1 || opts.controllers > 9) throw new InvalidArgumentError('invalid controllers: expected an integer from 1 to 9')
  for (const k of ['frontends', 'servers']) {
    if (!Number.isInteger(opts[k]) || opts[k] < 1 || opts[k] > 64) throw new InvalidArgumentError(`invalid ${k}: expected an integer from 1 to 64`)
  }
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port + opts.frontends > 65536) throw new InvalidArgumentError('invalid port: expected 0 or a free port with room for the other front ends after it')
  if (opts.replicaChoice !== undefined) checkPolicy(opts.replicaChoice, 'replicaChoice')
  const clusterToken = validateToken(opts.clusterToken)
  const frontendOptions = opts.replicaChoice === undefined ? opts.frontendOptions : { ...opts.frontendOptions, replicaChoice: opts.replicaChoice }
  const appModule = loadApp(opts.app)
  const log = opts.logger
  const closers = []
  const closeAll = async () => {
    for (const fn of closers.splice(0).reverse()) {
      try { await fn() } catch (err) { log.warn({ err }, 'error while stopping the cluster') }
    }
  }

  try {
    // The controllers' state lives in an embedded dynalite, as kv-cache's data does.
    const stateDb = await startDynalite({ logger: log })
    closers.push(() => stateDb.close())
    const controllers = []
    for (let i = 1; i <= opts.controllers; i++) {
      const store = new DynamoStateStore({ table: 'chopper-controller', endpoint: stateDb.endpoint, logger: log })
      closers.push(() => store.close())
      const controller = createController({ host: opts.host, port: 0, strategy: opts.strategy, strategyOptions: opts.strategyOptions, loadMetric: opts.loadMetric, quietBelow: opts.quietBelow, periodMs: opts.periodMs, startupFenceMs: 0, store, controllerId: `controller-${i}`, clusterToken, logger: opts.controllers > 1 ? log.child({ controllerId: `controller-${i}` }) : log }) // a fresh cluster: no predecessor's leases to wait out
      await controller.start()
      closers.push(() => controller.close())
      controllers.push(controller)
      // The first one leads; the others stand by.
      if (i === 1) await pollUntil(() => controller.leading, { timeoutMs: opts.readyTimeoutMs, what: 'the first controller to lead' })
    }
    const controller = controllers[0]
    const controllerUrl = controllers.map((c) => c.url).join(',')

    // Embedded shared dependencies (one in-process DynamoDB for all kv-cache servers).
    const shared = await prepareShared(appModule, { ...opts.appOptions, logger: log })
    closers.push(() => shared.close())
    const appOptions = { ...opts.appOptions, ...shared.options }

    const servers = []
    for (let i = 1; i <= opts.servers; i++) {
      const id = `app-${i}`
      const started = await startApp(appModule, {
        id,
        appOptions,
        registry: new Registry(),
        logger: log.child({ serverId: id }),
        controllerUrl,
        host: opts.host,
        advertiseHost: opts.host,
        clusterToken
      })
      closers.push(() => started.close())
      servers.push(started)
    }

    const frontends = []
    for (let i = 0; i < opts.frontends; i++) {
      if (opts.frontendWorkers > 1) {
        const fc = await startFrontendCluster({
          ...frontendOptions,
          id: `fe-${i + 1}`,
          host: opts.host,
          advertiseHost: opts.host,
          port: opts.port === 0 ? 0 : opts.port + i,
          controllerUrl,
          clusterToken,
          workers: opts.frontendWorkers,
          logLevel: log.level,
          logFormat: opts.logFormat,
          logger: log
        })
        closers.push(() => fc.close())
        frontends.push({ id: fc.id, url: fc.url, controlUrl: fc.controlUrl, frontend: fc })
        continue
      }
      const fe = createFrontend({
        ...frontendOptions,
        id: `fe-${i + 1}`,
        host: opts.host,
        advertiseHost: opts.host,
        port: opts.port === 0 ? 0 : opts.port + i,
        controllerUrl,
        clusterToken,
        logger: log
      })
      const urls = await fe.start()
      closers.push(() => fe.close())
      frontends.push({ id: fe.id, ...urls, frontend: fe })
    }

    await pollUntil(() => {
      const a = controller.published
      return a && Object.keys(a.servers).length === opts.servers && !controller.status().handoff.inProgress &&
        frontends.every((f) => f.frontend.table.generation === a.generation) &&
        servers.every((s) => s.server.guard.generation === a.generation)
    }, { timeoutMs: opts.readyTimeoutMs, what: 'every component to hold the current assignment' })

    return {
      controller: { url: controller.url, controller },
      controllers: controllers.map((c) => ({ url: c.url, controller: c })),
      frontends,
      servers,
      close: closeAll
    }
  } catch (err) {
    await closeAll()
    throw err
  }
}

function withoutUndefined (o) {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined))
}

module.exports = { startLocalCluster, defaults }
