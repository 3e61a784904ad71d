#!/usr/bin/env node
'use strict'

// Production entry point; configuration from the environment (core/settings.js ENV.frontend).
// CHOPPER_FRONTEND_WORKERS (default: one per core) front-end processes share the data port.
const os = require('node:os')
const { parseFlags } = require('../cli/args')
const { createFrontend, startFrontendCluster } = require('../frontend')
const { runEntryPoint } = require('../cli/entry')

// `--workers N` on the command line wins over CHOPPER_FRONTEND_WORKERS.
const { values, error } = parseFlags(process.argv.slice(2), { options: { workers: { type: 'string' } }, integers: ['workers'] })
if (error) {
  process.stderr.write(`error: ${error}\nusage: node bin/frontend.js [--workers N]   (everything else from the environment: README)\n`)
  process.exit(2)
}
if (values.workers !== undefined) process.env.CHOPPER_FRONTEND_WORKERS = String(values.workers)

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
