#!/usr/bin/env node
'use strict'

const pino = require('pino')
const { createController } = require('../controller')
const { readEnv } = require('../core/settings')
const { onShutdown } = require('../cli/args')

// Production entry point: configuration comes from the environment (core/settings.js ENV.controller).
async function main () {
  let settings
  try {
    settings = readEnv('controller')
  } catch (err) {
    process.stderr.write(`error: ${err.message}\n`)
    process.exit(2)
  }
  const logger = pino({ level: settings.logLevel })
  const controller = createController({ ...settings, advertiseHost: settings.host === '0.0.0.0' ? '127.0.0.1' : settings.host, logger })
  await controller.start()
  onShutdown(() => controller.close(), logger)
}

main().catch((err) => {
  process.stderr.write(`error: ${err.code ? err.code + ': ' : ''}${err.message}\n`)
  process.exit(1)
})
