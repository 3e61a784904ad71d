'use strict'

const fc = require('fast-check')
const { noiseHeaders, queryPair, text, headerText, headerValue, spoilJson, isJson } = require('../arbitraries')
const { METHODS, pathArb } = require('./routes')
const { build, reserved, parseQuery, queryOf } = require('./data')

/**
 * kv-cache's data routes behind its app server's shard guard: no key, a key
 * DynamoDB would refuse, a value past maxValueBytes (declared or chunked), a
 * JSON value that is not JSON, an encoding the body is not in, methods /kv
 * does not take, and internal fence requests with bad headers. Valid writes
 * never appear here (the target's own legit calls write a bounded set of
 * keys), so the store does not grow with the run.
 *
 * ctx: { maxValueBytes, ownedKeys }
 */

const MAX_KEY_BYTES = 2048
const FENCE_PATH = '/kv/_fence'

const key = fc.oneof(
  { weight: 3, arbitrary: headerText(20).filter((s) => s.length > 0).map((s) => 'fz-' + s) },
  { weight: 1, arbitrary: fc.constantFrom('a', 'é', '%', '+', '&', '=') }
)
// Past DynamoDB's 2,048-byte partition key, within Node's 16 KB header limit.
const longKey = fc.integer({ min: MAX_KEY_BYTES + 1, max: 6000 }).chain((n) => fc.constantFrom('k', 'é', '字').map((c) => c.repeat(Math.ceil(n / Buffer.byteLength(c)))))
  .filter((k) => Buffer.byteLength(k) > MAX_KEY_BYTES && encodeURIComponent(k).length < 12000)

function placed (k) {
  return fc.boolean().map((inQuery) => (inQuery
    ? { query: [`key=${encodeURIComponent(k)}`], headers: {} }
    : { query: [], headers: { 'x-chopper-key': Buffer.from(k, 'utf8').toString('latin1') } }))
}

function missingKey (origin) {
  return fc.tuple(fc.constantFrom(...METHODS), fc.constantFrom('/kv', FENCE_PATH, '/kv/', '/KV'), fc.array(queryPair, { maxLength: 2 }), fc.constantFrom([], ['key='], ['key=&key=']), noiseHeaders({ exclude: ['x-chopper-key'] }), fc.option(text(30), { nil: undefined }))
    .map(([method, path, q, empty, headers, body]) => build(origin, method, path, [...q, ...empty], headers, body))
    .filter((r) => {
      const k = parseQuery(queryOf(r.path)).key
      return !(typeof k === 'string' && k.length > 0) && !reserved(r.method, r.path)
    })
}

function keyTooLong (origin) {
  return fc.tuple(fc.constantFrom('GET', 'PUT', 'DELETE', 'HEAD'), longKey.chain(placed), noiseHeaders({ exclude: ['x-chopper-key'] }), text(20))
    .map(([method, k, noise, body]) => build(origin, method, '/kv', k.query, { ...noise, ...k.headers, 'content-type': 'text/plain' }, body))
}

function valueTooLarge (origin, ctx) {
  return fc.tuple(key.chain(placed), fc.integer({ min: ctx.maxValueBytes + 1, max: ctx.maxValueBytes * 4 }), fc.boolean(), fc.constantFrom('text/plain', 'application/octet-stream', undefined), noiseHeaders({ exclude: ['x-chopper-key'] }), fc.constantFrom('/kv', FENCE_PATH))
    .map(([k, size, chunked, ct, noise, path]) => build(origin, path === FENCE_PATH ? 'POST' : 'PUT', path, k.query, { ...noise, ...k.headers, ...(ct ? { 'content-type': ct } : {}) }, Buffer.alloc(size, 0x62), chunked))
}

function badJsonValue (origin) {
  const notJson = fc.oneof(
    text(40).filter((s) => !isJson(s)),
    fc.tuple(fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)).filter((s) => s.length > 1 && /[{["]/.test(s[0])), spoilJson).map(([s, spoil]) => spoil(s)).filter((s) => !isJson(s))
  )
  return fc.tuple(key.chain(placed), notJson, fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/vnd.api+json', 'application/problem+json'), fc.boolean(), noiseHeaders({ exclude: ['x-chopper-key'] }))
    .map(([k, body, ct, chunked, noise]) => build(origin, 'PUT', '/kv', k.query, { ...noise, ...k.headers, 'content-type': ct }, body, chunked))
}

/**
 * A value in an encoding it is not in. The bytes start with 0xff, which no
 * gzip or zlib stream does; brotli is left out on purpose: short junk can be
 * a valid (empty) brotli stream, and an empty value is a valid write.
 */
function badEncoding (origin) {
  return fc.tuple(key.chain(placed), fc.constantFrom('gzip', 'deflate', 'x-bogus', 'compress', 'gzip, br', 'identity, gzip'), text(40), fc.boolean(), noiseHeaders({ exclude: ['x-chopper-key'] }))
    .map(([k, enc, body, chunked, noise]) => build(origin, 'PUT', '/kv', k.query, { ...noise, ...k.headers, 'content-type': 'text/plain', 'content-encoding': enc }, Buffer.concat([Buffer.from([0xff]), Buffer.from(body)]), chunked))
}

function methodNotAllowed (origin) {
  return fc.tuple(fc.constantFrom(...METHODS.filter((m) => !['GET', 'HEAD', 'PUT', 'DELETE'].includes(m))), key.chain(placed), noiseHeaders({ exclude: ['x-chopper-key'] }), fc.option(text(30), { nil: undefined }))
    .map(([method, k, noise, body]) => build(origin, method, '/kv', k.query, { ...noise, ...k.headers }, body))
}

function unknownPath (origin) {
  return fc.tuple(fc.constantFrom(...METHODS), pathArb, key.chain(placed), noiseHeaders({ exclude: ['x-chopper-key'] }))
    .filter(([method, path]) => {
      let p = path.split('?')[0]
      try { p = decodeURIComponent(p) } catch {}
      p = p.toLowerCase().replace(/\/{2,}/g, '/').replace(/\/+$/, '')
      return p !== '/kv' && p !== FENCE_PATH && !reserved(method, path)
    })
    .map(([method, path, k, noise]) => build(origin, method, path, k.query, { ...noise, ...k.headers }))
}

/** Fence requests (the primary's hold/release/abort on a replica) that no replica may take. */
function badFence (origin, ctx) {
  const phase = fc.oneof(fc.constantFrom('hold', 'release', 'abort'), headerValue)
  const fenceId = fc.oneof(fc.stringMatching(/^[A-Za-z0-9._:-]{1,40}$/), headerValue)
  const from = fc.oneof(fc.constant(ctx.serverId), fc.constant('not-a-replica'), headerValue)
  const gen = fc.oneof(fc.constant(String(ctx.generation)), headerValue)
  const version = fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 100n }).map(String), headerValue)
  // This server is the slice's only server: a fence from anyone (itself included) is refused.
  return fc.tuple(key.chain(placed), fc.record({ 'x-kv-fence': phase, 'x-kv-fence-id': fenceId, 'x-kv-fence-from': from, 'x-chopper-generation': gen, 'x-kv-version': version }, { requiredKeys: [] }), fc.option(text(20), { nil: undefined }))
    .map(([k, fence, body]) => build(origin, 'POST', FENCE_PATH, k.query, { ...k.headers, ...fence, ...(body !== undefined ? { 'content-type': 'text/plain' } : {}) }, body))
}

/** Deleting or reading keys nobody wrote: 404 (reads) and no effect. A small share: each reaches DynamoDB. */
function absentKeys (origin) {
  return fc.tuple(fc.constantFrom('GET', 'HEAD'), fc.uuid().map((u) => 'absent-' + u).chain(placed))
    .map(([method, k]) => build(origin, method, '/kv', k.query, k.headers))
}

/** The fence route, which takes signed fences only when a cluster token is set (fuzz/surfaces/auth.js). */
function kvSignedRoutes (ctx) {
  const headers = { 'x-kv-fence': 'hold', 'x-kv-fence-id': 'fz-fence-1', 'x-kv-fence-from': 'kv-other', 'x-chopper-generation': String(ctx.generation) }
  // Refused by validation even when signed (kv-other is no replica of the key's slice): replays are fine.
  const payload = fc.oneof(fc.constant(null), fc.jsonValue({ maxDepth: 1 }))
  return [{ origin: 'data', method: 'POST', path: `${FENCE_PATH}?key=${encodeURIComponent(ctx.ownedKeys[0])}`, headers, valid: payload, faulty: payload, raw: true }]
}

function kvDataSurfaces (ctx, { origin = 'data' } = {}) {
  return [
    { name: 'kv: missing key', request: missingKey(origin) },
    { name: 'kv: key too long', request: keyTooLong(origin) },
    { name: 'kv: value too large', request: valueTooLarge(origin, ctx) },
    { name: 'kv: malformed JSON value', request: badJsonValue(origin) },
    { name: 'kv: bad content encoding', request: badEncoding(origin) },
    { name: 'kv: method not allowed', request: methodNotAllowed(origin) },
    { name: 'kv: unknown path', request: unknownPath(origin) },
    { name: 'kv: bad fence requests', request: badFence(origin, ctx) },
    { name: 'kv: absent keys', request: absentKeys(origin), weight: 0.2 }
  ]
}

module.exports = { kvDataSurfaces, kvSignedRoutes, FENCE_PATH }
