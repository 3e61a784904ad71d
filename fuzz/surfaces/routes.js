'use strict'

const fc = require('fast-check')
const { badSegment, noiseHeaders, queryPair, text } = require('../arbitraries')

/**
 * Requests for routes a listener does not have: unknown paths, and known
 * paths with a method they do not take. `known` lists the routes (path
 * regexps, matched as Express matches: case-insensitive, trailing slash
 * optional) with their methods; '*' for any. Express answers HEAD on a GET
 * route and OPTIONS on any route itself, so those count as known.
 */

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'PROPFIND', 'PURGE', 'QUERY', 'M-SEARCH', 'MKCOL', 'LOCK']
const WORDS = ['v1', 'V1', 'v2', 'servers', 'frontends', 'move', 'assignment', 'assignments', 'load', 'lease', 'drain', 'status', 'events', 'healthz', 'metrics', 'dashboard', 'compute', 'kv', '_fence', 'app-1', '.', '..', '']

/** Does `method path` hit a route in `known`? Conservative: percent-escapes decoded, slashes collapsed. */
function isKnown (known, method, path) {
  let p = path.split('?')[0]
  try { p = decodeURIComponent(p) } catch {}
  p = p.toLowerCase().replace(/\/{2,}/g, '/')
  if (p.length > 1) p = p.replace(/\/+$/, '')
  if (p === '') p = '/'
  for (const r of known) {
    if (!r.path.test(p)) continue
    if (method === 'OPTIONS' || r.methods.includes('*') || r.methods.includes(method)) return true
    if (method === 'HEAD' && r.methods.includes('GET')) return true
  }
  return false
}

const segment = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...WORDS) }, { weight: 1, arbitrary: badSegment })

const pathArb = fc.tuple(
  fc.array(segment, { minLength: 0, maxLength: 5 }),
  fc.boolean(),
  fc.option(fc.array(queryPair, { minLength: 1, maxLength: 3 }), { nil: undefined })
).map(([segs, trailing, query]) => '/' + segs.join('/') + (trailing && segs.length ? '/' : '') + (query ? '?' + query.join('&') : ''))

/**
 * @param {{ origin: string, known: { path: RegExp, methods: string[] }[] }} options
 * @returns {fc.Arbitrary<object>} requests that must get a JSON 404 (or 405)
 */
function unknownRoutes ({ origin, known }) {
  return fc.record({
    method: fc.constantFrom(...METHODS),
    path: pathArb,
    headers: noiseHeaders(),
    body: fc.option(text(40), { nil: undefined })
  })
    .filter(({ method, path }) => !isKnown(known, method, path))
    .map((r) => ({ origin, ...r, body: r.method === 'GET' || r.method === 'HEAD' ? undefined : r.body }))
}

module.exports = { unknownRoutes, isKnown, METHODS, pathArb }
