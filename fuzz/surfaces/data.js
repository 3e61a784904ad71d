'use strict'

const querystring = require('node:querystring')
// eslint-disable-next-line n/no-deprecated-api -- what Express's parseurl falls back on
const { parse: parseLegacy } = require('node:url')
const fc = require('fast-check')
const { noiseHeaders, queryPair, text, headerText, headerValue } = require('../arbitraries')
const { METHODS, pathArb } = require('./routes')

/**
 * The data path of the compute app, through an app server's data port or a
 * front end's: requests without a key, with a key but a bad `n`, a method
 * or path the app does not have, odd key encodings, routing headers and
 * bodies. Each is refused somewhere (the front end, the shard guard with 400
 * or 421, or the app), always with a 4xx.
 *
 * ctx: { generation, ownedKeys, dataPaths: ['/compute'] }
 */

const MAX_N = 20000

/** Express's view of a query string (the app server decides with it). */
const parseQuery = (q) => querystring.parse(q)

/** The query string of a request target as Express finds it (parseurl: url.parse for a fragment). */
function queryOf (path) {
  if (!path.includes('?')) return ''
  return /[#\t\n\f\r \u00a0]/.test(path) ? (parseLegacy(path).query || '') : path.slice(path.indexOf('?') + 1)
}

/** What `n` Express hands the app, and whether the app accepts it. */
function nAccepted (query) {
  const raw = parseQuery(query).n
  if (raw === undefined) return true
  const n = Number(raw)
  return Number.isInteger(n) && n >= 0 && n <= MAX_N
}

/** Keys: mostly ones the component owns (the app then decides), some random. */
function keyArb (ctx) {
  return fc.oneof(
    { weight: 2, arbitrary: fc.constantFrom(...ctx.ownedKeys) },
    { weight: 1, arbitrary: headerText(24).filter((s) => s.trim().length > 0 && s === s.trim()) },
    { weight: 1, arbitrary: fc.constantFrom('a', ' a', 'é', '%', '+', '&', '=', 'x'.repeat(4000)) }
  )
}

/** The key in the query string or the X-Chopper-Key header. */
function placeKey (ctx) {
  return fc.tuple(keyArb(ctx), fc.boolean()).map(([key, inQuery]) => (inQuery
    ? { query: [`key=${encodeURIComponent(key)}`], headers: {} }
    : { query: [], headers: { 'x-chopper-key': Buffer.from(key, 'utf8').toString('latin1') } }))
}

const badN = fc.oneof(
  fc.constantFrom('-1', '1.5', 'abc', String(MAX_N + 1), '1e9', '%', 'NaN', 'Infinity', '-Infinity', '1e', '--1', '9007199254740993', '1_000', '%zz', '2%00'),
  fc.integer({ min: MAX_N + 1, max: 2 ** 31 }).map(String),
  fc.integer({ min: -(2 ** 31), max: -1 }).map(String),
  text(6).map(encodeURIComponent)
).map((v) => `n=${v}`).filter((pair) => !nAccepted(pair))

/** Bodies, some past the front end's 1 MiB buffer limit (those stream through). */
const bodyArb = fc.oneof(
  { weight: 8, arbitrary: text(80) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 2048 }).map((a) => Buffer.from(a)) },
  { weight: 1, arbitrary: fc.integer({ min: 64 * 1024, max: 1024 * 1024 + 4096 }).map((n) => Buffer.alloc(n, 0x61)) }
)
const contentType = fc.option(fc.constantFrom('application/json', 'text/plain', 'application/octet-stream', 'application/x-www-form-urlencoded', 'multipart/form-data', 'application/json; charset=latin1'), { nil: undefined })

function build (origin, method, path, query, headers, body, chunked) {
  const q = query.filter(Boolean).join('&')
  const sep = path.includes('?') ? '&' : '?'
  return { origin, method, path: q ? `${path}${sep}${q}` : path, headers, body: method === 'GET' || method === 'HEAD' ? undefined : body, chunked }
}

function withBody () {
  return fc.tuple(fc.option(bodyArb, { nil: undefined }), contentType, fc.boolean())
}

/** Is `method path` a route that answers without a key (reserved health and metrics)? */
function reserved (method, path) {
  const p = path.split('?')[0].toLowerCase().replace(/\/+$/, '')
  return (method === 'GET' || method === 'HEAD') && (p === '/healthz' || p === '/metrics')
}

function missingKey (origin, ctx) {
  const paths = fc.oneof(fc.constantFrom(...ctx.dataPaths), pathArb)
  const query = fc.array(queryPair, { maxLength: 3 })
  const emptyKey = fc.constantFrom([], ['key='], ['key'], ['key=&key='])
  const keyHeader = fc.constantFrom(undefined, '')
  return fc.tuple(fc.constantFrom(...METHODS), paths, query, emptyKey, noiseHeaders({ exclude: ['x-chopper-key'] }), keyHeader, withBody())
    .map(([method, path, q, empty, noise, kh, [body, ct, chunked]]) => {
      const headers = { ...noise }
      if (kh !== undefined) headers['x-chopper-key'] = kh
      if (ct) headers['content-type'] = ct
      return build(origin, method, path, [...q, ...empty], headers, body, chunked)
    })
    .filter((r) => {
      if (reserved(r.method, r.path)) return false
      const k = parseQuery(queryOf(r.path)).key
      return !(typeof k === 'string' && k.length > 0)
    })
}

function badNSurface (origin, ctx) {
  return fc.tuple(fc.constantFrom('GET', 'HEAD'), fc.constantFrom(...ctx.dataPaths, '/compute/', '/COMPUTE'), placeKey(ctx), fc.array(badN, { minLength: 1, maxLength: 2 }), noiseHeaders({ exclude: ['x-chopper-key'] }))
    .map(([method, path, k, ns, noise]) => build(origin, method, path, [...k.query, ...ns], { ...noise, ...k.headers }))
    .filter((r) => !nAccepted(queryOf(r.path)))
}

function methodNotAllowed (origin, ctx) {
  return fc.tuple(fc.constantFrom(...METHODS.filter((m) => m !== 'GET' && m !== 'HEAD')), fc.constantFrom(...ctx.dataPaths, '/compute/', '/Compute'), placeKey(ctx), noiseHeaders({ exclude: ['x-chopper-key'] }), withBody())
    .map(([method, path, k, noise, [body, ct, chunked]]) => build(origin, method, path, k.query, { ...noise, ...k.headers, ...(ct ? { 'content-type': ct } : {}) }, body, chunked))
}

function unknownPath (origin, ctx) {
  const known = new Set(ctx.dataPaths)
  return fc.tuple(fc.constantFrom(...METHODS), pathArb, placeKey(ctx), noiseHeaders({ exclude: ['x-chopper-key'] }), withBody())
    .filter(([method, path]) => {
      let p = path.split('?')[0]
      try { p = decodeURIComponent(p) } catch {}
      p = p.toLowerCase().replace(/\/{2,}/g, '/').replace(/\/+$/, '')
      return !known.has(p) && !reserved(method, path)
    })
    .map(([method, path, k, noise, [body, ct, chunked]]) => build(origin, method, path, k.query, { ...noise, ...k.headers, ...(ct ? { 'content-type': ct } : {}) }, body, chunked))
    .filter((r) => {
      // the path's own query must not carry a key of its own
      return !Array.isArray(parseQuery(queryOf(r.path)).key)
    })
}

/**
 * The key spelled or escaped in ways a parser may read differently from
 * Express's (percent-escaped names, invalid UTF-8 escapes, a repeated key,
 * a key past querystring's 1,000-parameter limit), often with a different
 * key in the header, and always with a bad `n`: whoever decides must agree
 * with whoever routed, and the answer must be the app's 400 (or a 421).
 */
function oddKeys (origin, ctx) {
  const k = keyArb(ctx).map(encodeURIComponent)
  const variant = fc.oneof(
    k.map((v) => [`ke%79=${v}`]),
    k.map((v) => [`%6Bey=${v}`]),
    k.map((v) => [`KEY=${v}`]),
    fc.tuple(k, k).map(([a, b]) => [`key=${a}`, `ke%79=${b}`]),
    fc.tuple(k, k).map(([a, b]) => [`key=${a}`, `key=${b}`]),
    fc.tuple(k, fc.constantFrom('%C3%28', '%E0%A4%A', '%', '%FF%FE', '%ED%A0%80', '%F0%9F', '%C0%AF')).map(([a, junk]) => [`key=${a}${junk}`]),
    fc.tuple(k, fc.constantFrom('%C3%28', '%E0%A4%A', '%FF')).map(([a, junk]) => [`key=${junk}${a}`]),
    k.map((v) => [...Array.from({ length: 1000 }, (_, i) => `p${i}=1`), `key=${v}`]),
    k.map((v) => [`key=${v.replace(/%20/g, '+')}+%2B+`]),
    fc.tuple(k, fc.constantFrom('#', '#frag', '%+41', '%%41')).map(([a, tail]) => [`key=${a}${tail}`]),
    fc.tuple(k, k).map(([a, b]) => [`key=${a}#&key=${b}`])
  )
  const header = fc.option(keyArb(ctx).map((key) => Buffer.from(key, 'utf8').toString('latin1')), { nil: undefined })
  return fc.tuple(fc.constantFrom('GET', 'HEAD'), variant, header, badN, noiseHeaders({ exclude: ['x-chopper-key'] }))
    .map(([method, v, h, n, noise]) => build(origin, method, ctx.dataPaths[0], [n, ...v], { ...noise, ...(h !== undefined ? { 'x-chopper-key': h } : {}) }))
    .filter((r) => !nAccepted(queryOf(r.path)))
}

/** Routing headers as a front end sets them, with values around and far from the installed generation. */
function routingHeaders (origin, ctx) {
  const gen = fc.oneof(
    fc.integer({ min: -3, max: 3 }).map((d) => String(ctx.generation + d)),
    fc.constantFrom(String(2 ** 53 - 1), '0', '-1', '1e20', 'NaN', '', ' ', '1,2', `${ctx.generation}, ${ctx.generation + 1}`),
    headerValue
  )
  return fc.tuple(fc.constantFrom('GET', 'HEAD', 'POST'), placeKey(ctx), gen, fc.constantFrom('bad-n', 'path', 'method'), badN)
    .map(([method, k, g, how, n]) => {
      const headers = { ...k.headers, 'x-chopper-generation': g }
      if (how === 'bad-n') return build(origin, method === 'POST' ? 'GET' : method, ctx.dataPaths[0], [...k.query, n], headers)
      if (how === 'path') return build(origin, method, '/no-such-route', k.query, headers)
      return build(origin, 'DELETE', ctx.dataPaths[0], k.query, headers)
    })
}

/** @returns {{ name, request }[]} */
function computeDataSurfaces (ctx, { origin = 'data' } = {}) {
  return [
    { name: 'data: missing key', request: missingKey(origin, ctx) },
    { name: 'data: bad n', request: badNSurface(origin, ctx) },
    { name: 'data: method not allowed', request: methodNotAllowed(origin, ctx) },
    { name: 'data: unknown path', request: unknownPath(origin, ctx) },
    { name: 'data: odd key encodings', request: oddKeys(origin, ctx) },
    { name: 'data: routing headers', request: routingHeaders(origin, ctx) }
  ]
}

module.exports = { computeDataSurfaces, keyArb, placeKey, bodyArb, reserved, build, nAccepted, parseQuery, queryOf }
