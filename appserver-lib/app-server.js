'use strict'

const http = require('node:http')
const express = require('express')
const { Registry, Gauge } = require('prom-client')
const { ShardGuard } = require('./shard-guard')
const { shardGuardMiddleware, defaultKeyFrom } = require('./middleware')
const { createControlApp } = require('./control-app')
const { ControllerClient } = require('./controller-client')
const { jsonErrorHandler, listen, close } = require('../core/http')
const { InvalidArgumentError, NotFoundError } = require('../core/errors')
const { silent } = require('../core/logger')
const { Membership } = require('./membership')

/** Every option of createAppServer and its default. */
const defaults = Object.freeze({
  host: '127.0.0.1',
  port: 0,
  controlPort: 0,
  advertiseHost: '127.0.0.1',
  controllerUrl: undefined, // without it the server does not register (assignments must be pushed)
  registerTimeoutMs: 30000,
  reregisterMs: 10000, // re-register this often (idempotent) so a restarted controller relearns us; 0 disables
  keyFrom: defaultKeyFrom,
  enforceOwnership: true, // false: serve every key (no 421), still counting; for non-Chopper baselines
  logger: silent
})

/**
 * Host an app behind Chopper: a data listener (shard guard, then the app) and
 * a separate control listener (pushes, load reports, metrics).
 *
 * @param {object} options see `defaults`; plus
 * @param {string} options.id server id
 * @param {Function} options.app Express app (or router) for the data routes
 * @param {Function} [options.onAcquire] / [options.onRelease] ownership hooks
 * @param {Registry} [options.registry] prom-client registry served on /metrics
 */
function createAppServer (options) {
  const opts = { ...defaults, ...options }
  const { id, app, host, port, controlPort, advertiseHost, controllerUrl, registerTimeoutMs, keyFrom, logger } = opts
  if (typeof id !== 'string' || !/^[A-Za-z0-9._-]+$/.test(id)) throw new InvalidArgumentError('invalid id: expected a non-empty string of [A-Za-z0-9._-]')
  if (typeof app !== 'function') throw new InvalidArgumentError('invalid app: expected an Express app or request handler')
  if (controllerUrl !== undefined && !/^https?:\/\//.test(controllerUrl)) throw new InvalidArgumentError('invalid controllerUrl: expected an http(s) URL')
  const log = logger.child({ component: 'appserver', serverId: id })
  const registry = opts.registry || new Registry()

  const guard = new ShardGuard({ serverId: id, onAcquire: opts.onAcquire, onRelease: opts.onRelease, logger: log })
  registerGuardMetrics(registry, guard)

  const data = express()
  data.disable('x-powered-by')
  data.disable('etag')
  data.get('/healthz', (req, res) => res.json({ ok: true, serverId: id, generation: guard.generation }))
  data.use(shardGuardMiddleware(guard, { keyFrom, enforce: opts.enforceOwnership }))
  data.use(app)
  data.use((req, res, next) => next(new NotFoundError(`no route for ${req.method} ${req.path}`)))
  data.use(jsonErrorHandler(log))

  const dataServer = http.createServer(data)
  const controlServer = http.createServer(createControlApp({ guard, registry, logger: log }))
  const client = controllerUrl ? new ControllerClient({ controllerUrl }) : null
  let urls = null
  let membership = null

  async function start () {
    const dataPort = await listen(dataServer, port, host)
    const ctlPort = await listen(controlServer, controlPort, host)
    urls = { url: `http://${advertiseHost}:${dataPort}`, controlUrl: `http://${advertiseHost}:${ctlPort}` }
    if (client) {
      membership = new Membership({
        register: () => client.registerServer({ id, ...urls, generation: guard.generation }),
        deregister: () => client.deregisterServer(id),
        install: installFromController,
        registerTimeoutMs,
        reregisterMs: opts.reregisterMs,
        what: `${id} with ${controllerUrl}`,
        logger: log
      })
      await membership.start()
    }
    log.info(urls, 'app server listening')
    return urls
  }

  function installFromController (body) {
    if (!body || !body.assignment) return
    try {
      guard.setAssignment(body.assignment)
    } catch (err) {
      // A push may already have installed a newer generation: that is fine.
      if (err.code !== 'CHOPPER_ERR_STALE_GENERATION') throw err
    }
  }

  async function closeServer () {
    if (membership) await membership.stop()
    await Promise.all([close(dataServer), close(controlServer)])
  }

  return { start, close: closeServer, guard, registry, get urls () { return urls } }
}

function registerGuardMetrics (registry, guard) {
  const stat = (name, help, key) => new Gauge({
    name,
    help,
    registers: [registry],
    collect () { this.set(guard.stats[key]) }
  })
  stat('chopper_appserver_requests_admitted', 'Requests admitted for owned slices', 'admitted')
  stat('chopper_appserver_requests_misdirected', 'Requests refused with 421 (slice not owned)', 'misdirected')
  stat('chopper_appserver_requests_stale_routed', 'Requests routed with a generation older than ours', 'staleRouted')
  stat('chopper_appserver_assignments_accepted', 'Assignments installed', 'assignmentsAccepted')
  stat('chopper_appserver_assignments_rejected', 'Assignment pushes rejected as invalid or stale', 'assignmentsRejected')
  new Gauge({ name: 'chopper_appserver_generation', help: 'Installed assignment generation', registers: [registry], collect () { this.set(guard.generation) } }) // eslint-disable-line no-new
}

module.exports = { createAppServer, defaults }
