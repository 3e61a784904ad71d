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
function listen (server, port, host) {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve(server.address().port)
    })
  })
}

/**
 * A port that was free a moment ago, for children that cannot listen on port 0
 * themselves (redis-server, haproxy). Callers must handle EADDRINUSE races.
 */
function freePort (host = '127.0.0.1') {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.unref()
    s.once('error', reject)
    s.listen(0, host, () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

/** Close a server, also dropping idle keep-alive sockets so close() resolves promptly. */
function close (server) {
  return new Promise((resolve) => {
    if (!server || !server.listening) return resolve()
    server.close(() => resolve())
    if (server.closeIdleConnections) server.closeIdleConnections()
  })
}

/**
 * An app server's answer header meaning: not applied, and a newer map decides
 * (kv-cache: a replica it must hold is unreachable until the controller drops
 * it). A front end treats such an answer like a 421: it waits (bounded) for a
 * newer map and retries, when the request can be replayed.
 */
const RETRY_NEWER_MAP = Object.freeze({ name: 'x-chopper-retry', value: 'newer-map' })

module.exports = { RETRY_NEWER_MAP, jsonErrorHandler, notFound, listen, close, freePort }
