'use strict'

const path = require('node:path')
const express = require('express')

const PUBLIC = path.join(__dirname, 'public')

// Everything the page loads comes from this controller: no CDN, no inline
// script, so a strict policy costs nothing. `data:` is for the blank favicon.
const PAGE_HEADERS = Object.freeze({
  'Content-Security-Policy': "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-cache'
})

/**
 * The dashboard's routes, mounted on the controller's control-plane app (the
 * same listener and access rules as the rest of the control port):
 *   GET /                 302 to /dashboard
 *   GET /dashboard        the page; GET /dashboard/<file> its static assets
 *   GET /v1/events        Server-Sent Events: `snapshot` first, then `round` and `state`
 * @param {{ hub: import('./sse-hub').SseHub, snapshot: () => object }} options
 * @returns {import('express').Router}
 */
function dashboardRoutes ({ hub, snapshot }) {
  const router = express.Router()
  router.get('/', (req, res) => res.redirect(302, '/dashboard'))
  router.get(['/dashboard', '/dashboard/'], (req, res, next) => {
    res.set(PAGE_HEADERS).sendFile(path.join(PUBLIC, 'index.html'), (err) => err && next(err))
  })
  router.use('/dashboard', express.static(PUBLIC, { index: false, redirect: false, setHeaders: (res) => res.set(PAGE_HEADERS) }))
  router.get('/v1/events', (req, res) => hub.accept(req, res, () => [{ event: 'snapshot', data: snapshot() }]))
  return router
}

module.exports = { dashboardRoutes }
