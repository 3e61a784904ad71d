'use strict'

const http = require('node:http')
const fc = require('fast-check')
const { acceptsUpdate } = require('../../core/assignment')
const { ChopperError } = require('../../core/errors')
const { listen, close } = require('../../core/http')
const { validAssignment, faultyAssignment } = require('../../fuzz/assignments')
const { badId, badUrl, badCounter, ID_RE, URL_RE, stringifyWithDeep } = require('../../fuzz/arbitraries')
const { answerFault } = require('../../fuzz/check')
const { FuzzClient } = require('../../fuzz/http-client')
const { runComponent } = require('../../fuzz/runner')

// The fuzzer itself, on small inputs: its arbitraries only make what they
// claim, and its runner notices each kind of failure it is there to find.

describe('fuzz arbitraries', () => {
  const current = Date.now()
  const installed = { generation: current, slices: [{ start: 0, end: 2 ** 32, servers: ['a'] }], servers: { a: { url: 'http://127.0.0.1:1' } } }

  test('every faulty assignment is refused with one of our errors (never a crash), every valid one accepted', () => {
    fc.assert(fc.property(faultyAssignment({ current, hugeSlices: 2000 }), (a) => {
      const wire = JSON.parse(stringifyWithDeep(a)) // as a receiver parses it: deep values expanded
      try {
        acceptsUpdate(installed, wire)
      } catch (err) {
        return err instanceof ChopperError && err.status >= 400 && err.status < 500
      }
      return false
    }), { numRuns: 1500 })
    fc.assert(fc.property(validAssignment({ current }), (a) => acceptsUpdate(installed, a) === true), { numRuns: 300 })
  })

  test('bad ids, URLs and counters are never valid ones', () => {
    fc.assert(fc.property(badId, (v) => !(typeof v === 'string' && ID_RE.test(v))), { numRuns: 1000 })
    fc.assert(fc.property(badUrl, (v) => !(typeof v === 'string' && URL_RE.test(v))), { numRuns: 1000 })
    fc.assert(fc.property(badCounter, (v) => !(Number.isSafeInteger(v) && v >= 0)), { numRuns: 1000 })
  })
})

describe('answerFault', () => {
  const json = (status, body) => ({ status, headers: { 'content-type': 'application/json; charset=utf-8' }, text: JSON.stringify(body) })
  const err = { error: { code: 'CHOPPER_ERR_INVALID_ARG', message: 'x' } }
  test.each([
    ['a 4xx JSON error', { method: 'GET' }, json(400, err), null],
    ['a 5xx', { method: 'GET' }, json(500, err), /status 500/],
    ['a 2xx', { method: 'PUT' }, json(200, { ok: true }), /status 200/],
    ['an HTML 404', { method: 'GET' }, { status: 404, headers: { 'content-type': 'text/html' }, text: '<pre>Cannot GET</pre>' }, /content type/],
    ['a JSON 4xx of another shape', { method: 'GET' }, json(400, { message: 'x' }), /without \{ error/],
    ['a timeout', { method: 'GET' }, { error: 'timeout', code: 'TimeoutError' }, /no answer/],
    ['a 400 where 403 was due', { method: 'GET', expectStatus: [403] }, json(400, err), /expected 403/],
    ['a HEAD 4xx (no body)', { method: 'HEAD' }, { status: 404, headers: { 'content-type': 'application/json' }, text: '' }, null]
  ])('%s', (name, req, res, want) => {
    const got = answerFault(req, res)
    if (want === null) expect(got).toBeNull()
    else expect(got).toMatch(want)
  })
})

describe('runComponent', () => {
  /**
   * A target with planted bugs: a body holding `boom` gets a 500, `html` an
   * HTML 404, `mutate` changes its state (and is refused), `wedge` stops it
   * answering legit requests; anything else is a JSON 400.
   */
  async function plantedTarget () {
    let state = 0
    let wedged = false
    const server = http.createServer(async (req, res) => {
      let body = ''
      for await (const chunk of req) body += chunk
      const send = (status, type, text) => { res.writeHead(status, { 'content-type': type }); res.end(text) }
      if (req.url === '/state') return send(200, 'text/plain', String(state))
      if (req.url === '/healthz' || req.url === '/legit') return wedged && req.url === '/legit' ? send(503, 'application/json', '{}') : send(200, 'application/json', '{"ok":true}')
      if (body.includes('boom')) return send(500, 'application/json', '{"error":{"code":"CHOPPER_ERR_INTERNAL","message":"internal error"}}')
      if (body.includes('html')) return send(404, 'text/html', '<pre>Cannot PUT</pre>')
      if (body.includes('mutate')) state++
      if (body.includes('wedge')) wedged = true
      send(400, 'application/json', '{"error":{"code":"CHOPPER_ERR_INVALID_ARG","message":"no"}}')
    })
    const port = await listen(server, 0, '127.0.0.1')
    const origin = `http://127.0.0.1:${port}`
    return {
      name: 'planted',
      origins: { control: origin },
      ctx: {},
      legit: () => [{ origin: 'control', req: { method: 'GET', path: '/legit' }, check: (r) => (r.status === 200 ? null : `legit got ${r.status}`) }],
      health: [{ origin: 'control', path: '/healthz' }],
      snapshot: async () => String(state),
      close: () => close(server)
    }
  }

  const client = new FuzzClient({ timeoutMs: 5000 })
  afterAll(() => client.close())

  const surface = (trigger) => ({
    name: `planted ${trigger}`,
    request: fc.tuple(fc.constantFrom('fine', 'also fine', trigger), fc.string({ maxLength: 5 }))
      .map(([word, pad]) => ({ origin: 'control', method: 'PUT', path: '/v1/x', headers: { 'content-type': 'text/plain' }, body: word + pad }))
  })

  test.each([
    ['boom', /status 500/],
    ['html', /content type "text\/html"/],
    ['mutate', /installed state changed/]
  ])('finds a planted %s and shrinks to a batch that holds it', async (trigger, symptom) => {
    const out = await runComponent(plantedTarget, () => [surface(trigger)], { client, calls: 400, batchMax: 4 })
    expect(out.failures).toHaveLength(1)
    const f = out.failures[0]
    expect(f.firstFault).toMatch(symptom)
    expect(f.shrunk.length).toBeLessThanOrEqual(2)
    expect(f.shrunk.some((r) => r.includes(trigger))).toBe(true)
    if (trigger === 'boom') expect(out.status5xx).toBeGreaterThan(0)
    if (trigger === 'mutate') expect(out.restarts).toBe(1) // the next surface would start from a clean component
  })

  test('finds a wedged server through the legit requests (no shrinking: the wedge stays)', async () => {
    const out = await runComponent(plantedTarget, () => [surface('wedge')], { client, calls: 400, batchMax: 4, shrink: false })
    expect(out.failures).toHaveLength(1)
    expect(out.failures[0].firstFault).toMatch(/legit request failed/)
  })

  test('a clean target passes, with the calls counted', async () => {
    const out = await runComponent(plantedTarget, () => [surface('fine')], { client, calls: 200, batchMax: 4 })
    expect(out.failures).toEqual([])
    expect(out.calls).toBeGreaterThanOrEqual(200)
    expect(out.status4xx).toBe(out.calls)
    expect(out.legitOk).toBe(out.batches)
  })
})
