#!/usr/bin/env node
'use strict'

const pino = require('pino')
const { createFrontend } = require('../frontend')
const { readEnv } = require('../core/settings')
const { onShutdown } = require('../cli/args')

// Production entry point: configuration comes from the environment (core/settings.js ENV.frontend).
async function main () {
  let settings
  try {
    settings = readEnv('frontend')
  } catch (err) {
    process.stderr.write(`error: ${err.message}\n`)
    process.exit(2)
  }
  const logger = pino({ level: settings.logLevel })
  const fe = createFrontend({ ...settings, defaultMetrics: true, logger })
  await fe.start()
  onShutdown(() => fe.close(), logger)
}

main().catch((err) => {
  process.stderr.write(`error: ${err.code ? err.code + ': ' : ''}${err.message}\n`)
  process.exit(1)
})
