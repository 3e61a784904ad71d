'use strict'

const http = require('node:http')
const express = require('express')
const { ControllerClient } = require('../core/controller-client')
const { Membership } = require('../core/membership')
const { jsonErrorHandler, notFound, listen, close } = require('../core/http')
const { MalformedBodyError } = require('../core/errors')
const { RequestVerifier, verifyMiddleware, jsonWithRawBody, validateToken, warnUnauthenticated } = require('../core/cluster-auth')

/**
 * A front end's side of the control plane: the control listener (assignment
 * pushes, `GET /v1/assignment`, health) and membership with the controller
 * (register, re-register and pull every `pullIntervalMs`, deregister). Both a
 * single front end and the primary of a node:cluster front end
 * (frontend/cluster.js) use it; pushes land in `table`. With a
 * `clusterToken` (docs/security.md) its calls to the controller are signed
 * and pushes must be; the read-only routes stay open.
 */
function createControlPlane ({ id, table, controllerUrl, host, controlPort, advertiseHost, pullIntervalMs, registerTimeoutMs, metrics, clusterToken, logger }) {
  if (validateToken(clusterToken) === undefined) warnUnauthenticated(logger)
  const client = controllerUrl ? new ControllerClient({ controllerUrl, clusterToken }) : null
  const control = express()
  control.disable('x-powered-by')
  control.use(jsonWithRawBody('64mb')) // keeps the exact bytes, which the signature covers
  const signed = verifyMiddleware(clusterToken === undefined ? null : new RequestVerifier({ token: clusterToken }))
  control.put('/v1/assignment', signed, (req, res) => {
    if (!req.is('application/json')) throw new MalformedBodyError('expected an application/json assignment body')
    const changed = table.set(req.body)
    res.json({ accepted: true, changed, generation: table.generation })
  })
  control.get('/v1/assignment', (req, res) => res.json({ generation: table.generation, assignment: table.map ? table.map.assignment : null }))
  control.get('/healthz', (req, res) => res.json({ ok: true, frontendId: id, generation: table.generation }))
  if (metrics) {
    control.get('/metrics', async (req, res) => {
      res.set('Content-Type', metrics.contentType).send(await metrics.text())
    })
  }
  control.use(notFound(), jsonErrorHandler(logger))
  const server = http.createServer(control)
  let membership = null
  let controlUrl = null

  function install (body) {
    if (!body || !body.assignment) return
    try {
      // A newer generation only; a controller that restarted from generation 1 is caught up by pushes.
      if (body.assignment.generation > table.generation) table.set(body.assignment)
    } catch (err) {
      logger.warn({ err: { code: err.code, message: err.message } }, 'assignment from the controller rejected')
    }
  }

  return {
    client,
    async start () {
      const port = await listen(server, controlPort, host)
      controlUrl = `http://${advertiseHost}:${port}`
      if (client) {
        membership = new Membership({
          register: () => client.registerFrontend({ id, controlUrl, generation: table.generation }),
          deregister: () => client.deregisterFrontend(id),
          install,
          registerTimeoutMs,
          reregisterMs: pullIntervalMs,
          what: `front end ${id}`,
          logger
        })
        await membership.start()
      }
      return controlUrl
    },
    async close () {
      if (membership) await membership.stop()
      await close(server)
      if (client) await client.close()
    }
  }
}

module.exports = { createControlPlane }
