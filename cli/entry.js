'use strict'

const pino = require('pino')
const { readEnv } = require('../core/settings')
const { onShutdown } = require('./args')
const { routeWarnings } = require('./logger')

/**
 * The shape every production entry point shares: read the component's
 * environment, build a pino logger, start, and stop cleanly on SIGINT/SIGTERM.
 * A bad setting exits 2 with a message naming it; any other start failure exits 1.
 * @param {string} component key of core/settings.js ENV
 * @param {(settings, logger) => Promise<() => Promise<void>>} start resolves to a stop function
 */
function runEntryPoint (component, start) {
  let settings
  try {
    settings = readEnv(component)
  } catch (err) {
    process.stderr.write(`error: ${err.message}\n`)
    process.exit(2)
  }
  const logger = pino({ level: settings.logLevel })
  routeWarnings(logger)
  start(settings, logger).then((stop) => onShutdown(stop, logger), (err) => {
    process.stderr.write(`error: ${err.code ? err.code + ': ' : ''}${err.message}\n`)
    process.exit(err.code === 'CHOPPER_ERR_INVALID_ARG' ? 2 : 1)
  })
}

module.exports = { runEntryPoint }
