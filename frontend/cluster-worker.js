'use strict'

// One front-end worker of startFrontendCluster (frontend/cluster.js): a whole
// front end whose data port is shared with its siblings through node:cluster.
const { AggregatorRegistry } = require('prom-client')
const { createCliLogger } = require('../cli/logger')
const { createFrontend } = require('./frontend')
const { OPTIONS_ENV } = require('./cluster')
const { TimeoutError, InternalError } = require('../core/errors')

const { logLevel = 'info', logFormat, ...options } = JSON.parse(process.env[OPTIONS_ENV] || '{}')
// Workers share the primary's terminal: the same format as the primary's logs.
const logger = createCliLogger({ level: logLevel, format: logFormat })
let seq = 0
const pending = new Map()

let fe = null
process.on('message', (msg) => {
  if (msg && msg.type === 'chopper:assignment' && fe) {
    try {
      fe.table.set(msg.assignment)
    } catch (err) {
      // A relayed map older than one this worker pulled itself: keep the newer.
      if (err.code !== 'CHOPPER_ERR_STALE_GENERATION') logger.warn({ err }, 'relayed assignment rejected')
    }
  }
  if (msg && msg.type === 'chopper:metrics:reply') {
    const p = pending.get(msg.seq)
    if (!p) return
    pending.delete(msg.seq)
    if (msg.error) p.reject(new InternalError(`the primary could not gather the metrics: ${msg.error}`))
    else p.resolve(msg.text)
  }
})

/** /metrics of the whole front end: the primary aggregates every worker's registry. */
function clusterMetricsText () {
  return new Promise((resolve, reject) => {
    const id = ++seq
    const timer = setTimeout(() => { pending.delete(id); reject(new TimeoutError('no metrics from the primary within 5 s')) }, 5000)
    pending.set(id, { resolve: (t) => { clearTimeout(timer); resolve(t) }, reject: (e) => { clearTimeout(timer); reject(e) } })
    process.send({ type: 'chopper:metrics', seq: id })
  })
}

async function main () {
  fe = createFrontend({ ...options, logger, metricsText: clusterMetricsText })
  // The primary's AggregatorRegistry asks every worker for this registry
  // (constructing one here installs prom-client's worker-side listener).
  AggregatorRegistry.setRegistries([fe.metrics.registry])
  new AggregatorRegistry() // eslint-disable-line no-new
  const urls = await fe.start()
  process.send({ type: 'chopper:ready', urls })
  const stop = async () => {
    try {
      await fe.close()
    } finally {
      process.exit(0)
    }
  }
  process.on('message', (msg) => { if (msg && msg.type === 'chopper:shutdown') stop() })
  // The primary handles signals; a worker only leaves when told (or when the primary dies).
  process.on('SIGINT', () => {})
  process.on('SIGTERM', () => {})
  process.on('disconnect', stop)
}

main().catch((err) => {
  logger.error({ err }, 'front-end worker failed to start')
  process.send({ type: 'chopper:failed', message: err.message })
  process.exit(1)
})
