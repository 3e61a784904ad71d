'use strict'

const express = require('express')
const { jsonErrorHandler } = require('../core/http')
const { MalformedBodyError } = require('../core/errors')

/**
 * The app server's control plane, on its own port: assignment pushes, load
 * reports, health and metrics. Nothing here is mounted on the data port.
 */
function createControlApp ({ guard, registry, drainTimeoutMs = 1000, logger }) {
  const app = express()
  app.disable('x-powered-by')
  app.use(express.json({ limit: '64mb' }))

  app.put('/v1/assignment', async (req, res, next) => {
    try {
      if (!req.is('application/json')) throw new MalformedBodyError('expected an application/json assignment body')
      const { changed, hooks } = guard.setAssignment(req.body)
      let hookError
      try {
        await hooks
      } catch (err) {
        // The map is installed; a failed hook is the app's to report.
        hookError = err.message
      }
      // The acknowledgement of a revoke: answer once the requests admitted
      // under older maps finished (bounded; the controller falls back on the
      // lease when this times out), so the next owner starts after them.
      const drained = await guard.waitDrained(drainTimeoutMs)
      res.json({ accepted: true, changed, generation: guard.generation, drainedGeneration: guard.drainedGeneration, drained, ...(hookError ? { hookError } : {}) })
    } catch (err) {
      // A stale push is routine (registration can install a newer map first); anything else is not.
      const level = err.code === 'CHOPPER_ERR_STALE_GENERATION' ? 'debug' : 'warn'
      logger[level]({ err: { code: err.code, message: err.message } }, 'assignment push rejected')
      next(err)
    }
  })

  app.get('/v1/assignment', (req, res) => {
    res.json({ generation: guard.generation, assignment: guard.map ? guard.map.assignment : null })
  })

  // Not destructive: counts stay until the controller acknowledges the report
  // that carried them (?instance=&seq= of the last report it used).
  app.get('/v1/load', (req, res) => {
    const seq = Number(req.query.seq)
    const instance = typeof req.query.instance === 'string' ? req.query.instance : undefined
    res.json(guard.report({ instance, seq: Number.isSafeInteger(seq) ? seq : undefined }))
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

  app.use(jsonErrorHandler(logger))
  return app
}

module.exports = { createControlApp }
