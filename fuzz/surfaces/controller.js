'use strict'

const fc = require('fast-check')
const {
  KEYSPACE, DELETE, badCounter, implausibleCounter, badId, badUrl, badSegment, jsonJunk, deepValue,
  noiseHeaders, jsonRequestBody, withFault, text
} = require('../arbitraries')
const { unknownRoutes } = require('./routes')

/**
 * The controller's API with malformed calls. Valid payloads appear only with
 * a wrong encoding (a content type the route does not parse, spoiled JSON),
 * so no call here may register, move or remove anything.
 *
 * ctx: { knownServer, knownServers, knownFrontend }
 */

const HUGE = 1024 * 1024 + 16 // past the controller's 1 MB body limit

const goodId = fc.stringMatching(/^[A-Za-z0-9._-]{1,20}$/).map((s) => 'fz-' + s)
const goodUrl = fc.integer({ min: 1, max: 65535 }).map((p) => `http://127.0.0.1:${p}`)
const goodGeneration = fc.integer({ min: 0, max: 1000 })

function post (origin, path, bodyArb, method = 'POST') {
  return fc.tuple(bodyArb, noiseHeaders()).map(([b, noise]) => ({
    origin, method, path, headers: { ...noise, ...b.headers }, body: b.body, chunked: b.chunked
  }))
}

/** A record where one field (picked from `faults`) is replaced by a bad value. */
function oneFault (valid, faults) {
  return fc.tuple(valid, fc.constantFrom(...Object.keys(faults))).chain(([v, field]) => faults[field](v, field))
}

/** Registration bodies, right and wrong (one field bad, or not an object). */
function serverPayloads () {
  const valid = fc.record({ id: goodId, url: goodUrl, controlUrl: goodUrl, generation: goodGeneration })
    .filter((b) => b.url !== b.controlUrl)
  const faulty = fc.oneof(
    oneFault(valid, {
      id: (v) => withFault(v, 'id', fc.oneof(badId, deepValue, fc.constant(DELETE))),
      url: (v) => withFault(v, 'url', fc.oneof(badUrl, fc.constant(DELETE))),
      controlUrl: (v) => withFault(v, 'controlUrl', fc.oneof(badUrl, fc.constant(DELETE))),
      sameUrl: (v) => fc.constant({ ...v, controlUrl: v.url }),
      generation: (v) => withFault(v, 'generation', fc.oneof(badCounter, implausibleCounter))
    }),
    jsonJunk.filter((v) => v === null || typeof v !== 'object' || Array.isArray(v))
  )
  return { valid, faulty }
}

function registerServer (origin) {
  return post(origin, '/v1/servers', jsonRequestBody({ ...serverPayloads(), hugeBytes: HUGE }))
}

function frontendPayloads () {
  const valid = fc.record({ id: goodId, controlUrl: goodUrl, generation: goodGeneration })
  const faulty = fc.oneof(
    oneFault(valid, {
      id: (v) => withFault(v, 'id', fc.oneof(badId, fc.constant(DELETE))),
      controlUrl: (v) => withFault(v, 'controlUrl', fc.oneof(badUrl, deepValue, fc.constant(DELETE))),
      generation: (v) => withFault(v, 'generation', fc.oneof(badCounter, implausibleCounter))
    }),
    jsonJunk.filter((v) => v === null || typeof v !== 'object' || Array.isArray(v))
  )
  return { valid, faulty }
}

function registerFrontend (origin) {
  return post(origin, '/v1/frontends', jsonRequestBody({ ...frontendPayloads(), hugeBytes: HUGE }))
}

/** An id segment no member has: unknown, malformed, or percent-encoded junk. */
function strangerSegment (ctx) {
  const taken = new Set([...ctx.knownServers, ctx.knownFrontend].map((s) => s.toLowerCase()))
  return fc.oneof(badSegment, goodId.map(encodeURIComponent)).filter((s) => {
    let d = s
    try { d = decodeURIComponent(s) } catch {}
    return !taken.has(d.toLowerCase())
  })
}

function leasePayloads () {
  const valid = fc.record({ generation: goodGeneration, drainedGeneration: goodGeneration })
  const faulty = fc.oneof(
    oneFault(valid, {
      generation: (v) => withFault(v, 'generation', fc.oneof(badCounter, fc.constant(DELETE))),
      drainedGeneration: (v) => withFault(v, 'drainedGeneration', fc.oneof(badCounter, fc.constant(DELETE)))
    }),
    jsonJunk.filter((v) => v === null || typeof v !== 'object' || Array.isArray(v))
  )
  return { valid, faulty }
}

function lease (origin, ctx) {
  const { valid, faulty } = leasePayloads()
  const body = jsonRequestBody({ valid, faulty, hugeBytes: HUGE })
  return fc.oneof(
    // a member the controller knows, with a malformed renewal
    post(origin, `/v1/servers/${ctx.knownServer}/lease`, body),
    // a member it does not know, with anything
    fc.tuple(strangerSegment(ctx), fc.oneof(body, jsonRequestBody({ valid, faulty: valid, hugeBytes: HUGE })), noiseHeaders())
      .map(([id, b, noise]) => ({ origin, method: 'POST', path: `/v1/servers/${id}/lease`, headers: { ...noise, ...b.headers }, body: b.body, chunked: b.chunked }))
  )
}

function strangers (origin, ctx) {
  return fc.tuple(strangerSegment(ctx), fc.constantFrom(
    ['POST', (id) => `/v1/servers/${id}/drain`],
    ['DELETE', (id) => `/v1/servers/${id}`],
    ['DELETE', (id) => `/v1/frontends/${id}`]
  ), noiseHeaders(), fc.option(text(30), { nil: undefined })).map(([id, [method, path], headers, body]) => ({ origin, method, path: path(id), headers, body }))
}

function movePayloads (ctx) {
  const to = fc.constantFrom(...ctx.knownServers)
  const valid = fc.oneof(
    fc.record({ key: text(20).filter((s) => s.length > 0), to }),
    fc.record({ sliceKey: fc.integer({ min: 0, max: KEYSPACE - 1 }), to, wait: fc.boolean() })
  )
  const badTo = fc.oneof(
    text(12).filter((s) => !ctx.knownServers.includes(s)),
    jsonJunk.filter((v) => typeof v !== 'string'),
    deepValue,
    fc.constant(DELETE)
  )
  const faulty = fc.oneof(
    valid.chain((v) => withFault(v, 'to', badTo)),
    fc.record({ key: fc.oneof(fc.constant(''), jsonJunk.filter((v) => typeof v !== 'string'), deepValue), to }),
    fc.record({ sliceKey: fc.oneof(badCounter, fc.constantFrom(KEYSPACE, KEYSPACE + 1, 2 ** 40)), to }),
    fc.record({ key: text(5).filter((s) => s.length > 0), sliceKey: fc.nat(), to }), // both
    fc.record({ to }), // neither
    fc.record({ key: text(5).filter((s) => s.length > 0), to, wait: jsonJunk.filter((v) => typeof v !== 'boolean') }),
    jsonJunk.filter((v) => v === null || typeof v !== 'object' || Array.isArray(v))
  )
  return { valid, faulty }
}

function move (origin, ctx) {
  return post(origin, '/v1/move', jsonRequestBody({ ...movePayloads(ctx), hugeBytes: HUGE }))
}

/**
 * The signed routes with every kind of bad signature (fuzz/auth.js), the
 * payload right or wrong: real registrations, moves, drains and removals of
 * known members among them, which must all be refused (401/403).
 */
function controllerSignedRoutes (ctx) {
  // No payload to get wrong: never replayed (a signed drain or removal would act).
  const empty = { valid: fc.constant({}), faulty: null }
  return [
    { origin: 'control', method: 'POST', path: '/v1/servers', ...serverPayloads() },
    { origin: 'control', method: 'POST', path: '/v1/frontends', ...frontendPayloads() },
    { origin: 'control', method: 'POST', path: `/v1/servers/${ctx.knownServer}/lease`, ...leasePayloads() },
    { origin: 'control', method: 'POST', path: '/v1/move', ...movePayloads(ctx) },
    { origin: 'control', method: 'POST', path: `/v1/servers/${ctx.knownServers[1]}/drain`, ...empty },
    { origin: 'control', method: 'DELETE', path: `/v1/servers/${ctx.knownServers[1]}`, ...empty, noBody: true },
    { origin: 'control', method: 'DELETE', path: `/v1/frontends/${ctx.knownFrontend}`, ...empty, noBody: true },
    { origin: 'control', method: 'GET', path: '/v1/assignment', ...empty, noBody: true }
  ]
}

const KNOWN = [
  { path: /^\/$/, methods: ['GET'] },
  { path: /^\/dashboard(\/.*)?$/, methods: ['GET'] },
  { path: /^\/v1\/events$/, methods: ['GET'] },
  { path: /^\/v1\/status$/, methods: ['GET'] },
  { path: /^\/healthz$/, methods: ['GET'] },
  { path: /^\/metrics$/, methods: ['GET'] },
  { path: /^\/v1\/assignment$/, methods: ['GET'] },
  { path: /^\/v1\/servers$/, methods: ['POST'] },
  { path: /^\/v1\/servers\/[^/]+\/lease$/, methods: ['POST'] },
  { path: /^\/v1\/servers\/[^/]+\/drain$/, methods: ['POST'] },
  { path: /^\/v1\/servers\/[^/]+$/, methods: ['DELETE'] },
  { path: /^\/v1\/frontends$/, methods: ['POST'] },
  { path: /^\/v1\/frontends\/[^/]+$/, methods: ['DELETE'] },
  { path: /^\/v1\/move$/, methods: ['POST'] }
]

/** @returns {{ name: string, request: fc.Arbitrary<object> }[]} */
function controllerSurfaces (ctx) {
  return [
    { name: 'POST /v1/servers', request: registerServer('control') },
    { name: 'POST /v1/frontends', request: registerFrontend('control') },
    { name: 'POST /v1/servers/:id/lease', request: lease('control', ctx) },
    { name: 'drain, DELETE of unknown members', request: strangers('control', ctx) },
    { name: 'POST /v1/move', request: move('control', ctx) },
    { name: 'unknown routes and methods', request: unknownRoutes({ origin: 'control', known: KNOWN }) }
  ]
}

module.exports = { controllerSurfaces, controllerSignedRoutes, KNOWN }
