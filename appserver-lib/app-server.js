'use strict'

const http = require('node:http')
const express = require('express')
const { Registry, Gauge } = require('prom-client')
const { ShardGuard } = require('./shard-guard')
const { shardGuardMiddleware, defaultKeyFrom, COST_MODES } = require('./middleware')
const { serverOptions: shapes } = require('./request-shapes')
const { createControlApp } = require('./control-app')
const { ControllerClient, parseControllerUrls } = require('../core/controller-client')
const { jsonErrorHandler, listen, close } = require('../core/http')
const { InvalidArgumentError, NotFoundError } = require('../core/errors')
const { silent } = require('../core/logger')
const { pollUntil } = require('../core/poll')
const { Membership } = require('../core/membership')
const { LeaseKeeper } = require('./lease-keeper')
const { streamPushes } = require('./push')
const { resolveMap } = require('../core/map-diff')
const { RequestVerifier, validateToken, warnUnauthenticated } = require('../core/cluster-auth')

/** Every option of createAppServer and its default. */
const defaults = Object.freeze({
  host: '127.0.0.1',
  port: 0,
  controlPort: 0,
  advertiseHost: '127.0.0.1',
  controllerUrl: undefined, // without it the server does not register (assignments must be pushed)
  registerTimeoutMs: 30000,
  reregisterMs: 10000, // while renewals fail, re-register this often (idempotent) so a restarted controller relearns us; 0 disables
  keyFrom: defaultKeyFrom,
  enforceOwnership: true, // false: serve every key (no 421), still counting; for non-Chopper baselines
  // What a request costs in the load report (busy ms per slice): 'wall' from
  // admission until the response closes; 'cpu' the process's CPU time across
  // the handler's synchronous part (CPU-bound apps). setRequestCost overrides.
  cost: 'wall',
  // 'strict': admit only under a live lease from the controller (exclusive
  // admission; a controller outage longer than a lease stops this server).
  // 'available': keep serving the last map without a controller. See docs/ownership.md.
  consistency: 'available',
  // Renew over one long-lived connection to the controller (a lease stream,
  // docs/control-plane.md) rather than one HTTP call per renewal.
  leaseStream: true,
  renewMs: undefined, // lease renewal period; undefined: the one the controller's grants name (250 ms in small clusters, longer in large ones)
  holdMs: 2000, // a request for a slice in handoff waits this long for the grant
  drainTimeoutMs: 1000, // a revoke push waits this long for in-flight requests before answering
  // Which of them: 'writes' (methods other than GET, HEAD, OPTIONS; a read
  // admitted before a revoke overlaps every write the next owner admits, so it
  // may finish later: docs/ownership.md) or 'all'.
  handoffDrain: 'writes',
  // (req) => boolean: requests to admit at once for a slice this server is joining (a handoff that
  // adds it), instead of holding them until the grant; null: none. kv-cache's write holds use it.
  admitJoining: null,
  drainDeadlineMs: 15000, // drain(): give up waiting for the controller to move our slices after this
  // The shared cluster secret (docs/security.md): calls to the controller are
  // signed with it, and pushes and load collection must be. undefined: unauthenticated.
  clusterToken: undefined,
  // The data port's requests and responses are born with the properties
  // Express and the shard guard set (request-shapes.js). false: Node's own
  // classes (for comparison: bench/appserver-overhead.js).
  requestShapes: true,
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
 * @param {Function} [options.onAssignment] called with every map installed (ShardGuard)
 * @param {Registry} [options.registry] prom-client registry served on /metrics
 */
function createAppServer (options) {
  const opts = { ...defaults, ...options }
  const { id, app, host, port, controlPort, advertiseHost, controllerUrl, registerTimeoutMs, keyFrom, logger } = opts
  if (typeof id !== 'string' || !/^[A-Za-z0-9._-]+$/.test(id)) throw new InvalidArgumentError('invalid id: expected a non-empty string of [A-Za-z0-9._-]')
  if (typeof app !== 'function') throw new InvalidArgumentError('invalid app: expected an Express app or request handler')
  if (opts.admitJoining !== null && typeof opts.admitJoining !== 'function') throw new InvalidArgumentError('invalid admitJoining: expected a function (req) => boolean, or null')
  if (!COST_MODES.includes(opts.cost)) throw new InvalidArgumentError(`invalid cost: expected one of ${COST_MODES.join(', ')}, got ${JSON.stringify(opts.cost)}`)
  if (typeof opts.requestShapes !== 'boolean') throw new InvalidArgumentError('invalid requestShapes: expected a boolean')
  if (typeof opts.leaseStream !== 'boolean') throw new InvalidArgumentError('invalid leaseStream: expected a boolean')
  if (controllerUrl !== undefined) parseControllerUrls(controllerUrl) // throws naming the option
  const log = logger.child({ component: 'appserver', serverId: id })
  const clusterToken = validateToken(opts.clusterToken)
  if (clusterToken === undefined) warnUnauthenticated(log)
  const registry = opts.registry || new Registry()

  if (opts.renewMs !== undefined && (!Number.isInteger(opts.renewMs) || opts.renewMs < 1)) throw new InvalidArgumentError('invalid renewMs: expected an integer >= 1, or undefined to follow the controller')
  for (const k of ['drainTimeoutMs', 'drainDeadlineMs']) {
    if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new InvalidArgumentError(`invalid ${k}: expected an integer >= 1`)
  }
  const guard = new ShardGuard({ serverId: id, onAcquire: opts.onAcquire, onRelease: opts.onRelease, onAssignment: opts.onAssignment, consistency: opts.consistency, leases: Boolean(controllerUrl), holdMs: opts.holdMs, handoffDrain: opts.handoffDrain, logger: log })
  if (opts.consistency === 'strict' && !controllerUrl) log.warn('consistency is strict but there is no controller to grant leases: admission follows pushed maps only')
  registerGuardMetrics(registry, guard)

  const data = express()
  data.disable('x-powered-by')
  data.disable('etag')
  data.get('/healthz', (req, res) => res.json({ ok: true, serverId: id, generation: guard.generation }))
  data.use(shardGuardMiddleware(guard, { keyFrom, enforce: opts.enforceOwnership, cost: opts.cost, admitJoining: opts.admitJoining }))
  data.use(app)
  data.use((req, res, next) => next(new NotFoundError(`no route for ${req.method} ${req.path}`)))
  data.use(jsonErrorHandler(log))

  // Requests and responses born with the properties Express and the shard
  // guard set (request-shapes.js): adding them after Express swaps the
  // prototypes cost microseconds each.
  const dataServer = http.createServer(opts.requestShapes ? shapes : {}, data)
  const verifier = clusterToken === undefined ? null : new RequestVerifier({ token: clusterToken })
  const controlServer = http.createServer(createControlApp({ guard, registry, drainTimeoutMs: opts.drainTimeoutMs, verifier, logger: log }))
  // Over the lease stream the controller also collects load and pushes maps, as the control port serves them.
  const streamed = { serveLoad: (ack) => guard.report(ack), servePush: streamPushes({ guard, verifier, drainTimeoutMs: opts.drainTimeoutMs, logger: log }) }
  const client = controllerUrl ? new ControllerClient({ controllerUrl, clusterToken, leaseStream: opts.leaseStream, ...streamed }) : null
  let urls = null
  let membership = null
  let leases = null
  let draining = null

  async function start () {
    const dataPort = await listen(dataServer, port, host)
    const ctlPort = await listen(controlServer, controlPort, host)
    urls = { url: `http://${advertiseHost}:${dataPort}`, controlUrl: `http://${advertiseHost}:${ctlPort}` }
    if (client) {
      leases = new LeaseKeeper({
        guard,
        renew: (report) => client.renewLease(id, report),
        install: installFromController,
        onUnknown: () => { if (!draining) membership.reregister() },
        renewMs: opts.renewMs,
        logger: log
      })
      membership = new Membership({
        // The registration answer carries a lease too, measured from when the request left.
        register: async () => {
          const sentAt = guard.now()
          return { body: await client.registerServer({ id, ...urls, generation: guard.generation }), sentAt }
        },
        deregister: () => client.deregisterServer(id),
        install: ({ body, sentAt }) => leases.apply(body, sentAt),
        registerTimeoutMs,
        reregisterMs: opts.reregisterMs,
        // A renewal the controller answered proves it knows us (an unknown member's gets a 404,
        // which re-registers at once): periodic re-registration only while renewals fail.
        needed: () => leases.failures > 0,
        what: `${id} with ${controllerUrl}`,
        logger: log
      })
      await membership.start()
      leases.start()
    }
    log.info(urls, 'app server listening')
    return urls
  }

  /** A map or a diff (core/map-diff.js) from a registration or renewal answer. */
  function installFromController (body) {
    if (!body) return
    try {
      guard.setAssignment(resolveMap(guard.map && guard.map.assignment, body))
    } catch (err) {
      // A push may already have installed a newer generation (or moved us off
      // the diff's base): that is fine; the next renewal reports where we are.
      if (err.code !== 'CHOPPER_ERR_STALE_GENERATION' && err.code !== 'CHOPPER_ERR_DIFF_BASE') throw err
    }
  }

  /**
   * Graceful drain (SIGTERM): ask the controller to hand our slices to
   * others, wait until it has granted them elsewhere (a map that no longer
   * names us, with no handoff in progress) and every request we admitted has
   * finished, then deregister. Requests that still reach us meanwhile get a
   * 421 and are re-routed by the front end. Idempotent.
   */
  function drain () {
    if (!draining) draining = doDrain()
    return draining
  }

  async function doDrain () {
    if (!client || !membership) return { drained: true, reason: 'no controller' }
    const t0 = Date.now()
    try {
      await client.drainServer(id)
    } catch (err) {
      const body = err.response && err.response.data && err.response.data.error
      log.warn({ err, refusal: body }, 'drain request refused or failed; deregistering directly')
      leases.stop()
      await membership.stop()
      return { drained: false, reason: body ? body.code : err.message }
    }
    let done = false
    try {
      await pollUntil(() => {
        const m = guard.map
        return !m || (!m.hasMoving && !m.replicas.some((r) => r.includes(id)) && guard.drainedGeneration === guard.generation)
      }, { timeoutMs: opts.drainDeadlineMs, intervalMs: 20, what: `the controller to move ${id}'s slices away` })
      done = true
    } catch (err) {
      log.warn({ err }, 'drain did not complete; deregistering anyway')
    }
    leases.stop()
    await membership.stop()
    log.info({ ms: Date.now() - t0, done }, 'drained')
    return { drained: done }
  }

  async function closeServer () {
    if (leases) leases.stop()
    if (membership) await membership.stop()
    await Promise.all([close(dataServer), close(controlServer)])
    if (client) await client.close()
  }

  // `listeners` is for fault injection in benches (bench/chaos): the raw http servers.
  return { start, close: closeServer, drain, guard, registry, listeners: { data: dataServer, control: controlServer }, get urls () { return urls }, get leases () { return leases } }
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
  stat('chopper_appserver_requests_held', 'Requests held for a handoff or a newer map before being decided', 'held')
  stat('chopper_appserver_requests_lease_refused', 'Requests refused because the lease had run out (strict mode)', 'leaseRefused')
  stat('chopper_appserver_assignments_accepted', 'Assignments installed', 'assignmentsAccepted')
  stat('chopper_appserver_assignments_rejected', 'Assignment pushes rejected as invalid or stale', 'assignmentsRejected')
  new Gauge({ name: 'chopper_appserver_generation', help: 'Installed assignment generation', registers: [registry], collect () { this.set(guard.generation) } }) // eslint-disable-line no-new
  new Gauge({ name: 'chopper_appserver_lease_valid', help: '1 while the lease is live (strict mode), 0 when it ran out, -1 when leases are not in force', registers: [registry], collect () { this.set(guard.leasesEnforced ? (guard.leaseValid() ? 1 : 0) : -1) } }) // eslint-disable-line no-new
}

module.exports = { createAppServer, defaults }
