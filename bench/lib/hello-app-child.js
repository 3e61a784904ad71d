'use strict'

// A trivial Express app (GET /hello?key=K answers a small JSON), for
// bench/appserver-overhead.js, in a process of its own: `start` with
// mode 'plain' (no shard guard), 'guarded' (createAppServer, consistency
// 'available', no controller; the parent pushes the assignment) or
// 'unshaped' (the same with Node's own request classes: requestShapes false).
const http = require('node:http')
const express = require('express')
const { createAppServer } = require('../../appserver-lib/index.js')
const { serverOptions: shapes } = require('../../appserver-lib/request-shapes')
const { jsonErrorHandler, listen } = require('../../core/http')
const { NotFoundError } = require('../../core/errors')
const { silent } = require('../../core/logger')
const { serveChild } = require('./child')

/** The app both variants serve: the same router, so only the guard differs. */
function helloRoutes () {
  const router = express.Router()
  router.get('/hello', (req, res) => res.json({ key: req.query.key, ok: true }))
  return router
}

const handlers = {
  /** CPU time this process has used so far, in µs (user + system). */
  cpu () {
    const { user, system } = process.cpuUsage()
    return user + system
  },
  async start ({ mode }) {
    if (mode === 'plain') {
      // What createAppServer builds, minus the shard guard (and its /healthz).
      const app = express()
      app.disable('x-powered-by')
      app.disable('etag')
      app.use(helloRoutes())
      app.use((req, res, next) => next(new NotFoundError(`no route for ${req.method} ${req.path}`)))
      app.use(jsonErrorHandler(silent))
      // The request shapes as createAppServer's data port has them, so that
      // the difference is the guard's own cost ('unshaped' prices the shapes).
      const server = http.createServer(shapes, app)
      const port = await listen(server, 0, '127.0.0.1')
      return { url: `http://127.0.0.1:${port}` }
    }
    if (mode === 'guarded' || mode === 'unshaped') {
      // unshaped: Node's own request and response classes (appserver-lib/request-shapes.js)
      const server = createAppServer({ id: 'app-1', app: helloRoutes(), requestShapes: mode === 'guarded' })
      return server.start()
    }
    throw new Error(`unknown mode ${JSON.stringify(mode)}: expected plain, guarded or unshaped`)
  }
}

serveChild(handlers)
