#!/usr/bin/env node
'use strict'

// Production entry point; configuration from the environment (core/settings.js ENV.frontend).
// CHOPPER_FRONTEND_WORKERS (default: one per core) front-end processes share the data port.
const os = require('node:os')
const { parseFlags } = require('../cli/args')
const { createFrontend, startFrontendCluster } = require('../frontend')
const { runEntryPoint } = require('../cli/entry')
const { checkPolicy } = require('../core/replica-choice')
const { InvalidArgumentError } = require('../core/errors')

// `--workers N` on the command line wins over CHOPPER_FRONTEND_WORKERS.
const { values, error } = parseFlags(process.argv.slice(2), { options: { workers: { type: 'string' } }, integers: ['workers'] })
if (error) {
  process.stderr.write(`error: ${error}\nusage: node bin/frontend.js [--workers N]   (everything else from the environment: README)\n`)
  process.exit(2)
}
if (values.workers !== undefined) process.env.CHOPPER_FRONTEND_WORKERS = String(values.workers)

// Replica choice (docs/replication.md). Read here until core/settings.js ENV.frontend lists them.
const REPLICA_ENV = {
  CHOPPER_REPLICA_CHOICE: { key: 'replicaChoice', parse: (v) => checkPolicy(v, 'CHOPPER_REPLICA_CHOICE') },
  CHOPPER_REPLICA_SIZE_PARAM: { key: 'replicaSizeParam', parse: (v) => v },
  CHOPPER_REPLICA_SIZE_POWER: { key: 'replicaSizePower', parse: positive },
  CHOPPER_LCSTAR_THRESHOLD: { key: 'lcstarThreshold', parse: positive }
}
function positive (v, name) {
  if (!/^\d+(\.\d+)?$/.test(v) || !(Number(v) > 0)) throw new InvalidArgumentError(`environment variable ${name} must be a number > 0, got ${JSON.stringify(v)}`)
  return Number(v)
}
let replicaSettings
try {
  replicaSettings = {}
  for (const [name, { key, parse }] of Object.entries(REPLICA_ENV)) {
    if (process.env[name]) replicaSettings[key] = parse(process.env[name], name)
  }
} catch (err) {
  process.stderr.write(`error: ${err.message}\n`)
  process.exit(2)
}

runEntryPoint('frontend', async ({ workers, logLevel, ...env }, logger) => {
  const settings = { ...env, ...replicaSettings }
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
