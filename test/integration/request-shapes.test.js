'use strict'

// The data port's requests and responses are born with every own property
// Express, its router, body-parser, parseurl and the shard guard set
// (appserver-lib/request-shapes.js): a property added after Express swaps
// their prototypes costs microseconds. These tests fail when a request
// through the app server ends with an own property its class did not declare.
const http = require('node:http')
const express = require('express')
const { createController } = require('../../controller')
const { createAppServer, setRequestCost, settleRequest } = require('../../appserver-lib/index.js')
const { pollUntil } = require('../../core/poll')
const { call } = require('../helpers/http')

const { serverOptions } = require('../../appserver-lib/request-shapes')
const { listen, close } = require('../../core/http')

/** The own properties of a request and its response as Node hands them over (before Express). */
async function born () {
  let keys = null
  const server = http.createServer(serverOptions, (req, res) => {
    keys = { req: new Set(Reflect.ownKeys(req)), res: new Set(Reflect.ownKeys(res)) }
    res.end()
  })
  const port = await listen(server, 0, '127.0.0.1')
  try {
    await call(`http://127.0.0.1:${port}/`)
  } finally {
    await close(server)
  }
  return keys
}

describe('request shapes on the app server\'s data port', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  test('a GET and a POST through the shard guard, the router and body-parser add no own property to the request or the response', async () => {
    const seen = []
    const app = express.Router()
    const capture = (req, res) => seen.push({ method: req.method, req: Reflect.ownKeys(req), res: Reflect.ownKeys(res) })
    app.get('/kv/:name', (req, res) => {
      setRequestCost(req, 1)
      res.locals.x = 1
      res.json({ key: req.query.key, name: req.params.name, slice: req.sliceKey, replicas: req.chopperReplicas, path: req.path })
      capture(req, res)
    })
    app.post('/kv/:name', express.json(), (req, res) => {
      settleRequest(req)
      res.status(201).json({ got: req.body })
      capture(req, res)
    })
    const controller = createController({ periodMs: 600000, startupFenceMs: 0 })
    await controller.start()
    closers.push(() => controller.close())
    const server = createAppServer({ id: 'app-1', app, controllerUrl: controller.url })
    await server.start()
    closers.push(() => server.close())
    await pollUntil(() => server.guard.generation > 0 && server.guard.leaseExpiresAt > 0, { what: 'a map and a lease' })

    const got = await call(`${server.urls.url}/kv/a?key=k1`)
    expect(got.status).toBe(200)
    // The getters Express defines on its prototypes still answer (an own
    // property of the same name would hide them).
    expect(got.body).toMatchObject({ key: 'k1', name: 'a', path: '/kv/a' })
    expect(Number.isInteger(got.body.slice)).toBe(true)
    expect(got.body.replicas).toContain('app-1')
    const put = await call(`${server.urls.url}/kv/b?key=k2`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ v: 1 }) })
    expect(put.status).toBe(201)
    expect(put.body).toEqual({ got: { v: 1 } })

    const base = await born()
    expect(seen.map((s) => s.method)).toEqual(['GET', 'POST'])
    for (const s of seen) {
      expect(s.req.filter((k) => !base.req.has(k))).toEqual([])
      expect(s.res.filter((k) => !base.res.has(k))).toEqual([])
    }
  })

  test('the app server\'s data port builds them', async () => {
    let kinds = null
    const app = (req, res) => {
      // Express swaps the prototypes, so instanceof cannot tell; own properties
      // nothing set on this path (enforceOwnership false) can.
      kinds = [Object.hasOwn(req, 'chopperAdmitters'), Object.hasOwn(res, 'locals')]
      res.end('ok')
    }
    const server = createAppServer({ id: 'app-1', app, enforceOwnership: false })
    await server.start()
    closers.push(() => server.close())
    expect((await call(`${server.urls.url}/x?key=k`)).status).toBe(200)
    expect(kinds).toEqual([true, true])
  })
})
