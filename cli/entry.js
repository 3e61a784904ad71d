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
  // The handler is installed before start logs "listening", so a SIGTERM sent
  // as soon as the component says so (an orchestrator, a test) stops it
  // cleanly instead of killing a process that has no handler yet. start
  // resolves in the same turn as it logs, before any signal is handled; a
  // signal while it still runs (say, waiting for DynamoDB) exits at once.
  let stop = null
  const started = start(settings, logger)
  started.then((s) => { stop = s }, () => {})
  onShutdown(async () => {
    if (stop === null) throw new Error('interrupted before the start finished')
    await stop()
  }, logger)
  started.catch((err) => {
    process.stderr.write(`error: ${err.code ? err.code + ': ' : ''}${err.message}\n`)
    process.exit(err.code === 'CHOPPER_ERR_INVALID_ARG' ? 2 : 1)
  })
}

module.exports = { runEntryPoint }
