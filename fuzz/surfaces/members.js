'use strict'

const fc = require('fast-check')
const { noiseHeaders, jsonRequestBody, queryPair, text } = require('../arbitraries')
const { validAssignment, faultyAssignment } = require('../assignments')
const { unknownRoutes } = require('./routes')

/**
 * The control port of a member (app server or front end): malformed
 * assignment pushes, malformed load-report acknowledgements, and routes the
 * port does not have.
 *
 * ctx: { generation (installed), serverId }
 */

function pushPayloads (ctx) {
  const aCtx = { current: ctx.generation, extraIds: [ctx.serverId], hugeSlices: 20000 }
  return { valid: validAssignment(aCtx), faulty: faultyAssignment(aCtx) }
}

function push (origin, ctx) {
  const body = jsonRequestBody({ ...pushPayloads(ctx), hugeBytes: 2 * 1024 * 1024 })
  return fc.tuple(body, noiseHeaders()).map(([b, noise]) => ({
    origin, method: 'PUT', path: '/v1/assignment', headers: { ...noise, ...b.headers }, body: b.body, chunked: b.chunked
  }))
}

/** A `seq` that is not a non-negative safe integer, in query-string form. */
const badSeq = fc.oneof(
  fc.constantFrom('', 'abc', '-1', '1.5', '1e400', 'NaN', 'Infinity', '9007199254740993', '0x10', '%zz', '%C3%28', '1%00', '+'),
  text(8).map(encodeURIComponent).filter((s) => !/^\d{1,15}$/.test(decodeURIComponentSafe(s)))
)

function decodeURIComponentSafe (s) {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '))
  } catch {
    return s
  }
}

/** `GET /v1/load` with an acknowledgement that cannot be one: a bad seq, or a parameter given twice. */
function load (origin) {
  return fc.tuple(
    fc.oneof(
      badSeq.map((s) => [`seq=${s}`, 'instance=abc']),
      badSeq.map((s) => [`seq=${s}`]),
      fc.constant(['seq=1', 'seq=2', 'instance=abc']),
      fc.constant(['seq=1', 'instance=a', 'instance=b']),
      fc.constant(['seq[]=1', 'instance=a', 'seq=x'])
    ),
    fc.array(queryPair.filter((p) => !/^(seq|instance)(=|$)/.test(p)), { maxLength: 2 }),
    noiseHeaders()
  ).map(([ack, other, headers]) => ({ origin, method: 'GET', path: `/v1/load?${[...other, ...ack].join('&')}`, headers }))
}

const KNOWN = [
  { path: /^\/v1\/assignment$/, methods: ['GET', 'PUT'] },
  { path: /^\/v1\/load$/, methods: ['GET'] },
  { path: /^\/healthz$/, methods: ['GET'] },
  { path: /^\/metrics$/, methods: ['GET'] }
]

/**
 * @param {object} ctx
 * @param {{ load?: boolean }} [options] load: the port serves load reports (app servers)
 */
function memberControlSurfaces (ctx, { load: withLoad = true } = {}) {
  const out = [
    { name: 'PUT /v1/assignment', request: push('control', ctx) },
    { name: 'control: unknown routes and methods', request: unknownRoutes({ origin: 'control', known: withLoad ? KNOWN : KNOWN.filter((r) => !r.path.test('/v1/load')) }) }
  ]
  if (withLoad) out.push({ name: 'GET /v1/load', request: load('control') })
  return out
}

/** The member's routes that take signed calls only (fuzz/surfaces/auth.js). */
function memberSignedRoutes (ctx, { load: withLoad = true } = {}) {
  const routes = [{ origin: 'control', method: 'PUT', path: '/v1/assignment', ...pushPayloads(ctx) }]
  // A valid acknowledgement: never replayed (its first send would be answered 200).
  if (withLoad) routes.push({ origin: 'control', method: 'GET', path: '/v1/load?instance=abc&seq=1', valid: fc.constant(null), faulty: null, noBody: true })
  return routes
}

module.exports = { memberControlSurfaces, memberSignedRoutes, push, load }
