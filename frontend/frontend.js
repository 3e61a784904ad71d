'use strict'

const http = require('node:http')
const express = require('express')
const { RoutingTable } = require('../core/routing-table')
const { UndiciForwarder, forgetDeparted } = require('../core/forwarder')
const { createKeyRouter } = require('../core/key-router')
const { createProxyHandler } = require('./proxy')
const { createFastServer } = require('./fast-http')
const { createFrontendMetrics } = require('./metrics')
const { createReplicaRouter } = require('../core/replica-router')
const { ControllerClient, parseControllerUrls } = require('../core/controller-client')
const { createControlPlane } = require('./control-plane')
const { jsonErrorHandler, listen, close } = require('../core/http')
const { InvalidArgumentError, MalformedRequestError, toHttpBody } = require('../core/errors')
const { hostCount } = require('../core/http-syntax')
const { isRead } = require('../core/http-methods')
const { silent } = require('../core/logger')
const { validateToken } = require('../core/cluster-auth')
const { resolveMap } = require('../core/map-diff')

// The largest body the fast data server reads whole (frontend/fast-http.js); a request with a
// larger one, or a chunked one, goes to Node's server, whose path buffers up to bufferLimit or streams.
const FAST_BODY_LIMIT = 64 * 1024

/** Every option of createFrontend and its default. */
const defaults = Object.freeze({
  id: undefined, // defaults to fe-<pid>-<n>
  host: '127.0.0.1',
  port: 0, // public data port
  controlPort: 0, // assignment pushes from the controller
  advertiseHost: '127.0.0.1',
  controllerUrl: undefined, // without it the front end only takes pushes
  forwarder: 'undici', // 'undici' (core/forwarder.js), or an object with its attempt/forget/close (bench/lib/axios-forwarder.js, for comparison)
  dataServer: 'fast', // 'fast': frontend/fast-http.js takes requests without a body or with one up to 64 KiB itself, the rest go to Node's http server; 'node': Node's http server takes all
  upstreamClient: 'chopper', // with the undici forwarder, requests without a body or with one read whole go upstream through 'chopper' (core/upstream-h1.js) or 'undici' too
  connections: 64, // keep-alive connections per app server
  upstreamTimeoutMs: 30000,
  connectTimeoutMs: 10000, // a connection to an app server not made by then fails as not sent: the request goes to the slice's next owner
  bufferLimit: 1024 * 1024, // bodies up to this size are buffered so a 421 can be retried
  holdMs: 3000, // a request that meets a handoff, a 421 or a dead owner waits this long for a newer map, then fails
  pullIntervalMs: 10000, // safety net: re-register (idempotent; a restarted controller relearns us) and take its assignment; 0 disables
  registerTimeoutMs: 30000,
  defaultMetrics: false, // process metrics in /metrics
  metricsText: undefined, // () => Promise<string>: what /metrics serves instead of this process's registry (cluster workers serve the aggregate)
  controlPlane: true, // false: no control listener and no registration (a node:cluster worker; its primary relays pushes)
  // Replica choice for reads of replicated slices (docs/replication.md, core/replica-choice.js).
  replicaChoice: 'p2c', // 'p2c' | 'jsq' | 'lc' | 'lcstar' | 'random' | 'first'
  sizeOf: undefined, // (req) => number: a request's estimated cost, for jsq and lcstar (in-process only: not passed to node:cluster workers)
  replicaSizeParam: undefined, // or: the size is this query parameter's value ('n' for compute) ...
  replicaSizePower: 1, // ... to this power (2 for compute's O(n^2)); without either, every request has size 1
  lcstarThreshold: undefined, // lcstar: sizes at or above it are long jobs, at most one per server; undefined: none are
  lcstarMaxDeferred: 1024, // lcstar: long requests waiting for a server without a long job, at most; more go to the least connected
  lcstarMaxWaitMs: 1000, // lcstar: how long one waits before it goes to the least connected
  replicaRng: undefined, // () => number in [0, 1) for p2c and random; Math.random by default (tests pass a seeded one)
  serverReportTtlMs: 250, // an app server's answer says how many requests it holds (X-Chopper-Inflight); p2c, lc and lcstar count the other front ends' share of it for this long; 0: own in-flight counts only
  serverReportDecay: true, // ... and count that share as done, linearly, over one of our recent answer times from that server (false: the whole share until serverReportTtlMs)
  // The shared cluster secret (docs/security.md): calls to the controller
  // (registration, pulls) are signed with it, and pushes must be. undefined: unauthenticated.
  clusterToken: undefined,
  logger: silent
})

let seq = 0

/**
 * Build a front end: a public data listener that routes by key, and a
 * control listener for assignment pushes.
 */
function createFrontend (options = {}) {
  const opts = { ...defaults, ...options }
  const id = opts.id || `fe-${process.pid}-${++seq}`
  if (opts.forwarder !== 'undici' && !isForwarder(opts.forwarder)) throw new InvalidArgumentError('invalid forwarder: expected "undici" or an object with attempt, forget and close')
  if (!['fast', 'node'].includes(opts.dataServer)) throw new InvalidArgumentError('invalid dataServer: expected "fast" or "node"')
  if (!['chopper', 'undici'].includes(opts.upstreamClient)) throw new InvalidArgumentError('invalid upstreamClient: expected "chopper" or "undici"')
  for (const k of ['connections', 'upstreamTimeoutMs', 'connectTimeoutMs', 'bufferLimit', 'holdMs']) {
    if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new InvalidArgumentError(`invalid ${k}: expected an integer >= 1`)
  }
  if (opts.controllerUrl !== undefined) parseControllerUrls(opts.controllerUrl) // throws naming the option
  validateToken(opts.clusterToken)
  const router = createReplicaRouter(opts)
  const log = opts.logger.child({ component: 'frontend', frontendId: id })
  const client = opts.controllerUrl ? new ControllerClient({ controllerUrl: opts.controllerUrl, clusterToken: opts.clusterToken }) : null // pulls on 421
  const forwarder = opts.forwarder === 'undici'
    ? new UndiciForwarder({ connections: opts.connections, timeoutMs: opts.upstreamTimeoutMs, connectTimeoutMs: opts.connectTimeoutMs, client: opts.upstreamClient })
    : opts.forwarder

  const table = new RoutingTable({
    pull: client ? async () => resolveMap(table.map && table.map.assignment, await client.getAssignment(table.generation)) : undefined,
    logger: log,
    onChange: forgetDeparted(forwarder)
  })
  const metrics = createFrontendMetrics({ table, inflight: () => router.inflight(), defaultMetrics: opts.defaultMetrics })
  router.attachMetrics(metrics)

  // Express serves only the reserved routes; everything else takes the plain
  // http data path (docs/frontend-performance.md).
  const reserved = express()
  reserved.disable('x-powered-by')
  reserved.disable('etag')
  reserved.get('/healthz', (req, res) => {
    const ok = table.map !== null
    res.status(ok ? 200 : 503).json({ ok, frontendId: id, generation: table.generation, replicaChoice: router.policy })
  })
  reserved.get('/metrics', async (req, res) => {
    const text = opts.metricsText ? await opts.metricsText() : await metrics.registry.metrics()
    res.set('Content-Type', metrics.registry.contentType).send(text)
  })
  reserved.use(jsonErrorHandler(log))
  const keyRouter = createKeyRouter({ table, replicas: router, forwarder, metrics, holdMs: opts.holdMs, logger: log })
  const proxy = createProxyHandler({ router: keyRouter, metrics, bufferLimit: opts.bufferLimit, logger: log })
  const onData = (req, res) => {
    // Node's server takes the first of two Hosts; RFC 9112 3.2 asks for a 400 (as frontend/fast-http.js answers).
    if (hostCount(req.rawHeaders) > 1) return refuse(res, new MalformedRequestError('more than one Host header (RFC 9112 3.2)'))
    if (forReserved(req)) return reserved(req, res)
    proxy(req, res)
  }

  const nodeServer = http.createServer(onData)
  const dataServer = opts.dataServer === 'fast'
    // Bodies up to 64 KiB (and never above bufferLimit) are read whole there; larger ones go to Node's server.
    ? createFastServer({ onRequest: proxy, fallback: nodeServer, fallbackFor: forReserved, maxBodySize: Math.min(FAST_BODY_LIMIT, opts.bufferLimit) })
    : nodeServer
  // A node:cluster worker has no control plane of its own: the primary takes
  // pushes and relays them (frontend/cluster.js).
  const controlPlane = opts.controlPlane
    ? createControlPlane({ id, table, controllerUrl: opts.controllerUrl, host: opts.host, controlPort: opts.controlPort, advertiseHost: opts.advertiseHost, pullIntervalMs: opts.pullIntervalMs, registerTimeoutMs: opts.registerTimeoutMs, clusterToken: opts.clusterToken, logger: log })
    : null
  let urls = null

  async function start () {
    const dataPort = await listen(dataServer, opts.port, opts.host)
    urls = { url: `http://${opts.advertiseHost}:${dataPort}`, controlUrl: null }
    if (controlPlane) urls.controlUrl = await controlPlane.start()
    log.info(urls, 'front end listening')
    return urls
  }

  async function closeFrontend () {
    if (controlPlane) await controlPlane.close()
    await close(dataServer)
    await forwarder.close()
    if (client) await client.close()
  }

  return { id, start, close: closeFrontend, table, metrics, replicas: router, get urls () { return urls } }
}

function isForwarder (f) {
  return f !== null && typeof f === 'object' && ['attempt', 'forget', 'close'].every((m) => typeof f[m] === 'function')
}

/** Answer a request with `err` as JSON and close the connection. */
function refuse (res, err) {
  const text = JSON.stringify(toHttpBody(err))
  res.writeHead(err.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), connection: 'close' })
  res.end(text)
}

/** A read of `/healthz` or `/metrics` (with or without a query): the front end's own. */
function forReserved (req) {
  if (!isRead(req.method)) return false
  const url = req.url
  const q = url.indexOf('?')
  const path = q === -1 ? url : url.slice(0, q)
  return path === '/healthz' || path === '/metrics'
}

module.exports = { createFrontend, createReplicaRouter, defaults }
