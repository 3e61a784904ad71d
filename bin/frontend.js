#!/usr/bin/env node
'use strict'

// Production entry point; configuration from the environment (core/settings.js ENV.frontend).
// CHOPPER_FRONTEND_WORKERS (default: one per core) front-end processes share the data port.
const os = require('node:os')
const { createFrontend, startFrontendCluster } = require('../frontend')
const { runEntryPoint } = require('../cli/entry')

runEntryPoint('frontend', async ({ workers, logLevel, ...settings }, logger) => {
  const n = workers === 'cores' ? os.availableParallelism() : workers
  if (n <= 1) {
    const fe = createFrontend({ ...settings, defaultMetrics: true, logger })
    await fe.start()
    return () => fe.close()
  }
  // The primary owns the control port and relays pushes to the workers.
  const c = await startFrontendCluster({ ...settings, workers: n, defaultMetrics: true, logLevel, logger })
  return () => c.close()
})
