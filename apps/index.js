'use strict'

const { InvalidArgumentError } = require('../core/errors')

const nothingShared = async () => ({ options: {}, close: async () => {} })

/**
 * The apps appserver-lib hosts here. `load` is lazy (kv-cache pulls in the
 * AWS SDK). `prepareShared` starts what a group of app servers on one machine
 * share when nothing external is configured: for kv-cache, one in-process
 * DynamoDB (dynalite) standing in for the real table.
 */
const APPS = Object.freeze({
  compute: { load: () => require('./compute'), prepareShared: nothingShared },
  'kv-cache': {
    load: () => require('./kv-cache'),
    async prepareShared ({ dynamoEndpoint, logger }) {
      if (dynamoEndpoint) return nothingShared()
      const dynalite = await require('./kv-cache/embedded').startDynalite({ logger })
      logger.warn({ endpoint: dynalite.endpoint }, 'no DynamoDB endpoint configured: using in-process dynalite (data is not persisted)')
      return { options: { dynamoEndpoint: dynalite.endpoint }, close: () => dynalite.close() }
    }
  }
})

/** @param {string} name */
function getApp (name) {
  if (!Object.hasOwn(APPS, name)) throw new InvalidArgumentError(`invalid app: expected one of ${Object.keys(APPS).join(', ')}, got ${JSON.stringify(name)}`)
  return APPS[name]
}

module.exports = { APPS, getApp }
