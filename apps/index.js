'use strict'

const { InvalidArgumentError } = require('../core/errors')

/** The apps appserver-lib can host here, loaded lazily (kv-cache pulls in the AWS SDK). */
const APPS = Object.freeze({
  compute: () => require('./compute'),
  'kv-cache': () => require('./kv-cache')
})

/** @param {string} name */
function loadApp (name) {
  const load = APPS[name]
  if (!load) throw new InvalidArgumentError(`invalid app: expected one of ${Object.keys(APPS).join(', ')}, got ${JSON.stringify(name)}`)
  return load()
}

module.exports = { APPS, loadApp }
