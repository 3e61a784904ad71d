'use strict'

const path = require('node:path')
const os = require('node:os')
const cluster = require('node:cluster')
const { AggregatorRegistry } = require('prom-client')
const { RoutingTable } = require('../core/routing-table')
const { createControlPlane } = require('./control-plane')
const { defaults, createReplicaRouter } = require('./frontend')
const { InvalidArgumentError, InternalError, TimeoutError } = require('../core/errors')
const { silent } = require('../core/logger')
const { freePort } = require('../core/http')

const WORKER = path.join(__dirname, 'cluster-worker.js')
const OPTIONS_ENV = 'CHOPPER_FRONTEND_WORKER_OPTIONS'

/**
 * Run the front end as `workers` processes sharing one data port through
 * node:cluster (the primary hands out connections round-robin), so it uses
 * every core. The primary is the front end's control plane: it owns the
 * control port, registers with the controller, takes pushes (validated by its
 * own routing table) and relays every accepted assignment to every worker over
 * IPC, also to a worker that starts later. Workers forward requests; on a 421
 * each pulls from the controller itself. `/metrics`, on the data port from
 * whichever worker gets it and on the control port, is the aggregate over all
 * workers (prom-client's AggregatorRegistry in the primary).
 *
 * Call in the primary only. Options are createFrontend's (plain data: they
 * cross a process boundary, so no logger object for workers: `logLevel`),
 * plus `workers` (default: the number of cores). Replica choice counts in-flight
 * requests per worker: each worker chooses on its own requests only.
 * @returns {Promise<{ id, url, controlUrl, workers: number, table, close: () => Promise<void> }>}
 */
async function startFrontendCluster ({ workers = os.availableParallelism(), logger = silent, startTimeoutMs = 30000, ...options } = {}) {
  if (!cluster.isPrimary) throw new InvalidArgumentError('startFrontendCluster runs in the primary process')
  if (!Number.isInteger(workers) || workers < 1 || workers > 256) throw new InvalidArgumentError('invalid workers: expected an integer from 1 to 256')
  // Options reach the workers as JSON: functions would vanish on the way.
  for (const k of ['sizeOf', 'replicaRng']) {
    if (options[k] !== undefined) throw new InvalidArgumentError(`invalid ${k}: a function cannot reach node:cluster workers${k === 'sizeOf' ? '; use replicaSizeParam' : ''}`)
  }
  createReplicaRouter({ ...defaults, ...options }) // refuse bad replica options here, not in every worker
  const log = logger.child({ component: 'frontend-cluster' })
  // node:cluster shares one listening handle per (host, port) among all the
  // primary's workers: port 0 would put two front-end clusters of one process
  // on one port. A concrete free port keeps each cluster apart.
  if (!options.port) options = { ...options, port: await freePort(options.host || defaults.host) }
  const opts = { ...defaults, ...options }
  const id = opts.id || `fe-${process.pid}`
  const aggregator = new AggregatorRegistry()
  cluster.setupPrimary({ exec: WORKER, silent: false })

  const children = []
  const exits = []
  let closing = false
  const relay = (worker) => {
    if (table.map && worker.isConnected()) worker.send({ type: 'chopper:assignment', assignment: table.map.assignment })
  }
  const table = new RoutingTable({ logger: log, onChange: () => { for (const w of children) relay(w) } })
  const controlPlane = createControlPlane({
    id,
    table,
    controllerUrl: opts.controllerUrl,
    host: opts.host,
    controlPort: opts.controlPort,
    advertiseHost: opts.advertiseHost,
    pullIntervalMs: opts.pullIntervalMs,
    registerTimeoutMs: opts.registerTimeoutMs,
    clusterToken: opts.clusterToken, // workers get it too (in their options): each pulls from the controller on a 421
    metrics: { contentType: aggregator.contentType, text: () => aggregator.clusterMetrics() },
    logger: log
  })
  const onMessage = (worker, msg) => {
    if (!msg || msg.type !== 'chopper:metrics') return
    aggregator.clusterMetrics().then(
      (text) => worker.send({ type: 'chopper:metrics:reply', seq: msg.seq, text }),
      (err) => worker.send({ type: 'chopper:metrics:reply', seq: msg.seq, error: err.message })
    )
  }
  cluster.on('message', onMessage)

  const ready = []
  for (let n = 1; n <= workers; n++) {
    const worker = cluster.fork({ [OPTIONS_ENV]: JSON.stringify({ ...options, id: `${id}.w${n}`, controlPlane: false }) })
    children.push(worker)
    exits.push(new Promise((resolve) => worker.once('exit', (code, signal) => {
      if (!closing) log.error({ worker: n, code, signal }, 'front-end worker exited')
      resolve()
    })))
    ready.push(new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new TimeoutError(`front-end worker ${n} did not start within ${startTimeoutMs} ms`)), startTimeoutMs)
      worker.on('message', (msg) => {
        if (msg && msg.type === 'chopper:ready') { clearTimeout(timer); relay(worker); resolve(msg.urls) }
        if (msg && msg.type === 'chopper:failed') { clearTimeout(timer); reject(new InternalError(`front-end worker ${n} failed to start: ${msg.message}`)) }
      })
      worker.once('exit', (code) => { clearTimeout(timer); reject(new InternalError(`front-end worker ${n} exited (${code}) before it was ready`)) })
    }))
  }

  async function close () {
    if (closing) return
    closing = true
    await controlPlane.close()
    for (const w of children) if (w.isConnected()) w.send({ type: 'chopper:shutdown' })
    const kill = setTimeout(() => { for (const w of children) w.process.kill('SIGKILL') }, 10000)
    await Promise.all(exits)
    clearTimeout(kill)
    cluster.off('message', onMessage)
  }

  let urls
  try {
    urls = await Promise.all(ready)
  } catch (err) {
    await close()
    throw err
  }
  const url = urls[0].url
  let controlUrl
  try {
    if (!urls.every((u) => u.url === url)) throw new InternalError(`front-end workers listen on different data ports (${urls.map((u) => u.url).join(', ')})`)
    // Registers with the controller; its answer (the assignment) is relayed to every worker.
    controlUrl = await controlPlane.start()
  } catch (err) {
    await close()
    throw err
  }
  log.info({ url, controlUrl, workers }, 'front-end workers listening')
  return { id, url, controlUrl, workers, table, close }
}

module.exports = { startFrontendCluster, OPTIONS_ENV }
