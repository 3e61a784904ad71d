#!/usr/bin/env node
'use strict'

// Production entry point; configuration from the environment (core/settings.js ENV.frontend).
const { createFrontend } = require('../frontend')
const { runEntryPoint } = require('../cli/entry')

runEntryPoint('frontend', async (settings, logger) => {
  const fe = createFrontend({ ...settings, defaultMetrics: true, logger })
  await fe.start()
  return () => fe.close()
})
