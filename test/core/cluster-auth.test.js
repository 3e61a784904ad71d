'use strict'

const http = require('node:http')
const express = require('express')
const { signRequest, RequestVerifier, verifyMiddleware, jsonWithRawBody, validateToken, HEADERS } = require('../../core/cluster-auth')
const { jsonErrorHandler, notFound, listen, close } = require('../../core/http')
const { silent } = require('../../core/logger')
const { call } = require('../helpers/http')
const { JsonClient, json } = require('../../core/json-client')

const TOKEN = 'test-cluster-token-0123456789'
const T0 = 1_800_000_000_000

/** A verifier on a clock the test moves. */
function verifierAt (t, options = {}) {
  const clock = { t }
  const verifier = new RequestVerifier({ token: TOKEN, now: () => clock.t, ...options })
  return { verifier, clock }
}

function signed (overrides = {}) {
  const req = { method: 'POST', path: '/v1/servers', body: '{"id":"app-1"}', ...overrides }
  const headers = signRequest({ token: TOKEN, now: T0, ...req })
  return { method: req.method, path: req.path, headers, rawBody: req.body === undefined ? undefined : Buffer.from(req.body) }
}

const codeOf = (fn) => {
  try {
    fn()
  } catch (err) {
    return { code: err.code, status: err.status, message: err.message }
  }
  return null
}

describe('signRequest / RequestVerifier', () => {
  test('a signed request verifies, once', () => {
    const { verifier } = verifierAt(T0)
    const req = signed()
    expect(Object.keys(req.headers).sort()).toEqual([HEADERS.nonce, HEADERS.signature, HEADERS.timestamp].sort())
    expect(req.headers[HEADERS.timestamp]).toBe(String(T0))
    expect(codeOf(() => verifier.verify(req))).toBeNull()
    // The same request again is a replay.
    expect(codeOf(() => verifier.verify(req))).toMatchObject({ code: 'CHOPPER_ERR_FORBIDDEN', status: 403, message: expect.stringMatching(/replayed/) })
    expect(verifier.stats).toMatchObject({ accepted: 1, replayed: 1 })
  })

  test('bodies may be strings, Buffers or absent; the bytes are what counts', () => {
    const { verifier } = verifierAt(T0)
    const asBuffer = signRequest({ token: TOKEN, method: 'put', path: '/v1/assignment', body: Buffer.from('{"a":1}'), now: T0, nonce: 'nonce-aaaa' })
    const asString = signRequest({ token: TOKEN, method: 'PUT', path: '/v1/assignment', body: '{"a":1}', now: T0, nonce: 'nonce-aaaa' })
    expect(asBuffer).toEqual(asString) // the method is upper-cased
    expect(codeOf(() => verifier.verify({ method: 'PUT', path: '/v1/assignment', headers: asString, rawBody: Buffer.from('{"a":1}') }))).toBeNull()
    const get = signRequest({ token: TOKEN, method: 'GET', path: '/v1/load?instance=i&seq=3', now: T0 })
    expect(codeOf(() => verifier.verify({ method: 'GET', path: '/v1/load?instance=i&seq=3', headers: get }))).toBeNull()
    expect(codeOf(() => verifier.verify({ method: 'GET', path: '/v1/load?instance=i&seq=3', headers: { ...get, [HEADERS.nonce]: 'other-nonce' } }))).toMatchObject({ code: 'CHOPPER_ERR_FORBIDDEN' })
  })

  test.each([
    ['body', { rawBody: Buffer.from('{"id":"app-2"}') }],
    ['empty body', { rawBody: undefined }],
    ['path', { path: '/v1/servers/app-1/drain' }],
    ['query', { path: '/v1/servers?x=1' }],
    ['method', { method: 'PUT' }],
    ['timestamp', { headers: { [HEADERS.timestamp]: String(T0 + 1) } }],
    ['nonce', { headers: { [HEADERS.nonce]: 'another-nonce' } }]
  ])('a tampered %s is refused with 403', (what, change) => {
    const { verifier } = verifierAt(T0)
    const req = signed()
    const tampered = { ...req, ...change, headers: { ...req.headers, ...change.headers } }
    expect(codeOf(() => verifier.verify(tampered))).toMatchObject({ code: 'CHOPPER_ERR_FORBIDDEN', status: 403, message: expect.stringMatching(/bad signature/) })
  })

  test('another token is refused with 403', () => {
    const { verifier } = verifierAt(T0)
    const headers = signRequest({ token: 'not-the-cluster-token', method: 'POST', path: '/v1/servers', body: '{}', now: T0 })
    expect(codeOf(() => verifier.verify({ method: 'POST', path: '/v1/servers', headers, rawBody: Buffer.from('{}') }))).toMatchObject({ code: 'CHOPPER_ERR_FORBIDDEN', status: 403 })
  })

  test('a context binds more of the request: both sides must agree on it', () => {
    const { verifier } = verifierAt(T0)
    const headers = signRequest({ token: TOKEN, method: 'POST', path: '/kv/_fence?key=k', now: T0, context: 'to:B' })
    expect(codeOf(() => verifier.verify({ method: 'POST', path: '/kv/_fence?key=k', headers, context: 'to:C' }))).toMatchObject({ code: 'CHOPPER_ERR_FORBIDDEN' })
    expect(codeOf(() => verifier.verify({ method: 'POST', path: '/kv/_fence?key=k', headers }))).toMatchObject({ code: 'CHOPPER_ERR_FORBIDDEN' })
    expect(codeOf(() => verifier.verify({ method: 'POST', path: '/kv/_fence?key=k', headers, context: 'to:B' }))).toBeNull()
  })

  test('missing headers are 401; malformed ones 403', () => {
    const { verifier } = verifierAt(T0)
    const req = signed()
    for (const name of Object.values(HEADERS)) {
      const headers = { ...req.headers }
      delete headers[name]
      expect(codeOf(() => verifier.verify({ ...req, headers }))).toMatchObject({ code: 'CHOPPER_ERR_UNAUTHENTICATED', status: 401 })
    }
    for (const [name, value] of [[HEADERS.timestamp, 'soon'], [HEADERS.timestamp, '-5'], [HEADERS.nonce, 'short'], [HEADERS.nonce, 'x'.repeat(65)], [HEADERS.signature, 'abc'], [HEADERS.signature, req.headers[HEADERS.signature] + 'A'], [HEADERS.signature, ['a', 'b']]]) {
      expect(codeOf(() => verifier.verify({ ...req, headers: { ...req.headers, [name]: value } }))).toMatchObject({ code: 'CHOPPER_ERR_FORBIDDEN', status: 403 })
    }
    expect(verifier.stats).toMatchObject({ accepted: 0, unauthenticated: 3, forbidden: 7 })
  })

  test('a timestamp outside ±maxSkewMs is refused either way; inside it is accepted', () => {
    const { verifier, clock } = verifierAt(T0, { maxSkewMs: 30000 })
    clock.t = T0 + 30001
    expect(codeOf(() => verifier.verify(signed()))).toMatchObject({ code: 'CHOPPER_ERR_FORBIDDEN', message: expect.stringMatching(/stale or future timestamp/) })
    clock.t = T0 - 30001
    expect(codeOf(() => verifier.verify(signed()))).toMatchObject({ code: 'CHOPPER_ERR_FORBIDDEN', message: expect.stringMatching(/stale or future timestamp/) })
    clock.t = T0 + 30000
    expect(codeOf(() => verifier.verify(signed()))).toBeNull()
  })

  test('a nonce is remembered for as long as its timestamp is in the window, then forgotten', () => {
    const { verifier, clock } = verifierAt(T0, { maxSkewMs: 1000 })
    const req = signed()
    expect(codeOf(() => verifier.verify(req))).toBeNull()
    clock.t = T0 + 1000
    expect(codeOf(() => verifier.verify(req))).toMatchObject({ message: expect.stringMatching(/replayed/) })
    // Once the request is stale it is refused for that, and its nonce is pruned by later requests.
    clock.t = T0 + 1001
    expect(codeOf(() => verifier.verify(req))).toMatchObject({ message: expect.stringMatching(/stale/) })
    verifier.verify({ ...signed(), headers: signRequest({ token: TOKEN, method: 'POST', path: '/v1/servers', body: '{"id":"app-1"}', now: clock.t }) })
    expect(verifier.nonces.size).toBe(1)
  })

  test('the nonce cache is bounded: pruned when full, and a 503 rather than growing', () => {
    const { verifier, clock } = verifierAt(T0, { maxSkewMs: 1000, maxNonces: 3 })
    const at = (t) => ({ ...signed(), headers: signRequest({ token: TOKEN, method: 'POST', path: '/v1/servers', body: '{"id":"app-1"}', now: t }) })
    // Insertion order is not expiry order: the second one expires first.
    verifier.verify(at(T0 + 500))
    verifier.verify(at(T0 - 500))
    verifier.verify(at(T0))
    expect(codeOf(() => verifier.verify(at(T0)))).toMatchObject({ code: 'CHOPPER_ERR_REPLAY_CACHE_FULL', status: 503 })
    expect(verifier.nonces.size).toBe(3)
    // Once one has expired (not the oldest inserted), a full sweep makes room.
    clock.t = T0 + 600
    expect(codeOf(() => verifier.verify(at(clock.t)))).toBeNull()
    expect(verifier.nonces.size).toBe(3)
    expect(verifier.stats.full).toBe(1)
  })

  test('a refused request leaves no nonce behind, so unsigned junk cannot fill the cache', () => {
    const { verifier } = verifierAt(T0, { maxNonces: 1 })
    for (let i = 0; i < 100; i++) {
      codeOf(() => verifier.verify({ method: 'POST', path: '/v1/servers', headers: { ...signed().headers, [HEADERS.signature]: 'A'.repeat(43) } }))
    }
    expect(verifier.nonces.size).toBe(0)
    expect(codeOf(() => verifier.verify(signed()))).toBeNull()
  })

  test('options are validated, and the token is never echoed', () => {
    expect(() => new RequestVerifier({ token: 'short' })).toThrow(/invalid token: expected a string of at least 16 characters/)
    expect(() => new RequestVerifier({ token: TOKEN, maxSkewMs: 0 })).toThrow(/invalid maxSkewMs/)
    expect(() => new RequestVerifier({ token: TOKEN, maxNonces: 1.5 })).toThrow(/invalid maxNonces/)
    expect(() => validateToken('short-secret')).toThrow(/invalid clusterToken/)
    expect(() => validateToken('short-secret')).not.toThrow(/short-secret/)
    expect(() => validateToken(1234567890123456)).toThrow(/invalid clusterToken/)
    expect(validateToken(undefined)).toBeUndefined()
    expect(() => signRequest({ method: 'GET', path: '/' })).toThrow(/invalid token/)
  })
})

describe('over HTTP: JsonClient (core/json-client.js) and verifyMiddleware (Express)', () => {
  let server
  let base
  let seen

  beforeEach(async () => {
    seen = []
    const app = express()
    app.use(jsonWithRawBody('1mb'))
    app.use('/signed', verifyMiddleware(new RequestVerifier({ token: TOKEN })))
    app.all('/signed/*path', (req, res) => {
      seen.push({ method: req.method, url: req.originalUrl, body: req.body })
      res.json({ ok: true })
    })
    app.get('/open', (req, res) => res.json({ ok: true }))
    app.use(notFound(), jsonErrorHandler(silent))
    server = http.createServer(app)
    base = `http://127.0.0.1:${await listen(server, 0, '127.0.0.1')}`
  })

  afterEach(async () => {
    await close(server)
  })

  test('every request shape a control client sends verifies: objects, a body serialized once, a query, no body', async () => {
    const client = new JsonClient({ clusterToken: TOKEN })
    try {
      await client.post(`${base}/signed/v1/servers`, { id: 'app-1', url: 'http://127.0.0.1:1', nested: { a: [1, 'é'] } })
      await client.get(`${base}/signed/v1/load`, { query: { instance: 'i:1 2,3$', seq: 7 } })
      await client.delete(`${base}/signed/v1/servers/app%201`)
      await client.put(`${base}/signed/v1/assignment?x=1`, json({ generation: 3 }))
      await client.post(`${base}/signed/v1/servers/app-1/drain`, {})
    } finally {
      await client.close()
    }
    expect(seen).toEqual([
      { method: 'POST', url: '/signed/v1/servers', body: { id: 'app-1', url: 'http://127.0.0.1:1', nested: { a: [1, 'é'] } } },
      { method: 'GET', url: '/signed/v1/load?instance=i%3A1+2%2C3%24&seq=7', body: undefined },
      { method: 'DELETE', url: '/signed/v1/servers/app%201', body: undefined },
      { method: 'PUT', url: '/signed/v1/assignment?x=1', body: { generation: 3 } },
      { method: 'POST', url: '/signed/v1/servers/app-1/drain', body: {} }
    ])
  })

  test('unsigned, wrongly signed and replayed requests get JSON 401/403; open routes stay open; bad JSON stays a 400', async () => {
    const unsigned = await call(`${base}/signed/v1/servers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    expect(unsigned).toMatchObject({ status: 401, body: { error: { code: 'CHOPPER_ERR_UNAUTHENTICATED' } } })

    const wrong = new JsonClient({ clusterToken: 'some-other-cluster-token' })
    const refused = await wrong.post(`${base}/signed/v1/servers`, { id: 'x' }).catch((err) => err)
    await wrong.close()
    expect(refused).toMatchObject({ code: 'CHOPPER_ERR_PEER_STATUS', response: { status: 403, data: { error: { code: 'CHOPPER_ERR_FORBIDDEN' } } } })

    const body = '{"id":"app-1"}'
    const headers = { 'content-type': 'application/json', ...signRequest({ token: TOKEN, method: 'POST', path: '/signed/v1/servers', body }) }
    expect((await call(`${base}/signed/v1/servers`, { method: 'POST', headers, body })).status).toBe(200)
    expect(await call(`${base}/signed/v1/servers`, { method: 'POST', headers, body })).toMatchObject({ status: 403, body: { error: { code: 'CHOPPER_ERR_FORBIDDEN', message: expect.stringMatching(/replayed/) } } })

    const bad = await call(`${base}/signed/v1/servers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{bad' })
    expect(bad).toMatchObject({ status: 400, body: { error: { code: 'CHOPPER_ERR_MALFORMED_BODY' } } })
    const text = await call(`${base}/signed/v1/servers`, { method: 'POST', headers: { 'content-type': 'text/plain', ...signRequest({ token: TOKEN, method: 'POST', path: '/signed/v1/servers', body: 'hello' }) }, body: 'hello' })
    expect(text).toMatchObject({ status: 403, body: { error: { code: 'CHOPPER_ERR_FORBIDDEN' } } }) // a body the JSON parser did not read counts as empty
    expect((await call(`${base}/open`)).status).toBe(200)
    expect(seen).toHaveLength(1)
  })

  test('verifyMiddleware(null) lets everything through (no token configured)', async () => {
    const app = express()
    app.use(verifyMiddleware(null))
    app.get('/x', (req, res) => res.json({ ok: true }))
    const s = http.createServer(app)
    const port = await listen(s, 0, '127.0.0.1')
    try {
      expect((await call(`http://127.0.0.1:${port}/x`)).status).toBe(200)
    } finally {
      await close(s)
    }
  })
})
