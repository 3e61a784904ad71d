'use strict'

const http = require('node:http')
const { JsonClient, json } = require('../../core/json-client')
const { listen, close, freePort } = require('../../core/http')

/**
 * The control plane's HTTP client against plain Node servers on port 0:
 * what it sends, how it reads answers, and its errors (a peer's error
 * status, no answer in time, a refused connection).
 */
describe('JsonClient', () => {
  const servers = []
  const clients = []

  async function server (handler) {
    const s = http.createServer(handler)
    const port = await listen(s, 0, '127.0.0.1')
    servers.push(s)
    return `http://127.0.0.1:${port}`
  }

  function client (options) {
    const c = new JsonClient(options)
    clients.push(c)
    return c
  }

  /** Records each request (method, url, headers, body) and answers with `answer(req, body, res)`. */
  async function recorder (answer) {
    const seen = []
    const url = await server((req, res) => {
      const chunks = []
      req.on('data', (c) => chunks.push(c))
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8')
        seen.push({ method: req.method, url: req.url, type: req.headers['content-type'], body })
        answer(req, body, res)
      })
    })
    return { url, seen }
  }

  afterEach(async () => {
    for (const c of clients.splice(0)) await c.destroy()
    for (const s of servers.splice(0)) {
      s.closeAllConnections()
      await close(s)
    }
  })

  const sendJson = (status, value) => (req, body, res) => {
    res.writeHead(status, { 'content-type': 'application/json' })
    res.end(JSON.stringify(value))
  }

  test('sends objects and pre-serialized bodies as JSON, and a query; parses JSON answers', async () => {
    const { url, seen } = await recorder(sendJson(200, { ok: true, n: 1 }))
    const c = client()
    const bytes = json({ generation: 7 })
    await expect(c.put(`${url}/v1/assignment`, bytes)).resolves.toMatchObject({ status: 200, data: { ok: true, n: 1 } })
    await c.put(`${url}/v1/assignment`, bytes) // the same bytes twice
    await c.post(`${url}/v1/servers`, { id: 'é' })
    await c.get(`${url}/v1/load`, { query: { instance: 'a b', seq: 3 } })
    await c.delete(`${url}/v1/servers/x`)
    expect(seen).toEqual([
      { method: 'PUT', url: '/v1/assignment', type: 'application/json', body: '{"generation":7}' },
      { method: 'PUT', url: '/v1/assignment', type: 'application/json', body: '{"generation":7}' },
      { method: 'POST', url: '/v1/servers', type: 'application/json', body: '{"id":"é"}' },
      { method: 'GET', url: '/v1/load?instance=a+b&seq=3', type: undefined, body: '' },
      { method: 'DELETE', url: '/v1/servers/x', type: undefined, body: '' }
    ])
  })

  test('an answer that is not JSON is its text; an empty one is undefined', async () => {
    let n = 0
    const url = await server((req, res) => {
      n++
      if (n === 1) return res.end('plain words')
      res.statusCode = 204
      res.end()
    })
    const c = client()
    expect((await c.get(url)).data).toBe('plain words')
    expect(await c.get(url)).toMatchObject({ status: 204, data: undefined })
  })

  test('an error status rejects with PeerStatusError carrying the answer', async () => {
    const url = await server((req, res) => {
      res.writeHead(409, { 'content-type': 'application/json', 'x-chopper-leader': 'http://elsewhere' })
      res.end(JSON.stringify({ error: { code: 'CHOPPER_ERR_STALE_GENERATION', message: 'older' } }))
    })
    const err = await client().put(`${url}/v1/assignment`, { generation: 1 }).catch((e) => e)
    expect(err).toMatchObject({
      name: 'PeerStatusError',
      code: 'CHOPPER_ERR_PEER_STATUS',
      response: { status: 409, data: { error: { code: 'CHOPPER_ERR_STALE_GENERATION' } }, headers: { 'x-chopper-leader': 'http://elsewhere' } }
    })
    expect(err.message).toMatch(/HTTP 409 CHOPPER_ERR_STALE_GENERATION/)
  })

  test('no whole answer within timeoutMs rejects with TimeoutError; the pool still serves later calls', async () => {
    let hang = true
    const url = await server((req, res) => {
      if (!hang) return res.end('{"ok":true}')
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{"ok":') // the head, then nothing: the body must arrive within the timeout too
    })
    const c = client({ timeoutMs: 200 })
    const started = Date.now()
    await expect(c.get(url)).rejects.toMatchObject({ name: 'TimeoutError', code: 'CHOPPER_ERR_TIMEOUT' })
    expect(Date.now() - started).toBeLessThan(2000)
    hang = false
    await expect(c.get(url)).resolves.toMatchObject({ data: { ok: true } })
  })

  test('a refused connection rejects with its socket code, and no response', async () => {
    const port = await freePort()
    const err = await client().get(`http://127.0.0.1:${port}/v1/load`).catch((e) => e)
    expect(err.code).toBe('ECONNREFUSED')
    expect(err.response).toBeUndefined()
  })

  test('options are checked', () => {
    expect(() => new JsonClient({ timeoutMs: 0 })).toThrow(/invalid timeoutMs/)
    expect(() => new JsonClient({ clusterToken: 'short' })).toThrow(/invalid clusterToken/)
  })
})
