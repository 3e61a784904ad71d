'use strict'

/**
 * Many real appserver-lib members (createAppServer with a trivial Express
 * app) in one process, for bench/control-plane.js's real-member row.
 * Messages: start { controllerUrl, clusterToken, ids, root? } starts them all
 * at once and answers at once (root: the checkout whose appserver-lib/ to
 * load, default this one); held { generation }; stats; close.
 *
 * The servers' logger only counts what the bench needs: renewals the
 * controller answered "unknown member" (LeaseKeeper re-registers then).
 */
const path = require('node:path')
const express = require('express')
const { serveChild } = require('./child')
const { ProcessWindow } = require('./control-plane-window')

const servers = []
const window = new ProcessWindow()
const counts = { started: 0, failed: 0, notFound: 0, warnings: 0, errors: 0, firstError: null }

/** A pino-shaped logger that counts (appserver-lib calls child, debug, info, warn, error). */
const logger = {
  child () { return logger },
  trace () {},
  debug () {},
  info () {},
  warn (obj, msg) {
    counts.warnings++
    if (typeof msg === 'string' && msg.includes('does not know this server')) counts.notFound++
    if (typeof obj === 'string' && obj.includes('does not know this server')) counts.notFound++
  },
  error (obj, msg) {
    counts.errors++
    if (counts.firstError === null) counts.firstError = typeof msg === 'string' ? msg : String(obj)
  },
  fatal () {}
}

function helloApp () {
  const router = express.Router()
  router.get('/hello', (req, res) => res.json({ ok: true }))
  return router
}

serveChild({
  start ({ controllerUrl, clusterToken, ids, root = path.join(__dirname, '..', '..') }) {
    const { createAppServer } = require(path.join(root, 'appserver-lib', 'index.js'))
    for (const id of ids) {
      const s = createAppServer({ id, app: helloApp(), controllerUrl, clusterToken, logger, registerTimeoutMs: 120000 })
      servers.push(s)
      s.start().then(() => { counts.started++ }, (err) => {
        counts.failed++
        if (counts.firstError === null) counts.firstError = err.message
      })
    }
    return { pid: process.pid, starting: ids.length }
  },

  held ({ generation }) {
    let holding = 0
    let registered = 0
    for (const s of servers) {
      // What it must hold: the current generation below largeClusterAt targets (each is pushed every
      // one), else the last that changed its slices, which its live lease proves (applyLease).
      if (s.guard.generation >= generation || (s.guard.generation > 0 && s.guard.leaseValid())) holding++
      if (s.leases && !s.leases.stopped) registered++ // LeaseKeeper starts once registered
    }
    return { servers: servers.length, registered, holding }
  },

  stats () {
    let renewals = 0
    let renewalFailures = 0
    for (const s of servers) {
      if (!s.leases) continue
      renewals += s.leases.stats.renewals
      renewalFailures += s.leases.stats.failures
    }
    return { pid: process.pid, ...counts, renewals, renewalFailures, process: window.read() }
  },

  async close () {
    // No deregistration storm: the controller is closed first; members only stop.
    await Promise.all(servers.map((s) => {
      if (s.leases) s.leases.stop()
      s.listeners.data.closeAllConnections()
      s.listeners.control.closeAllConnections()
      return Promise.all([
        new Promise((resolve) => s.listeners.data.close(() => resolve())),
        new Promise((resolve) => s.listeners.control.close(() => resolve()))
      ])
    }))
    window.close()
    return { closed: true }
  }
})
