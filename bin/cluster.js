#!/usr/bin/env node
'use strict'

const crypto = require('node:crypto')
const { createCliLogger, routeWarnings, FORMATS } = require('../cli/logger')
const { startLocalCluster, defaults } = require('../cluster/local-cluster')
const { strategies } = require('../controller/strategies')
const { parseFlags, onShutdown } = require('../cli/args')
const { readEnv, ENV } = require('../core/settings')
const { POLICIES } = require('../core/replica-choice')
const { LOAD_METRICS } = require('../core/load-metric')

const USAGE = `usage: npm start -- [flags]   (or: node bin/cluster.js [flags])

Runs a local Chopper cluster: a controller, app servers and front ends on 127.0.0.1.
Control calls are signed with CHOPPER_CLUSTER_TOKEN, or with a token generated for the run.

  --app compute|kv-cache           app hosted by the app servers (default ${defaults.app})
  --controllers N                  controllers: one leads, the others stand by (default ${defaults.controllers})
  --frontends N                    front ends (default ${defaults.frontends})
  --servers N                      app servers (default ${defaults.servers})
  --strategy NAME                  ${Object.keys(strategies).join(', ')} (default ${defaults.strategy})
  --period MS                      balancing period in ms (default ${defaults.periodMs})
  --load-metric cost|requests      what the controller balances: busy time or request counts (default ${defaults.loadMetric})
  --quiet-below F                  with cost: no rebalancing while every app server is busy for less than this fraction of the period (default ${defaults.quietBelow}; 0: balance at any load)
  --port P                         first front end's port; the rest follow (default ${defaults.port})
  --workers N                      processes per front end, sharing its port via node:cluster (default ${defaults.frontendWorkers})
  --replica-choice NAME            reads of replicated slices: ${POLICIES.join(', ')} (default p2c)
  --replica-size-param NAME        query parameter estimating a request's cost, for jsq and lcstar (compute: n)
  --replica-size-power N           the cost is that parameter to this power (default 1; compute: 2)
  --lcstar-threshold N             lcstar: requests of at least this cost are long, at most one per server
  --log-level LEVEL                pino level (default info; LOG_LEVEL also works)
  --log-format pretty|json         log lines for people or for machines (default: pretty on a terminal, else json; LOG_FORMAT also works)
  -h, --help                       this message
`

async function main () {
  const { values, error } = parseFlags(process.argv.slice(2), {
    options: {
      app: { type: 'string' },
      controllers: { type: 'string' },
      frontends: { type: 'string' },
      servers: { type: 'string' },
      strategy: { type: 'string' },
      period: { type: 'string' },
      'load-metric': { type: 'string' },
      'quiet-below': { type: 'string' },
      port: { type: 'string' },
      workers: { type: 'string' },
      'replica-choice': { type: 'string' },
      'replica-size-param': { type: 'string' },
      'replica-size-power': { type: 'string' },
      'lcstar-threshold': { type: 'string' },
      'log-level': { type: 'string' },
      'log-format': { type: 'string' },
      help: { type: 'boolean', short: 'h' }
    },
    integers: ['controllers', 'frontends', 'servers', 'period', 'port', 'workers', 'replica-size-power', 'lcstar-threshold'],
    choices: { app: ['compute', 'kv-cache'], strategy: Object.keys(strategies), 'load-metric': LOAD_METRICS, 'log-format': FORMATS, 'replica-choice': POLICIES }
  })
  if (error) {
    process.stderr.write(`error: ${error}\n\n${USAGE}`)
    process.exit(2)
  }
  if (values.help) {
    process.stdout.write(USAGE)
    return
  }
  let logger
  try {
    logger = createCliLogger({ level: values['log-level'] || process.env.LOG_LEVEL || 'info', format: values['log-format'] || process.env.LOG_FORMAT })
    routeWarnings(logger)
  } catch (err) {
    process.stderr.write(`error: ${err.message} (--log-level / LOG_LEVEL, --log-format / LOG_FORMAT)\n\n${USAGE}`)
    process.exit(2)
  }
  let cluster
  try {
    if (values.app === 'kv-cache') readEnv('kvCache') // a malformed variable fails before anything starts
    const clusterToken = clusterTokenFromEnv(logger)
    cluster = await startLocalCluster({
      app: values.app,
      controllers: values.controllers,
      frontends: values.frontends,
      servers: values.servers,
      strategy: values.strategy,
      periodMs: values.period,
      loadMetric: values['load-metric'],
      quietBelow: values['quiet-below'] === undefined ? undefined : Number(values['quiet-below']),
      port: values.port,
      frontendWorkers: values.workers,
      replicaChoice: values['replica-choice'],
      frontendOptions: withoutUndefined({
        replicaSizeParam: values['replica-size-param'],
        replicaSizePower: values['replica-size-power'],
        lcstarThreshold: values['lcstar-threshold']
      }),
      logFormat: values['log-format'] || process.env.LOG_FORMAT, // front-end workers log in the same format
      // kv-cache honours REDIS_URL, CHOPPER_DDB_ENDPOINT, ... (core/settings.js ENV.kvCache)
      appOptions: values.app === 'kv-cache' ? readEnv('kvCache') : {},
      clusterToken,
      logger
    })
  } catch (err) {
    if (err.code === 'EADDRINUSE') process.stderr.write(`error: port in use (${err.message}); pick another with --port\n`)
    else if (err.code === 'CHOPPER_ERR_INVALID_ARG') process.stderr.write(`error: ${err.message}\n\n${USAGE}`)
    else process.stderr.write(`error: ${err.code ? err.code + ': ' : ''}${err.message}\n`)
    process.exit(err.code === 'CHOPPER_ERR_INVALID_ARG' ? 2 : 1)
  }
  const lines = [
    ...cluster.frontends.map((f) => `frontend   ${f.url}`),
    ...cluster.controllers.map((c, i) => `controller ${c.url}${cluster.controllers.length > 1 ? (i === 0 ? ' (leader)' : ' (standby)') : ''}`),
    ...cluster.controllers.map((c) => `dashboard  ${c.url}/dashboard`),
    ...cluster.servers.map((s) => `appserver  ${s.id} ${s.url} (control ${s.controlUrl})`)
  ]
  // Handle Ctrl-C before saying so: whoever reads "ready" may press it at once.
  onShutdown(() => cluster.close(), logger)
  process.stdout.write(lines.join('\n') + '\nready; Ctrl-C to stop\n')
}

/**
 * CHOPPER_CLUSTER_TOKEN when set (checked as the production entry points
 * check it), else a random token for this run: every component gets it, so
 * the local control plane is authenticated too. Never logged.
 */
function clusterTokenFromEnv (logger) {
  const raw = process.env.CHOPPER_CLUSTER_TOKEN
  if (raw !== undefined && raw !== '') return ENV.controller.CHOPPER_CLUSTER_TOKEN.parse(raw, 'CHOPPER_CLUSTER_TOKEN')
  logger.info('CHOPPER_CLUSTER_TOKEN is not set: generated a cluster token for this run; control calls are signed with it')
  return crypto.randomBytes(32).toString('base64url')
}

function withoutUndefined (o) {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined))
}

main()
