#!/usr/bin/env node
'use strict'

// Production entry point; configuration from the environment (core/settings.js ENV.controller).
const { createController } = require('../controller')
const { runEntryPoint } = require('../cli/entry')

runEntryPoint('controller', async (settings, logger) => {
  const controller = createController({ ...settings, advertiseHost: settings.host === '0.0.0.0' ? '127.0.0.1' : settings.host, logger })
  await controller.start()
  return () => controller.close()
})
