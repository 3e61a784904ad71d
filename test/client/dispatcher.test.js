'use strict'

const { Readable, Writable } = require('node:stream')
const express = require('express')
const { request, interceptors } = require('undici')
const { createAppServer } = require('../../appserver-lib/index.js')
const { createClient } = require('../../client/index.js')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { putJson } = require('../helpers/http')

/** An app that echoes what it received: method, target, body size and checksum, the generation header. */
function echoApp (id, stats) {
  const app = express.Router()
  app.all('/slow', (req, res) => {
    stats.slow++
    req.on('close', () => { stats.closed++ })
  })
  app.all('/{*rest}', async (req, res) => {
    let bytes = 0
    let sum = 0
    for await (const chunk of req) { bytes += chunk.length; for (const b of chunk) sum = (sum + b) % 65521 }
    res.status(201).json({ servedBy: id, method: req.method, url: req.originalUrl, bytes, sum, generation: req.headers['x-chopper-generation'], custom: req.headers['x-custom'] || null })
  })
  return app
}

const checksum = (buf) => { let s = 0; for (const b of buf) s = (s + b) % 65521; return s }
const mapOn = (generation, owner, servers) => ({ generation, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: [owner] }], servers })

describe('the client as an undici Dispatcher: bodies, replays, aborts, refusals', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  /** Servers a and b (no controller: maps are pushed here), every key on a; a client reading maps from a's control port. */
  async function setup (clientOptions = {}) {
    const stats = { slow: 0, closed: 0 }
    const servers = {}
    for (const id of ['a', 'b']) {
      const s = createAppServer({ id, app: echoApp(id, stats) })
      await s.start()
      closers.push(() => s.close())
      servers[id] = s
    }
    const urls = { a: { url: servers.a.urls.url }, b: { url: servers.b.urls.url } }
    const push = async (map) => {
      for (const s of Object.values(servers)) expect((await putJson(`${s.urls.controlUrl}/v1/assignment`, map)).status).toBe(200)
    }
    await push(mapOn(4, 'a', urls))
    const client = createClient({ members: servers.a.urls.controlUrl, pollIntervalMs: 0, ...clientOptions })
    closers.push(() => client.close())
    expect(await client.ready()).toBe(4)
    return { servers, urls, push, client, stats }
  }

  test('bodies of every form reach the owner byte for byte: fetch\'s stream, a Buffer, a Readable past bufferLimit', async () => {
    const { client } = await setup({ bufferLimit: 1024 })
    const json = JSON.stringify({ name: 'Ada', pad: 'x'.repeat(500) })
    const f = await fetch('http://svc/profile?key=u1&x=y%20z', { method: 'POST', dispatcher: client, body: json, headers: { 'content-type': 'application/json', 'x-custom': 'hello' } })
    expect(f.status).toBe(201)
    expect(f.headers.get('x-served-by')).toBe('a')
    expect(await f.json()).toEqual({ servedBy: 'a', method: 'POST', url: '/profile?key=u1&x=y%20z', bytes: json.length, sum: checksum(Buffer.from(json)), generation: '4', custom: 'hello' })

    const buf = Buffer.alloc(5000, 7)
    const r = await request('http://anything/p', { dispatcher: client, method: 'PUT', body: buf, headers: { 'x-chopper-key': 'u2' } })
    expect(await r.body.json()).toMatchObject({ method: 'PUT', bytes: 5000, sum: checksum(buf) })

    const big = Buffer.alloc(300000)
    for (let i = 0; i < big.length; i++) big[i] = (i * 31) % 251
    const s = await client.request({ path: '/p?key=u3', method: 'POST', body: Readable.from([big.subarray(0, 100000), big.subarray(100000)]) })
    expect(s.statusCode).toBe(201)
    expect(await s.body.json()).toMatchObject({ bytes: big.length, sum: checksum(big) })
  })

  test('a 421 replays a buffered body on the server a newer map names; a streamed one past bufferLimit is not replayed', async () => {
    const { client, push, urls } = await setup({ bufferLimit: 1024 })
    // Every key moves to b; the client still holds generation 4, which names a.
    await push(mapOn(5, 'b', urls))
    expect(client.generation).toBe(4)
    const body = JSON.stringify({ n: 1 })
    const f = await fetch('http://svc/p?key=u1', { method: 'POST', dispatcher: client, body })
    expect(f.status).toBe(201)
    expect(await f.json()).toMatchObject({ servedBy: 'b', bytes: body.length, generation: '5' })
    expect(client.generation).toBe(5)

    // A body past bufferLimit is streamed once: a 421 fails it, typed, instead of replaying half of it.
    await push(mapOn(6, 'a', urls))
    const big = Buffer.alloc(4096, 1)
    const err = await client.request({ path: '/p?key=u1', method: 'POST', headers: { 'content-length': String(big.length) }, body: Readable.from([big]) }).catch((e) => e)
    expect(err).toMatchObject({ code: 'CHOPPER_ERR_UPSTREAM_UNAVAILABLE' })
    // In-flight counters are back to zero after the 421s.
    expect(client.replicas.inflight()).toEqual({})
  })

  test('Pool-shaped use: stream(), and a composed interceptor (undici\'s newer handler API)', async () => {
    const { client } = await setup()
    let text = ''
    await client.stream({ path: '/s?key=u1', method: 'GET' }, () => new Writable({ write (chunk, enc, cb) { text += chunk; cb() } }))
    expect(JSON.parse(text)).toMatchObject({ servedBy: 'a', url: '/s?key=u1' })
    const composed = client.compose(interceptors.retry({ maxRetries: 1 }))
    const res = await composed.request({ origin: 'http://svc', path: '/c?key=u2', method: 'GET' })
    expect(res.statusCode).toBe(201)
    expect(res.headers['x-served-by']).toBe('a')
    expect(await res.body.json()).toMatchObject({ url: '/c?key=u2', generation: '4' })
  })

  test('an aborted request stops its upstream request and leaves no count behind', async () => {
    const { client, stats } = await setup()
    const abort = new AbortController()
    const pending = fetch('http://svc/slow?key=u1', { dispatcher: client, signal: abort.signal })
    await pollUntil(() => stats.slow === 1, { what: 'the slow request at the server' })
    expect(client.replicas.inflight()).toEqual({ a: 1 })
    abort.abort()
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' })
    await pollUntil(() => stats.closed === 1, { what: 'the upstream request closed' })
    expect(client.replicas.inflight()).toEqual({})
  })

  test('no key, a CONNECT, and a closed client are typed failures', async () => {
    const { client } = await setup()
    await expect(client.request({ path: '/p', method: 'GET' })).rejects.toMatchObject({ code: 'CHOPPER_ERR_MISSING_KEY' })
    // fetch wraps it: TypeError('fetch failed') with the Chopper error as its cause (under
    // jest's realm Node's fetch re-wraps the cause in an Error carrying its text).
    const failed = await fetch('http://svc/p?key=', { dispatcher: client }).catch((e) => e)
    expect(failed.name).toBe('TypeError')
    expect(String(failed.cause)).toMatch(/MissingKeyError: missing key/)
    await expect(client.connect({ path: '/p?key=u1' })).rejects.toMatchObject({ code: 'CHOPPER_ERR_INVALID_ARG' })
    await client.close()
    await expect(client.request({ path: '/p?key=u1', method: 'GET' })).rejects.toMatchObject({ code: 'CHOPPER_ERR_CLIENT_CLOSED' })
  })

  test('options are checked by name', () => {
    expect(() => createClient({})).toThrow(/invalid controllerUrl: pass controllerUrl or members/)
    expect(() => createClient({ members: 'ftp://x' })).toThrow(/invalid members/)
    expect(() => createClient({ members: 'http://127.0.0.1:1', holdMs: 0 })).toThrow(/invalid holdMs/)
    expect(() => createClient({ members: 'http://127.0.0.1:1', readCredential: 'the-cluster-token-itself' })).toThrow(/invalid readCredential/)
    expect(() => createClient({ members: 'http://127.0.0.1:1', replicaChoice: 'best' })).toThrow(/invalid replicaChoice/)
  })
})
