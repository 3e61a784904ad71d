'use strict'

const { InvalidArgumentError } = require('../core/errors')

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

module.exports = { APPS, loadApp, prepareShared }
