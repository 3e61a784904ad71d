'use strict'

const { Dispatcher } = require('undici')
const UnwrapHandler = require('undici/lib/handler/unwrap-handler')
const { RoutingTable } = require('../core/routing-table')
const { createReplicaRouter } = require('../core/replica-router')
const { UndiciForwarder, forgetDeparted } = require('../core/forwarder')
const { createKeyRouter } = require('../core/key-router')
const { parseControllerUrls } = require('../core/controller-urls')
const { validateReadCredential } = require('../core/request-signing')
const { sliceKey } = require('../core/keyspace')
const { InvalidArgumentError, MissingKeyError, NoAssignmentError, ClientClosedError } = require('../core/errors')
const { silent } = require('../core/logger')
const { MapSource } = require('./map-source')
const { HandlerSink } = require('./handler-sink')
const { DispatchExchange } = require('./dispatch-exchange')
const { createAxiosAdapter } = require('./axios-adapter')

/** Every option of createClient and its default. */
const defaults = Object.freeze({
  controllerUrl: undefined, // the controller(s): one URL, a comma-separated list or an array
  members: undefined, // or, and/or: members' control URLs (front ends', app servers'), whose GET /v1/assignment is open
  readCredential: undefined, // with a cluster token: the read credential (docs/security.md), for the controller's GET /v1/assignment
  pollIntervalMs: 1000, // how often the map is read (a 304 when unchanged); 0: only when a request meets a 421 or a dead owner
  mapTimeoutMs: 2000, // one map read
  holdMs: 3000, // a request that meets a handoff, a 421 or a dead owner waits this long for a newer map, then fails
  connections: 64, // keep-alive connections per app server
  upstreamTimeoutMs: 30000,
  bufferLimit: 1024 * 1024, // streamed bodies with a Content-Length up to this are read whole, so a 421 can replay them
  // Replica choice for reads of replicated slices, as the front end's (docs/replication.md).
  replicaChoice: 'p2c', // 'p2c' | 'jsq' | 'lc' | 'lcstar' | 'random' | 'first'
  sizeOf: undefined, // ({ url, method }) => number: a request's estimated cost, for jsq and lcstar
  replicaSizeParam: undefined,
  replicaSizePower: 1,
  lcstarThreshold: undefined,
  lcstarMaxDeferred: 1024,
  lcstarMaxWaitMs: 1000,
  replicaRng: undefined,
  serverReportTtlMs: 250,
  serverReportDecay: true,
  logger: silent
})

/**
 * A key-routing client for a service sharded by Chopper (docs/client.md):
 * it holds the slice map and sends each request straight to the app server
 * that owns its key, with the front end's routing (core/key-router.js:
 * replica choice, the hold and retry on 421 and on dead owners, the
 * idempotency rules), and no proxy in between.
 *
 * It is an undici Dispatcher: `fetch(url, { dispatcher: client })`,
 * `undici.request(url, { dispatcher: client })` and `client.request({ path,
 * method, headers, body })` route by the URL's `?key=` or the X-Chopper-Key
 * header, whatever the URL's host. `client.axiosAdapter` does the same for
 * an axios instance, and `client.lookup(key)` names the servers for a caller
 * with its own transport.
 */
class ChopperClient extends Dispatcher {
  #closed = false

  constructor (options = {}) {
    super()
    const opts = { ...defaults, ...options }
    const urls = []
    if (opts.controllerUrl !== undefined) urls.push(...parseControllerUrls(opts.controllerUrl))
    if (opts.members !== undefined) urls.push(...parseControllerUrls(opts.members, 'members'))
    if (urls.length === 0) throw new InvalidArgumentError('invalid controllerUrl: pass controllerUrl or members (where the client reads the map)')
    for (const k of ['connections', 'upstreamTimeoutMs', 'bufferLimit', 'holdMs', 'mapTimeoutMs']) {
      if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new InvalidArgumentError(`invalid ${k}: expected an integer >= 1`)
    }
    if (!Number.isInteger(opts.pollIntervalMs) || opts.pollIntervalMs < 0) throw new InvalidArgumentError('invalid pollIntervalMs: expected an integer >= 0')
    validateReadCredential(opts.readCredential)
    this.options = opts
    this.logger = opts.logger.child({ component: 'client' })
    this.source = new MapSource({ urls, credential: opts.readCredential, timeoutMs: opts.mapTimeoutMs })
    this.replicas = createReplicaRouter(opts)
    this.forwarder = new UndiciForwarder({ connections: opts.connections, timeoutMs: opts.upstreamTimeoutMs })
    this.table = new RoutingTable({
      pull: () => this.source.pull(this.table.map && this.table.map.assignment),
      logger: this.logger,
      onChange: forgetDeparted(this.forwarder)
    })
    this.router = createKeyRouter({ table: this.table, replicas: this.replicas, forwarder: this.forwarder, holdMs: opts.holdMs, logger: this.logger })
    this.sizeOf = this.replicas.needsSize ? this.replicas.sizeOf : null
    this.timer = opts.pollIntervalMs > 0 ? setInterval(() => this.table.refresh(), opts.pollIntervalMs) : null
    if (this.timer !== null) this.timer.unref() // the client does not keep a process alive
    this.axiosAdapter = createAxiosAdapter(this)
  }

  /** The generation of the map held (0: none yet). */
  get generation () {
    return this.table.generation
  }

  /**
   * Resolves once the client holds a map (reading it now if it has none).
   * Rejects with NoAssignmentError after `timeoutMs` without one.
   */
  async ready ({ timeoutMs = 10000 } = {}) {
    if (this.table.map === null) await this.table.refresh()
    if (this.table.map === null) await this.table.waitNewer(0, { timeoutMs })
    if (this.table.map === null) throw new NoAssignmentError(`no slice map after ${timeoutMs} ms: no controller or member in ${this.source.urls.join(', ')} answered with one`)
    return this.table.generation
  }

  /**
   * The servers for `key` under the map held, preferred first: for a read,
   * every server that admits its slice (the primary first); for a write, the
   * one that takes it. No balancing and no counting: the caller's transport
   * is its own. Throws NoAssignmentError before the first map.
   * @param {string} key
   * @param {{ read?: boolean }} [options]
   * @returns {{ key: string, sliceKey: number, generation: number, servers: { id: string, url: string }[] }}
   */
  lookup (key, { read = true } = {}) {
    if (typeof key !== 'string' || key.length === 0) throw new MissingKeyError('invalid key: expected a non-empty string')
    const map = this.table.map
    if (map === null) throw new NoAssignmentError('no slice map yet: await client.ready()')
    const sk = sliceKey(key)
    const i = map.indexOf(sk)
    this.replicas.sync(map)
    const target = this.replicas.ids[this.replicas.target[i]]
    const ids = read && map.admitters[i].length > 1 ? [target, ...map.admitters[i].filter((id) => id !== target)] : [target]
    return { key, sliceKey: sk, generation: map.generation, servers: ids.map((id) => ({ id, url: map.urlOf(id) })) }
  }

  /** undici's Dispatcher contract: route one request by its key. */
  dispatch (opts, handler) {
    if (!handler || typeof handler !== 'object') throw new InvalidArgumentError('handler must be an object')
    handler = UnwrapHandler.unwrap(handler)
    const sink = new HandlerSink(handler)
    let ex = null
    // The caller's abort (a signal, or undici's body consumer giving up).
    handler.onConnect((reason) => {
      if (sink.destroyed || sink.finished) return
      if (ex !== null && ex.upstream !== null && typeof ex.upstream.abort === 'function') ex.upstream.abort()
      sink.destroy(reason)
    })
    if (sink.destroyed) return true
    try {
      if (this.#closed) throw new ClientClosedError('the Chopper client is closed')
      ex = new DispatchExchange(opts, sink, this.sizeOf)
      if (ex.appKey === undefined) throw new MissingKeyError('missing key: pass ?key=K or an X-Chopper-Key header')
    } catch (err) {
      sink.destroy(err)
      return true
    }
    if (ex.streamed) {
      ex.prepare(this.options.bufferLimit).then(() => this.router.route(ex), (err) => ex.fail(err))
      return true
    }
    this.router.route(ex)
    return true
  }

  /** Stop reading the map and close every connection. Callback or promise, as undici's. */
  close (callback) {
    const done = this.#shutdown()
    if (typeof callback === 'function') {
      done.then(() => callback(null, null), callback)
      return
    }
    return done
  }

  destroy (err, callback) {
    if (typeof err === 'function') return this.close(err)
    return this.close(callback)
  }

  async #shutdown () {
    if (this.#closed) return
    this.#closed = true
    if (this.timer !== null) clearInterval(this.timer)
    await this.forwarder.close()
    await this.source.close()
  }
}

/**
 * Build a client. It reads the map at once in the background; `await
 * client.ready()` to wait for it.
 * @param {Partial<typeof defaults>} options
 */
function createClient (options) {
  const client = new ChopperClient(options)
  client.table.refresh()
  return client
}

module.exports = { createClient, ChopperClient, defaults }
