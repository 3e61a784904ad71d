'use strict'

const net = require('node:net')

const { statusOf, toHttpBody, NotFoundError } = require('./errors')

/**
 * Express fallback for a request no route took: a JSON 404 through the error
 * handler (Express's own answer is an HTML page). Mount it after the routes,
 * before jsonErrorHandler.
 */
function notFound () {
  return function notFoundHandler (req, res, next) {
    next(new NotFoundError(`no route for ${req.method} ${req.path}`))
  }
}

/**
 * Express error handler: every error becomes `{ error: { code, message } }`
 * with its status; 5xx are logged.
 */
function jsonErrorHandler (logger) {
  return function errorHandler (err, req, res, next) {
    const status = statusOf(err)
    if (status >= 500) logger.error({ err, path: req.path }, 'request failed')
    if (res.headersSent) return res.destroy(err)
    res.status(status).json(toHttpBody(err))
  }
}

/** Listen on host:port; resolves with the bound port (use port 0 in tests). */
function listen (server, port, host, { backlog = 511 } = {}) {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen({ port, host, backlog }, () => {
      server.off('error', reject)
      resolve(server.address().port)
    })
  })
}

/**
 * A port that was free a moment ago, for children that cannot listen on port 0
 * themselves (redis-server, haproxy). Callers must handle EADDRINUSE races.
 */
async function freePort (host = '127.0.0.1') {
  const [port] = await freePorts(1, host)
  return port
}

/**
 * `count` distinct ports that were free a moment ago: every probe stays bound
 * until all are, so no two answers can be the same port (consecutive
 * freePort() calls can be, since each closes its probe before answering).
 * Callers must still handle EADDRINUSE races with other processes.
 * @param {number} count
 * @param {string} [host]
 * @returns {Promise<number[]>}
 */
async function freePorts (count, host = '127.0.0.1') {
  const probes = []
  try {
    for (let i = 0; i < count; i++) {
      const s = net.createServer()
      s.unref()
      probes.push(s)
      await new Promise((resolve, reject) => {
        s.once('error', reject)
        s.listen(0, host, resolve)
      })
    }
    return probes.map((s) => s.address().port)
  } finally {
    await Promise.all(probes.map((s) => new Promise((resolve) => (s.listening ? s.close(() => resolve()) : resolve()))))
  }
}

// How often close() drops the keep-alive sockets that have become idle since it began.
const CLOSE_SWEEP_MS = 20

/**
 * Close a server, also dropping idle keep-alive sockets so close() resolves
 * promptly. Node's server.close() drops only the sockets idle at that moment:
 * one serving a request then stays open after its answer, and a client that
 * keeps using it (a member renewing its lease every 150 ms) kept it open for
 * good, so the close never ended (seen in test/integration/controller-ha.test.js,
 * about 1 run in 30). Requests in flight still finish: a socket is dropped only
 * while idle, checked every CLOSE_SWEEP_MS until the server has closed.
 */
function close (server) {
  return new Promise((resolve) => {
    if (!server || !server.listening) return resolve()
    let sweep = null
    server.close(() => {
      if (sweep !== null) clearInterval(sweep)
      resolve()
    })
    if (server.closeIdleConnections) {
      server.closeIdleConnections()
      sweep = setInterval(() => server.closeIdleConnections(), CLOSE_SWEEP_MS)
      sweep.unref()
    }
  })
}

/**
 * An app server's answer header meaning: not applied, and a newer map decides
 * (kv-cache: a replica it must hold is unreachable until the controller drops
 * it). A front end treats such an answer like a 421: it waits (bounded) for a
 * newer map and retries, when the request can be replayed.
 */
const RETRY_NEWER_MAP = Object.freeze({ name: 'x-chopper-retry', value: 'newer-map' })

/**
 * The header of a 421 CHOPPER_ERR_NOT_OWNER that names, from the refusing
 * server's own map (the generation in X-Chopper-Generation), the key's
 * servers: ids only, primary first, comma-separated. A router whose own map
 * is older and that cannot get a newer one tries the named server
 * (core/key-router.js), whose shard guard decides admission itself.
 */
const OWNER_HINT = 'x-chopper-owner'

module.exports = { RETRY_NEWER_MAP, OWNER_HINT, jsonErrorHandler, notFound, listen, close, freePort, freePorts }
