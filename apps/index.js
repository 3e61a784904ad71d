'use strict'

const { InvalidArgumentError } = require('../core/errors')
const { Registry } = require('prom-client')
const { createAppServer } = require('../appserver-lib/index.js')
const { silent } = require('../core/logger')

/** The apps appserver-lib hosts here, loaded lazily (kv-cache pulls in the AWS SDK). */
const APPS = Object.freeze({
  compute: () => require('./compute'),
  'kv-cache': () => require('./kv-cache')
})

/** @param {string} name */
function loadApp (name) {
  if (!Object.hasOwn(APPS, name)) throw new InvalidArgumentError(`invalid app: expected one of ${Object.keys(APPS).join(', ')}, got ${JSON.stringify(name)}`)
  return APPS[name]()
}

/**
 * Start what a group of app servers on one machine share when nothing
 * external is configured (an app module may export `prepareCluster`; for
 * kv-cache it is one in-process DynamoDB). Resolves `{ options, close }`.
 */
async function prepareShared (appModule, options) {
  if (typeof appModule.prepareCluster !== 'function') return { options: {}, close: async () => {} }
  return appModule.prepareCluster(options)
}

/**
 * Create an app instance and host it behind appserver-lib; start both.
 * @param {object} appModule from loadApp()
 * @param {{ id, appOptions?, registry, logger, ...serverOptions }} options
 *   serverOptions go to createAppServer (controllerUrl, host, port, ...); its
 *   clusterToken also goes to the app (kv-cache signs its replica fences with it)
 * @returns {Promise<{ id, url, controlUrl, server, instance, close }>}
 */
async function startApp (appModule, { id, appOptions = {}, registry = new Registry(), logger = silent, ...serverOptions }) {
  const token = serverOptions.clusterToken !== undefined ? { clusterToken: serverOptions.clusterToken } : {}
  const instance = await appModule.create({ ...appOptions, ...token, serverId: id, registry, logger })
  const server = createAppServer({
    // The app's own default consistency (kv-cache: strict) unless the caller chose one.
    ...(instance.consistency ? { consistency: instance.consistency } : {}),
    // ... and its own cost measure (compute: CPU time) unless the caller chose one.
    ...(instance.cost ? { cost: instance.cost } : {}),
    // ... and the requests it takes for a slice it is joining (kv-cache: its write holds).
    ...(instance.admitJoining ? { admitJoining: instance.admitJoining } : {}),
    ...serverOptions,
    id,
    app: instance.app,
    onAcquire: instance.onAcquire,
    onRelease: instance.onRelease,
    onAssignment: instance.onAssignment,
    registry,
    logger
  })
  const close = async () => {
    await server.close()
    if (instance.close) await instance.close()
  }
  try {
    const urls = await server.start()
    return { id, ...urls, server, instance, close }
  } catch (err) {
    await close()
    throw err
  }
}

module.exports = { APPS, loadApp, prepareShared, startApp }
