'use strict'

const http = require('node:http')
const express = require('express')
const { ControllerClient } = require('../core/controller-client')
const { Membership } = require('../core/membership')
const { jsonErrorHandler, notFound, listen, close } = require('../core/http')
const { MalformedBodyError, toHttpBody } = require('../core/errors')
const { RequestVerifier, verifyMiddleware, jsonWithRawBody, validateToken, warnUnauthenticated } = require('../core/cluster-auth')
const { resolveMap, isDiff } = require('../core/map-diff')

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
  const signed = verifyMiddleware(clusterToken === undefined ? null : new RequestVerifier({ token: clusterToken }), { maps: true })
  // The body is a full map or a diff from the generation we hold (core/map-diff.js).
  control.put('/v1/assignment', signed, (req, res) => {
    if (!req.is('application/json')) throw new MalformedBodyError('expected an application/json assignment body')
    let changed
    try {
      changed = table.set(resolveMap(table.map && table.map.assignment, req.body))
    } catch (err) {
      if (err.code !== 'CHOPPER_ERR_DIFF_BASE') throw err
      return res.status(409).json({ ...toHttpBody(err), generation: table.generation })
    }
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

  /** A registration answer: the full map, or a diff from the generation we registered with, when we are behind. */
  function install (body) {
    const next = body && (body.assignment || body.diff)
    if (!next) return
    try {
      // A newer generation only; a controller that restarted from generation 1 is caught up by pushes.
      if (next.generation > table.generation) table.set(resolveMap(table.map && table.map.assignment, next))
    } catch (err) {
      // A diff from a generation we left meanwhile (a push came first): the next push or pull brings it.
      logger[isDiff(next) ? 'debug' : 'warn']({ err }, 'assignment from the controller rejected')
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
