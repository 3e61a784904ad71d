'use strict'

const express = require('express')
const { createFrontend } = require('../../frontend')
const { createAppServer } = require('../../appserver-lib/index.js')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { call, putJson } = require('../helpers/http')
const { AxiosForwarder } = require('../../bench/lib/axios-forwarder')

/** 'axios': the bench's axios forwarder, injected (the front end ships only undici's). */
const forwarderFor = (name) => (name === 'axios' ? new AxiosForwarder({ connections: 64, timeoutMs: 30000 }) : name)

/** An app that echoes what it received, so forwarding can be checked byte for byte. */
function echoApp () {
  const app = express.Router()
  app.all('/{*rest}', async (req, res) => {
    let bytes = 0
    let sum = 0
    for await (const chunk of req) { bytes += chunk.length; for (const b of chunk) sum = (sum + b) % 65521 }
    res.setHeader('x-echo-custom', String(req.headers['x-custom'] || ''))
    res.status(201).json({ method: req.method, url: req.originalUrl, bytes, sum, generation: req.headers['x-chopper-generation'], host: req.headers['x-forwarded-host'] })
  })
  return app
}

describe('front-end forwarding', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  async function setup (frontendOptions = {}) {
    const server = createAppServer({ id: 'echo', app: echoApp() })
    await server.start()
    closers.push(() => server.close())
    const fe = createFrontend({ bufferLimit: 1024, ...frontendOptions })
    await fe.start()
    closers.push(() => fe.close())
    const assignment = { generation: 4, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['echo'] }], servers: { echo: { url: server.urls.url } } }
    expect((await putJson(`${fe.urls.controlUrl}/v1/assignment`, assignment)).status).toBe(200)
    expect((await putJson(`${server.urls.controlUrl}/v1/assignment`, assignment)).status).toBe(200)
    return { fe, server }
  }

  for (const [forwarder, dataServer] of [['undici', 'fast'], ['axios', 'fast'], ['undici', 'node']]) {
    test(`${forwarder}, ${dataServer} data server: forwards method, path, query, headers and a body, small (buffered) and large (streamed)`, async () => {
      const { fe } = await setup({ forwarder: forwarderFor(forwarder), dataServer })
      for (const size of [10, 300000]) {
        const body = Buffer.alloc(size, 7)
        const r = await call(`${fe.urls.url}/some/path?key=k1&x=y%20z`, { method: 'POST', headers: { 'x-custom': 'hello', 'content-type': 'application/octet-stream' }, body })
        expect(r.status).toBe(201)
        expect(r.body).toMatchObject({ method: 'POST', url: '/some/path?key=k1&x=y%20z', bytes: size, sum: (size * 7) % 65521, generation: '4' })
        expect(r.headers['x-echo-custom']).toBe('hello')
        expect(r.headers['x-served-by']).toBe('echo')
        expect(r.headers['x-chopper-generation']).toBe('4')
      }
      const h = await call(`${fe.urls.url}/p`, { headers: { 'x-chopper-key': 'k2' } })
      expect(h.status).toBe(201)
    })
  }

  for (const dataServer of ['fast', 'node']) {
    test(`${dataServer} data server: a large answer without Content-Length streams through byte for byte, and HEAD gets only its head`, async () => {
      const body = Buffer.alloc(3 * 1024 * 1024)
      for (let i = 0; i < body.length; i++) body[i] = (i * 31) % 251
      const app = express.Router()
      app.get('/big', (req, res) => {
        res.setHeader('content-type', 'application/octet-stream')
        // Several writes and no length: chunked from the app server.
        for (let at = 0; at < body.length; at += 256 * 1024) res.write(body.subarray(at, at + 256 * 1024))
        res.end()
      })
      const server = createAppServer({ id: 'big', app })
      await server.start()
      closers.push(() => server.close())
      const fe = createFrontend({ dataServer })
      await fe.start()
      closers.push(() => fe.close())
      const assignment = { generation: 2, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['big'] }], servers: { big: { url: server.urls.url } } }
      for (const url of [fe.urls.controlUrl, server.urls.controlUrl]) expect((await putJson(`${url}/v1/assignment`, assignment)).status).toBe(200)
      const { request } = require('undici')
      for (let i = 0; i < 2; i++) { // twice: the connection is reused after a chunked answer
        const res = await request(`${fe.urls.url}/big?key=k${i}`)
        const got = Buffer.from(await res.body.arrayBuffer())
        expect(res.statusCode).toBe(200)
        expect(res.headers['transfer-encoding']).toBe('chunked')
        expect(res.headers['x-served-by']).toBe('big')
        expect(got.equals(body)).toBe(true)
      }
      const head = await request(`${fe.urls.url}/big?key=k`, { method: 'HEAD' })
      expect(head.statusCode).toBe(200)
      expect((await head.body.arrayBuffer()).byteLength).toBe(0)
    })
  }

  test('a 421 that survives the refresh becomes a clear 503, buffered or streamed', async () => {
    const { fe, server } = await setup()
    // The server is told it owns nothing; the front end (no controller to pull from) still routes to it.
    const moved = { generation: 5, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['other'] }], servers: { other: { url: 'http://127.0.0.1:1' }, echo: { url: server.urls.url } } }
    expect((await putJson(`${server.urls.controlUrl}/v1/assignment`, moved)).status).toBe(200)
    for (const size of [10, 5000]) { // below and above bufferLimit (1024 here)
      const r = await call(`${fe.urls.url}/p?key=k`, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: Buffer.alloc(size, 1) })
      expect(r.status).toBe(503)
      expect(r.body.error.code).toBe('CHOPPER_ERR_UPSTREAM_UNAVAILABLE')
    }
    expect(server.guard.stats.admitted).toBe(0)
    // The small body was retried once after the refresh (2 misdirected); the streamed one was not (1).
    expect(server.guard.stats.misdirected).toBe(3)
  })

  test('front-end /healthz is 503 until an assignment arrives; /metrics is Prometheus text', async () => {
    const fe = createFrontend()
    await fe.start()
    closers.push(() => fe.close())
    expect((await call(`${fe.urls.url}/healthz`)).status).toBe(503)
    const r = await call(`${fe.urls.url}/x?key=a`)
    expect(r.status).toBe(503)
    expect(r.body.error.code).toBe('CHOPPER_ERR_NO_ASSIGNMENT')
    const m = await call(`${fe.urls.url}/metrics`)
    expect(m.body).toMatch(/chopper_frontend_errors_total\{code="CHOPPER_ERR_NO_ASSIGNMENT"\} 1/)
  })
  test('a client that sends Expect: 100-continue gets its PUT forwarded (the key decoded as Express decodes it)', async () => {
    const { fe } = await setup()
    const http = require('node:http')
    const body = Buffer.alloc(300, 7)
    const answer = await new Promise((resolve, reject) => {
      const req = http.request(`${fe.urls.url}/x?key=a%20b+c`, { method: 'PUT', headers: { expect: '100-continue', 'content-length': body.length } })
      req.on('continue', () => req.end(body))
      req.on('response', (res) => {
        let text = ''
        res.on('data', (d) => { text += d })
        res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(text), headers: res.headers }))
      })
      req.on('error', reject)
    })
    expect(answer.status).toBe(201)
    expect(answer.body).toMatchObject({ method: 'PUT', bytes: 300 })
    expect(answer.headers['x-served-by']).toBe('echo')
  })

  test('a client that leaves before the app answers is not retried and aborts the upstream request', async () => {
    let started = 0
    let aborted = 0
    const slow = express.Router()
    slow.get('/slow', (req, res) => {
      started++
      res.on('close', () => { if (!res.writableFinished) aborted++ })
    })
    const server = createAppServer({ id: 'slow', app: slow })
    await server.start()
    closers.push(() => server.close())
    const fe = createFrontend({})
    await fe.start()
    closers.push(() => fe.close())
    const assignment = { generation: 4, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['slow'] }], servers: { slow: { url: server.urls.url } } }
    expect((await putJson(`${fe.urls.controlUrl}/v1/assignment`, assignment)).status).toBe(200)
    expect((await putJson(`${server.urls.controlUrl}/v1/assignment`, assignment)).status).toBe(200)
    const http = require('node:http')
    const req = http.get(`${fe.urls.url}/slow?key=k`)
    req.on('error', () => {})
    const { pollUntil } = require('../../core/poll')
    await pollUntil(() => started === 1, { what: 'the request to reach the app' })
    req.destroy()
    await pollUntil(() => aborted === 1, { what: 'the upstream request to be aborted' })
    const metrics = (await call(`${fe.urls.url}/metrics`)).body
    expect(metrics).not.toMatch(/chopper_frontend_retries_total\{/)
    expect(started).toBe(1)
  })

  for (const dataServer of ['fast', 'node']) {
    test(`${dataServer} data server: a connection that breaks after the request was sent: a read is retried, a write is answered 503 CHOPPER_ERR_WRITE_INDETERMINATE and never replayed`, async () => {
      // An app that "dies" on its first request of each method: it destroys the connection without answering.
      const seen = { GET: 0, PUT: 0, DELETE: 0 }
      const app = express.Router()
      app.all('/{*rest}', async (req, res) => {
        for await (const chunk of req) seen.bytes = (seen.bytes || 0) + chunk.length // read the body: the write has arrived
        seen[req.method]++
        if (seen[req.method] === 1) return req.socket.destroy()
        res.status(200).json({ method: req.method })
      })
      const server = createAppServer({ id: 'dies', app })
      await server.start()
      closers.push(() => server.close())
      const fe = createFrontend({ bufferLimit: 1024, dataServer })
      await fe.start()
      closers.push(() => fe.close())
      const assignment = { generation: 4, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['dies'] }], servers: { dies: { url: server.urls.url } } }
      expect((await putJson(`${fe.urls.controlUrl}/v1/assignment`, assignment)).status).toBe(200)
      expect((await putJson(`${server.urls.controlUrl}/v1/assignment`, assignment)).status).toBe(200)

      const get = await call(`${fe.urls.url}/x?key=k`)
      expect(get.status).toBe(200) // retried once on the same server
      expect(seen.GET).toBe(2)
      for (const method of ['PUT', 'DELETE']) {
        const w = await call(`${fe.urls.url}/x?key=k`, { method, headers: { 'content-type': 'text/plain' }, body: method === 'PUT' ? 'v1' : undefined })
        expect(w.status).toBe(503)
        expect(w.body.error.code).toBe('CHOPPER_ERR_WRITE_INDETERMINATE')
        expect(w.body.error.message).toMatch(/may or may not have been applied/)
        expect(seen[method]).toBe(1) // not replayed: it may have applied
      }
      const metrics = (await call(`${fe.urls.url}/metrics`)).body
      expect(metrics).toMatch(/chopper_frontend_errors_total\{code="CHOPPER_ERR_WRITE_INDETERMINATE"\} 2/)
    })
  }
})
