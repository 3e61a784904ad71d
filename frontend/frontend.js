'use strict'

const http = require('node:http')
const express = require('express')
const { RoutingTable } = require('./routing-table')
const { createForwarder } = require('./forwarders')
const { createProxyHandler } = require('./proxy')
const { createFrontendMetrics } = require('./metrics')
const { ControllerClient } = require('../core/controller-client')
const { jsonErrorHandler, listen, close } = require('../core/http')
const { InvalidArgumentError, MalformedBodyError, statusOf, toHttpBody } = require('../core/errors')
const { silent } = require('../core/logger')
const { Membership } = require('../core/membership')

/** Every option of createFrontend and its default. */
const defaults = Object.freeze({
  id: undefined, // defaults to fe-<pid>-<n>
  host: '127.0.0.1',
  port: 0, // public data port
  controlPort: 0, // assignment pushes from the controller
  advertiseHost: '127.0.0.1',
  controllerUrl: undefined, // without it the front end only takes pushes
  forwarder: 'undici', // 'undici' | 'axios' (bench/forwarding.js compares them)
  connections: 64, // keep-alive connections per app server
  upstreamTimeoutMs: 30000,
  bufferLimit: 1024 * 1024, // bodies up to this size are buffered so a 421 can be retried
  holdMs: 3000, // a request that meets a handoff, a 421 or a dead owner waits this long for a newer map, then fails
  pullIntervalMs: 10000, // safety net: re-register (idempotent; a restarted controller relearns us) and take its assignment; 0 disables
  registerTimeoutMs: 30000,
  defaultMetrics: false, // process metrics in /metrics
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
  if (!['undici', 'axios'].includes(opts.forwarder)) throw new InvalidArgumentError('invalid forwarder: expected "undici" or "axios"')
  for (const k of ['connections', 'upstreamTimeoutMs', 'bufferLimit', 'holdMs']) {
    if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new InvalidArgumentError(`invalid ${k}: expected an integer >= 1`)
  }
  if (opts.controllerUrl !== undefined && !/^https?:\/\//.test(opts.controllerUrl)) throw new InvalidArgumentError('invalid controllerUrl: expected an http(s) URL')
  const log = opts.logger.child({ component: 'frontend', frontendId: id })
  const client = opts.controllerUrl ? new ControllerClient({ controllerUrl: opts.controllerUrl }) : null
  const forwarder = createForwarder(opts.forwarder, { connections: opts.connections, timeoutMs: opts.upstreamTimeoutMs })

  let known = new Set()
  const table = new RoutingTable({
    pull: client ? () => client.getAssignment() : undefined,
    logger: log,
    onChange (map) {
      // Close pools of servers that left, so their sockets do not linger.
      const now = new Set(Object.values(map.assignment.servers).map((s) => s.url))
      for (const url of known) if (!now.has(url)) forwarder.forget(url)
      known = now
    }
  })
  const metrics = createFrontendMetrics({ table, defaultMetrics: opts.defaultMetrics })

  const data = express()
  data.disable('x-powered-by')
  data.disable('etag')
  data.get('/healthz', (req, res) => {
    const ok = table.map !== null
    res.status(ok ? 200 : 503).json({ ok, frontendId: id, generation: table.generation })
  })
  data.get('/metrics', async (req, res) => {
    res.set('Content-Type', metrics.registry.contentType).send(await metrics.registry.metrics())
  })
  data.use(createProxyHandler({ table, forwarder, metrics, bufferLimit: opts.bufferLimit, holdMs: opts.holdMs, logger: log }))
  data.use((err, req, res, next) => {
    metrics.errors.inc({ code: toHttpBody(err).error.code })
    if (statusOf(err) >= 500) log.warn({ err: { code: err.code, message: err.message }, path: req.path }, 'request failed')
    if (res.headersSent) return res.destroy()
    res.status(statusOf(err)).json(toHttpBody(err))
  })

  const control = express()
  control.disable('x-powered-by')
  control.use(express.json({ limit: '64mb' }))
  control.put('/v1/assignment', (req, res) => {
    if (!req.is('application/json')) throw new MalformedBodyError('expected an application/json assignment body')
    const changed = table.set(req.body)
    res.json({ accepted: true, changed, generation: table.generation })
  })
  control.get('/v1/assignment', (req, res) => res.json({ generation: table.generation, assignment: table.map ? table.map.assignment : null }))
  control.get('/healthz', (req, res) => res.json({ ok: true, frontendId: id, generation: table.generation }))
  control.use(jsonErrorHandler(log))

  const dataServer = http.createServer(data)
  const controlServer = http.createServer(control)
  let urls = null
  let membership = null

  async function start () {
    const dataPort = await listen(dataServer, opts.port, opts.host)
    const ctlPort = await listen(controlServer, opts.controlPort, opts.host)
    urls = { url: `http://${opts.advertiseHost}:${dataPort}`, controlUrl: `http://${opts.advertiseHost}:${ctlPort}` }
    if (client) {
      membership = new Membership({
        register: () => client.registerFrontend({ id, controlUrl: urls.controlUrl, generation: table.generation }),
        deregister: () => client.deregisterFrontend(id),
        install,
        registerTimeoutMs: opts.registerTimeoutMs,
        reregisterMs: opts.pullIntervalMs,
        what: `front end ${id}`,
        logger: log
      })
      await membership.start()
    }
    log.info(urls, 'front end listening')
    return urls
  }

  function install (body) {
    if (!body || !body.assignment) return
    try {
      // A newer generation only; a controller that restarted from generation 1 is caught up by pushes.
      if (body.assignment.generation > table.generation) table.set(body.assignment)
    } catch (err) {
      log.warn({ err: { code: err.code, message: err.message } }, 'assignment from the controller rejected')
    }
  }

  async function closeFrontend () {
    if (membership) await membership.stop()
    await Promise.all([close(dataServer), close(controlServer)])
    await forwarder.close()
  }

  return { id, start, close: closeFrontend, table, metrics, get urls () { return urls } }
}

module.exports = { createFrontend, defaults }
