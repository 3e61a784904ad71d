'use strict'

const { parseArgs } = require('node:util')

/**
 * Parse flags with node:util parseArgs; integer flags are checked here so a
 * bad value gets the usage message, not a stack trace.
 * @returns {{ values?: object, error?: string }}
 */
function parseFlags (argv, { options, integers = [], choices = {} }) {
  let values
  try {
    ({ values } = parseArgs({ args: argv, options, strict: true, allowPositionals: false }))
  } catch (err) {
    return { error: err.message }
  }
  for (const name of integers) {
    if (values[name] === undefined) continue
    if (!/^\d+$/.test(values[name])) return { error: `--${name} must be a non-negative integer, got ${JSON.stringify(values[name])}` }
    values[name] = Number(values[name])
  }
  for (const [name, allowed] of Object.entries(choices)) {
    if (values[name] !== undefined && !allowed.includes(values[name])) return { error: `--${name} must be one of ${allowed.join(', ')}, got ${JSON.stringify(values[name])}` }
  }
  return { values }
}

/** Stop on SIGINT/SIGTERM: run `stop` once, then exit (entry points only). */
function onShutdown (stop, logger) {
  let stopping = false
  const handler = async (signal) => {
    if (stopping) return
    stopping = true
    logger.info({ signal }, 'shutting down')
    try {
      await stop()
      process.exit(0)
    } catch (err) {
      logger.error({ err }, 'shutdown failed')
      process.exit(1)
    }
  }
  process.on('SIGINT', handler)
  process.on('SIGTERM', handler)
}

module.exports = { parseFlags, onShutdown }
