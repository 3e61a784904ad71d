'use strict'

const { Registry } = require('prom-client')
const { startLocalCluster } = require('../../cluster/local-cluster')
const { createAppServer } = require('../../appserver-lib/index.js')
const { loadApp, prepareShared } = require('../../apps')
const { startHaproxy } = require('./haproxy-process')
const { InvalidArgumentError } = require('../../core/errors')
const { silent } = require('../../core/logger')

/**
 * The contenders, in run order. Each serves the same seeded workload with
 * fresh app servers (cold caches, empty queues), so none inherits another's state.
 */
const CONTENDERS = Object.freeze({
  chopper: { label: 'Chopper', router: 'chopper front end', strategy: 'chopper' },
  'consistent-hash': { label: 'Consistent hashing', router: 'chopper front end', strategy: 'consistent-hash' },
  'haproxy-ch': { label: 'HAProxy consistent hash', router: 'HAProxy', balance: 'balance url_param key + hash-type consistent' },
  'haproxy-bounded': { label: 'HAProxy bounded loads', router: 'HAProxy', balance: 'hash-type consistent + hash-balance-factor 125' },
  'haproxy-random2': { label: 'HAProxy random(2)', router: 'HAProxy', balance: 'balance random(2) (no affinity)' }
})
const CONTENDER_NAMES = Object.freeze(Object.keys(CONTENDERS))

/**
 * Start one contender's system under test on 127.0.0.1.
 * @param {string} name a key of CONTENDERS
 * @param {object} experiment a normalised scenario experiment block
 * @param {{ logger? }} [options]
 * @returns {Promise<{ name, target: string, serverIds: string[], servers: { id, registry, instance }[], controller: object|null, haproxy: object|null, close: () => Promise<void> }>}
 */
async function startContender (name, experiment, { logger = silent } = {}) {
  if (!Object.hasOwn(CONTENDERS, name)) throw new InvalidArgumentError(`invalid contender: expected one of ${CONTENDER_NAMES.join(', ')}, got ${JSON.stringify(name)}`)
  const appOptions = { ...experiment.appOptions, capacity: experiment.capacity }
  if (experiment.app === 'kv-cache' && appOptions.spawnRedis === undefined) appOptions.spawnRedis = false
  const c = CONTENDERS[name]
  if (c.strategy) {
    const cluster = await startLocalCluster({
      app: experiment.app,
      frontends: experiment.frontends,
      servers: experiment.servers,
      strategy: c.strategy,
      strategyOptions: c.strategy === 'chopper' ? experiment.strategyOptions : {},
      periodMs: experiment.periodMs,
      port: 0,
      appOptions,
      frontendOptions: { connections: experiment.connections, upstreamTimeoutMs: experiment.timeoutMs + 5000 },
      logger
    })
    return {
      name,
      target: cluster.frontends.map((f) => f.url),
      serverIds: cluster.servers.map((s) => s.id),
      servers: cluster.servers.map((s) => ({ id: s.id, registry: s.server.registry, instance: s.instance })),
      controller: cluster.controller.controller,
      haproxy: null,
      close: () => cluster.close()
    }
  }
  return startHaproxyContender(name, experiment, appOptions, logger)
}

/** App servers without a controller (no ownership checks) behind a generated HAProxy. */
async function startHaproxyContender (name, experiment, appOptions, logger) {
  const appModule = loadApp(experiment.app)
  const closers = []
  const closeAll = async () => {
    for (const fn of closers.splice(0).reverse()) {
      try { await fn() } catch (err) { logger.warn({ err }, 'error while stopping a contender') }
    }
  }
  try {
    const shared = await prepareShared(appModule, { ...appOptions, logger })
    closers.push(() => shared.close())
    const servers = []
    for (let i = 1; i <= experiment.servers; i++) {
      const id = `app-${i}`
      const registry = new Registry()
      const instance = await appModule.create({ ...appOptions, ...shared.options, serverId: id, registry, logger: logger.child({ serverId: id }) })
      if (instance.close) closers.push(() => instance.close())
      const server = createAppServer({ id, app: instance.app, onAcquire: instance.onAcquire, onRelease: instance.onRelease, registry, enforceOwnership: false, logger })
      const urls = await server.start()
      closers.push(() => server.close())
      servers.push({ id, url: urls.url, registry, instance })
    }
    const haproxy = await startHaproxy({ balance: name, servers: servers.map((s) => ({ id: s.id, url: s.url })) })
    closers.push(() => haproxy.stop())
    return {
      name,
      target: [haproxy.url],
      serverIds: servers.map((s) => s.id),
      servers: servers.map(({ id, registry, instance }) => ({ id, registry, instance })),
      controller: null,
      haproxy,
      close: closeAll
    }
  } catch (err) {
    await closeAll()
    throw err
  }
}

module.exports = { CONTENDERS, CONTENDER_NAMES, startContender }
