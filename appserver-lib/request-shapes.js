'use strict'

const http = require('node:http')
const express = require('express')

/**
 * Request and response classes for the app server's data port, whose
 * instances are born with every own property that Express 5, its router,
 * body-parser, parseurl and the shard guard would otherwise add to them one
 * request at a time.
 *
 * Why: Express swaps each request's and response's prototype
 * (`Object.setPrototypeOf(req, app.request)`), and V8 gives every property
 * *added* after that a new hidden class of its own, where assigning a
 * property that already exists costs nanoseconds. A request through the shard
 * guard added about fifteen (the guard's five `req.sliceKey` ...
 * `req.chopperServers` and `res.writeHead`; the router's `next`, `baseUrl`,
 * `originalUrl`, `params`, `route` and route symbol; parseurl's `_parsedUrl`;
 * body-parser's `body`; Express's `res.locals`; Node's `statusCode`). On 2 ×
 * AMD EPYC (2026-11-27) `node bench/appserver-overhead.js` measured the
 * guarded hello app at 411 µs of CPU per request with Node's classes and
 * 123 µs with these (2,672 against 8,468 req/s).
 *
 * Only plain data properties are declared here. A name the prototypes
 * define as a getter (Express's `req.query`, `req.path`, ...) must not be:
 * an own property would hide the getter.
 */

// Symbols, not public fields: setRequestCost and settleRequest are the API (middleware.js).
const STATED_COST = Symbol('chopper.requestCost')
const SETTLE = Symbol('chopper.settle')

// Express 5's router notes the matched route under a symbol of its own
// (router/lib/symbols.js, not exported). One request through a throwaway
// router, at load, shows which symbols it sets; none (another router
// version): nothing is declared, and test/integration/request-shapes.test.js
// names whatever property a request then gains.
const ROUTER_SYMBOLS = (() => {
  try {
    const probe = express.Router()
    probe.get('/', () => {})
    const req = { method: 'GET', url: '/', headers: {} }
    probe.handle(req, {}, () => {})
    return Object.getOwnPropertySymbols(req).filter((s) => String(s.description).startsWith('router.'))
  } catch {
    return []
  }
})()

class ChopperRequest extends http.IncomingMessage {
  constructor (socket) {
    super(socket)
    // Node's streams leave the listener count on EventEmitter.prototype (0)
    // until the first listener (the shard guard's 'close' on the response,
    // body-parser's on the request) sets it on the instance.
    if (!Object.hasOwn(this, '_eventsCount')) this._eventsCount = this._eventsCount || 0
    // Express and its router
    this.res = undefined
    this.next = undefined
    this.baseUrl = undefined
    this.originalUrl = undefined
    this.params = undefined
    this.route = undefined
    for (const sym of ROUTER_SYMBOLS) this[sym] = undefined
    // parseurl, body-parser
    this._parsedUrl = undefined
    this._parsedOriginalUrl = undefined
    this.body = undefined
    // the shard guard (middleware.js)
    this.sliceKey = undefined
    this.chopperGeneration = undefined
    this.chopperReplicas = undefined
    this.chopperAdmitters = undefined
    this.chopperServers = undefined
    this[STATED_COST] = undefined
    this[SETTLE] = undefined
  }
}

class ChopperResponse extends http.ServerResponse {
  constructor (req, options) {
    super(req, options)
    if (!Object.hasOwn(this, '_eventsCount')) this._eventsCount = this._eventsCount || 0
    this.locals = undefined // Express: `if (!res.locals) res.locals = Object.create(null)`
    // Node keeps these two on ServerResponse.prototype until writeHead (or
    // Express's res.status) sets them on the response.
    this.statusCode = 200
    this.statusMessage = undefined
    // The shard guard wraps writeHead per request (X-Chopper-Inflight); the
    // experiments' capacity model wraps end. Own properties from the start,
    // holding Node's own methods (Express's response defines neither).
    this.writeHead = http.ServerResponse.prototype.writeHead
    this.end = http.ServerResponse.prototype.end
  }
}

/** `http.createServer` options that make the server build these. */
const serverOptions = Object.freeze({ IncomingMessage: ChopperRequest, ServerResponse: ChopperResponse })

module.exports = { ChopperRequest, ChopperResponse, serverOptions, STATED_COST, SETTLE }
