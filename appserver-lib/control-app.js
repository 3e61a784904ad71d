'use strict'

const express = require('express')
const { jsonErrorHandler, notFound } = require('../core/http')
const { MalformedBodyError, InvalidArgumentError } = require('../core/errors')
const { verifyMiddleware, jsonWithRawBody } = require('../core/cluster-auth')
const { applyPush } = require('./push')

/**
 * The app server's control plane, on its own port: assignment pushes, load
 * reports, health and metrics. Nothing here is mounted on the data port.
 * With a `verifier` (core/cluster-auth.js: the cluster token is set) pushes
 * and load collection take signed calls only; the rest is read-only.
 */
function createControlApp ({ guard, registry, drainTimeoutMs = 1000, verifier = null, logger }) {
  const app = express()
  app.disable('x-powered-by')
  app.use(jsonWithRawBody('64mb')) // keeps the exact bytes, which the signature covers
  const signed = verifyMiddleware(verifier)
  const signedMap = verifyMiddleware(verifier, { maps: true })

  // The body is a full map or a diff from the generation we hold (core/map-diff.js).
  app.put('/v1/assignment', signedMap, async (req, res, next) => {
    try {
      if (!req.is('application/json')) throw new MalformedBodyError('expected an application/json assignment body')
      const { status, body } = await applyPush(guard, req.body, { drainTimeoutMs, logger })
      res.status(status).json(body)
    } catch (err) {
      next(err)
    }
  })

  app.get('/v1/assignment', (req, res) => {
    res.json({ generation: guard.generation, assignment: guard.map ? guard.map.assignment : null })
  })

  // Not destructive: counts stay until the controller acknowledges the report
  // that carried them (?instance=&seq= of the last report it used).
  // An acknowledgement the controller cannot have sent (a repeated parameter,
  // a seq that is not a non-negative integer) is refused, not ignored.
  app.get('/v1/load', signed, (req, res) => {
    const { instance, seq } = req.query
    if ((instance !== undefined && typeof instance !== 'string') || (seq !== undefined && (typeof seq !== 'string' || !/^\d{1,15}$/.test(seq)))) {
      throw new InvalidArgumentError('invalid load acknowledgement: expected ?instance=<id>&seq=<non-negative integer>, each at most once')
    }
    res.json(guard.report({ instance, seq: seq === undefined ? undefined : Number(seq) }))
  })

  app.get('/healthz', (req, res) => {
    res.json({ ok: true, serverId: guard.serverId, generation: guard.generation, drainedGeneration: guard.drainedGeneration, consistency: guard.consistency, leaseValid: guard.leasesEnforced ? guard.leaseValid() : null })
  })

  app.get('/metrics', async (req, res, next) => {
    try {
      res.set('Content-Type', registry.contentType).send(await registry.metrics())
    } catch (err) {
      next(err)
    }
  })

  app.use(notFound(), jsonErrorHandler(logger))
  return app
}

module.exports = { createControlApp }
