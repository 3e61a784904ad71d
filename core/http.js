'use strict'

const { statusOf, toHttpBody } = require('./errors')

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

/** Close a server, also dropping idle keep-alive sockets so close() resolves promptly. */
function close (server) {
  return new Promise((resolve) => {
    if (!server || !server.listening) return resolve()
    server.close(() => resolve())
    if (server.closeIdleConnections) server.closeIdleConnections()
  })
}

module.exports = { jsonErrorHandler, listen, close }
