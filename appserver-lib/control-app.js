'use strict'

const express = require('express')
const { jsonErrorHandler } = require('../core/http')
const { MalformedBodyError } = require('../core/errors')

/**
 * The app server's control plane, on its own port: assignment pushes, load
 * reports, health and metrics. Nothing here is mounted on the data port.
 */
function createControlApp ({ guard, registry, logger }) {
  const app = express()
  app.disable('x-powered-by')
  app.use(express.json({ limit: '64mb' }))

  app.put('/v1/assignment', async (req, res, next) => {
    try {
      if (!req.is('application/json')) throw new MalformedBodyError('expected an application/json assignment body')
      const { changed, hooks } = guard.setAssignment(req.body)
      try {
        await hooks
      } catch (err) {
        // The map is installed; a failed hook is the app's to report.
        return res.status(200).json({ accepted: true, changed, generation: guard.generation, hookError: err.message })
      }
      res.json({ accepted: true, changed, generation: guard.generation })
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

  app.get('/v1/load', (req, res) => {
    res.json(guard.report())
  })

  app.get('/healthz', (req, res) => {
    res.json({ ok: true, serverId: guard.serverId, generation: guard.generation })
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
