'use strict'

const fc = require('fast-check')
const { noiseHeaders, stringifyWithDeep } = require('../arbitraries')
const { FAULTS } = require('../auth')

/**
 * Calls to routes that take signed calls only, each with a bad signature
 * (fuzz/auth.js says how it is spoiled when the request is sent). The payload
 * may be valid: a valid push, registration or move with a bad signature must
 * be refused all the same (401 or 403), and change nothing. A replay is only
 * made of a payload validation refuses (its first send passes the signature).
 *
 * @param {{ origin, method, path, valid, faulty: fc.Arbitrary|null, noBody?, raw?, headers? }[]} routes
 *   raw: the route reads the body as bytes (no JSON parser before the signature)
 */
function signedRouteAbuse (routes) {
  const faults = FAULTS.filter((f) => f !== 'replay')
  const arbs = []
  for (const r of routes) {
    const build = (value, fault, seed, noise) => {
      const req = { origin: r.origin, method: r.method, path: r.path, headers: { ...noise, ...(r.headers || {}) }, auth: fault, authSeed: seed }
      if (!r.noBody) {
        req.headers['content-type'] = 'application/json'
        req.body = stringifyWithDeep(value)
      }
      return req
    }
    // Express's JSON parser (strict) refuses anything but an object or an array
    // before the signature is looked at: those would test the parser, not the signature.
    const parses = (v) => r.raw || r.noBody || (v !== null && typeof v === 'object')
    const valid = r.valid.filter(parses)
    const faulty = r.faulty && r.faulty.filter(parses)
    const payload = faulty ? fc.oneof(valid, faulty) : valid
    arbs.push({ weight: 4, arbitrary: fc.tuple(payload, fc.constantFrom(...faults), fc.nat(), noiseHeaders()).map(([v, f, seed, noise]) => build(v, f, seed, noise)) })
    if (faulty) arbs.push({ weight: 1, arbitrary: fc.tuple(faulty, fc.nat(), noiseHeaders()).map(([v, seed, noise]) => build(v, 'replay', seed, noise)) })
  }
  return fc.oneof(...arbs)
}

module.exports = { signedRouteAbuse }
