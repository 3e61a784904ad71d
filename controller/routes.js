'use strict'

const express = require('express')
const { KEYSPACE_SIZE, sliceKey } = require('../core/keyspace')
const { jsonErrorHandler, notFound } = require('../core/http')
const { InvalidArgumentError, NoAssignmentError, UnknownServerError, NotLeaderError, MalformedBodyError, PayloadTooLargeError, statusOf, toHttpBody } = require('../core/errors')
const { RequestVerifier, verifyMiddleware, jsonWithRawBody, readVerifier } = require('../core/cluster-auth')
const { dashboardRoutes } = require('./dashboard/routes')
const { ID } = require('./options')
const { createMemberCalls, encode, URL_RE } = require('./member-calls')
const { createLeaseStreams } = require('./lease-streams')

const RENEWAL = /^\/v1\/servers\/([A-Za-z0-9._-]{1,128})\/lease$/
const MAX_BODY = 1024 * 1024 // as Express's parser on the other routes
const JSON_TYPE = /^application\/json\s*(;\s*charset="?utf-8"?\s*)?$/i

const bad = (msg) => { throw new InvalidArgumentError(msg) }

/**
 * The controller's HTTP API over the shared state `c` (docs/control-plane.md).
 * Returns the request listener and the lease streams (the 'upgrade'
 * listener, controller/lease-streams.js). Lease renewals over HTTP, and
 * registrations, are answered before Express, by `fast`; everything else
 * goes to the Express app.
 */
function createRoutes (c) {
  const verifier = c.opts.clusterToken === undefined ? null : new RequestVerifier({ token: c.opts.clusterToken })
  const { register, renew, mapFor } = createMemberCalls(c)
  const app = express()
  app.disable('x-powered-by')
  app.use(jsonWithRawBody('1mb')) // keeps the exact bytes, which the signature covers

  // Only the leader answers members and operators' changes; a standby names
  // the leader it last saw (X-Chopper-Leader), and members move to it.
  const memberRoutes = ['/v1/servers', '/v1/frontends', '/v1/move', '/v1/assignment']
  app.use(memberRoutes, (req, res, next) => {
    if (c.leading()) return next()
    const leader = c.election && c.election.leader && c.election.leader.url !== c.url ? c.election.leader.url : null
    if (leader) res.set('X-Chopper-Leader', leader)
    // Expected while members find the leader: counted and logged at debug, without a stack.
    const err = new NotLeaderError(`controller ${c.controllerId} is a standby${leader ? `; the leader is ${leader}` : ''}`)
    c.m.standbyRefusals.inc()
    c.log.debug({ code: err.code, path: req.path, leader }, 'standby refused a member call')
    res.status(err.status).json(toHttpBody(err))
  })
  // With a cluster token, the member and operator routes (every change, and
  // the assignment) take signed calls only; status, health, metrics and the
  // dashboard stay open, read-only (docs/security.md). A client's read
  // credential reads the assignment (GET) and nothing else.
  app.use(memberRoutes, verifyMiddleware(verifier, { reads: readVerifier(c.opts.clusterToken) }))
  app.post('/v1/servers', (req, res) => {
    sendJson(res.status(201), ...register(req.body))
  })
  app.post('/v1/servers/:id/lease', (req, res) => {
    sendJson(res, ...renew(req.params.id, req.body))
  })
  app.post('/v1/servers/:id/drain', (req, res) => {
    const id = req.params.id
    if (!c.servers.has(id)) throw new UnknownServerError(`unknown app server ${id}`)
    c.drainServer(id)
    res.json({ draining: id, generation: c.assignment ? c.assignment.generation : 0 })
  })
  app.post('/v1/move', async (req, res) => {
    const { key, sliceKey: sk, to, wait = false } = req.body || {}
    if (key !== undefined && (typeof key !== 'string' || key.length === 0)) bad('invalid key: expected a non-empty string')
    if (sk !== undefined && (!Number.isInteger(sk) || sk < 0 || sk >= KEYSPACE_SIZE)) bad('invalid sliceKey: expected an integer in [0, 2^32)')
    if ((key === undefined) === (sk === undefined)) bad('pass exactly one of key and sliceKey')
    if (typeof wait !== 'boolean') bad('invalid wait: expected a boolean')
    const out = c.moveSlice(key !== undefined ? sliceKey(key) : sk, to)
    if (wait) await c.settled(Math.max(5000, 4 * c.opts.leaseMs))
    res.json({ ...out, generation: c.assignment ? c.assignment.generation : 0, settled: c.target === null })
  })
  app.delete('/v1/servers/:id', (req, res) => {
    if (!c.removeServer(req.params.id, 'leave')) throw new UnknownServerError(`unknown app server ${req.params.id}`)
    c.failureCounts.delete(req.params.id) // a graceful leave: a later process with this id starts afresh
    res.json({ removed: req.params.id, generation: c.assignment ? c.assignment.generation : 0 })
  })
  app.post('/v1/frontends', (req, res) => {
    const { id, controlUrl, generation = 0 } = req.body || {}
    if (typeof id !== 'string' || !ID.test(id)) bad('invalid id: expected 1-128 characters of [A-Za-z0-9._-]')
    if (typeof controlUrl !== 'string' || !URL_RE.test(controlUrl)) bad('invalid controlUrl: expected http(s)://host:port')
    if (!Number.isSafeInteger(generation) || generation < 0) bad('invalid generation: expected a non-negative integer')
    c.noteGeneration(generation)
    c.addFrontend(id, controlUrl)
    // A front end routes with the map: it gets it here when behind, whatever its size.
    sendJson(res.status(201), {}, mapFor(generation, Infinity))
  })
  app.delete('/v1/frontends/:id', (req, res) => {
    if (!c.removeFrontend(req.params.id)) throw new UnknownServerError(`unknown front end ${req.params.id}`)
    res.json({ removed: req.params.id })
  })
  // ?since=g: a diff from generation g when the controller still has it (core/map-diff.js).
  app.get('/v1/assignment', (req, res) => {
    if (!c.published) throw new NoAssignmentError('no assignment: no app server has registered')
    const since = typeof req.query.since === 'string' && /^\d{1,16}$/.test(req.query.since) ? Number(req.query.since) : 0
    if (since > 0 && since < c.published.generation) {
      const b = c.pusher.bodyFor(since)
      return res.type('json').send(b.raw)
    }
    res.json(c.published)
  })
  app.get('/v1/status', (req, res) => res.json(c.status()))
  app.get('/healthz', (req, res) => res.json({ ok: true, generation: c.assignment ? c.assignment.generation : 0 }))
  app.get('/metrics', async (req, res) => {
    res.set('Content-Type', c.registry.contentType).send(await c.registry.metrics())
  })
  app.use(dashboardRoutes({ hub: c.events, snapshot: c.dashboardSnapshot }))
  app.use(notFound(), jsonErrorHandler(c.log))

  /**
   * The calls every member makes, renewals all the time and registrations in
   * a join storm, without Express: read (at most 1 MB, as Express would), verify, answer.
   * Returns false to leave the request to Express (a standby's answer, and
   * everything else).
   */
  function fast (req, res) {
    let handle
    let status = 200
    if (req.url === '/v1/servers') {
      handle = register
      status = 201
    } else {
      const m = RENEWAL.exec(req.url)
      if (m) handle = (body) => renew(m[1], body)
    }
    // Anything but a plain JSON body (another type, a content-encoding) goes to Express, which refuses it as before.
    const type = req.headers['content-type']
    const encoding = req.headers['content-encoding']
    if (!handle || !c.leading() || typeof type !== 'string' || !JSON_TYPE.test(type) || (encoding !== undefined && encoding !== 'identity')) return false
    const chunks = []
    let size = 0
    req.on('data', (b) => {
      size += b.length
      if (size <= MAX_BODY) chunks.push(b)
    })
    req.on('end', () => {
      try {
        if (size > MAX_BODY) throw new PayloadTooLargeError('request body over 1 MB')
        const raw = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)
        if (verifier) verifier.verify({ method: 'POST', path: req.url, headers: req.headers, rawBody: raw })
        let body
        try {
          body = JSON.parse(raw.toString('utf8'))
        } catch {
          throw new MalformedBodyError('expected a JSON body')
        }
        const [fields, map] = handle(body)
        writeJson(res, status, fields, map)
      } catch (err) {
        const code = statusOf(err)
        if (code >= 500) c.log.error({ err, url: req.url }, 'member call failed')
        writeJson(res, code, toHttpBody(err), null)
      }
    })
    return true
  }

  function listener (req, res) {
    if (req.method === 'POST' && fast(req, res)) return
    app(req, res)
  }
  return { listener, streams: createLeaseStreams(c, { verifier, renew, register }) }
}

function sendJson (res, fields, map) {
  res.type('json').send(encode(fields, map))
}

function writeJson (res, status, fields, map) {
  const body = encode(fields, map)
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length })
  res.end(body)
}

module.exports = { createRoutes }
