'use strict'

const crypto = require('node:crypto')
const http = require('node:http')
const { createController } = require('../../controller')
const { createFrontend } = require('../../frontend')
const { createAppServer } = require('../../appserver-lib/index.js')
const compute = require('../../apps/compute')
const { createClient, readCredential } = require('../../client/index.js')
const { signRequest, signRead } = require('../../core/request-signing')
const { signMap, hashBody, MAP_HEADER } = require('../../core/cluster-auth')
const { pollUntil } = require('../../core/poll')
const { call } = require('../helpers/http')

// Where @chopper/client reads the map (issue 39): the controller, with a read
// credential when the cluster has a token, or any member; and what it does
// while the controller is away.
const TOKEN = crypto.randomBytes(32).toString('base64url')
const KEYS = Array.from({ length: 200 }, (_, i) => `k${i}`)

/** The status of an answer to a lease-stream upgrade request (chopper-lease/1) with `headers`. */
function upgradeStatus (url, headers) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { ...headers, connection: 'Upgrade', upgrade: 'chopper-lease/1' } })
    req.once('upgrade', (res, socket) => { socket.destroy(); resolve(101) })
    req.once('response', (res) => { res.resume(); resolve(res.statusCode) })
    req.once('error', reject)
  })
}

describe('@chopper/client map sources', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  async function cluster ({ clusterToken } = {}) {
    const controller = createController({ periodMs: 600000, startupFenceMs: 0, clusterToken })
    await controller.start()
    let controllerUp = true
    closers.push(() => controllerUp && controller.close())
    const servers = []
    for (const id of ['app-1', 'app-2']) {
      const { app } = await compute.create()
      const s = createAppServer({ id, app, controllerUrl: controller.url, clusterToken })
      await s.start()
      closers.push(() => s.close())
      servers.push(s)
    }
    await pollUntil(async () => (await controller.settled(100)) && servers.every((s) => s.guard.generation === controller.published.generation), { what: 'both servers hold the map' })
    const stopController = async () => { controllerUp = false; await controller.close() }
    return { controller, servers, stopController }
  }

  function clientOf (options) {
    const client = createClient({ pollIntervalMs: 50, mapTimeoutMs: 500, ...options })
    closers.push(() => client.close())
    return client
  }

  /** Every key answered 200 by the server the map names. */
  async function routesAll (client) {
    for (const key of KEYS) {
      const res = await client.request({ path: `/compute?key=${key}&n=1`, method: 'GET' })
      await res.body.dump()
      expect({ key, status: res.statusCode }).toEqual({ key, status: 200 })
      expect(res.headers['x-served-by']).toBe(client.lookup(key).servers[0].id)
    }
  }

  test('the client keeps routing with its last map while the controller is stopped', async () => {
    const { controller, stopController } = await cluster()
    const client = clientOf({ controllerUrl: controller.url })
    const generation = await client.ready()
    await routesAll(client)
    // An unchanged map costs a 304, not the map.
    await pollUntil(() => client.source.stats.unchanged >= 2, { what: 'two 304s' })
    await stopController()
    // Its pulls fail from now on; the map it holds stays.
    const failures = client.source.stats.failures
    await pollUntil(() => client.source.stats.failures >= failures + 3, { what: 'three failed map reads' })
    expect(client.generation).toBe(generation)
    await routesAll(client)
  })

  test('a client that knows only members reads the map from a front end or an app server, and moves to the next when one is gone', async () => {
    const { controller, servers } = await cluster()
    const fe = createFrontend({ controllerUrl: controller.url, pullIntervalMs: 0 })
    await fe.start()
    closers.push(() => fe.close())
    await pollUntil(() => fe.table.generation === controller.published.generation, { what: 'the front end holds the map' })
    // The front end first; it closes, and the next read goes to app-1.
    const client = clientOf({ members: [fe.urls.controlUrl, servers[0].urls.controlUrl] })
    expect(await client.ready()).toBe(controller.published.generation)
    await routesAll(client)
    await fe.close()
    const pulls = client.source.stats.pulls
    await pollUntil(() => client.source.stats.pulls >= pulls + 3 && client.source.current === 1, { what: 'reads from app-1' })
    // A move reaches the client through app-1's map.
    const slice = controller.published.slices[0]
    controller.moveSlice(slice.start, slice.servers[0] === 'app-1' ? 'app-2' : 'app-1')
    expect(await controller.settled(10000)).toBe(true)
    await pollUntil(() => client.generation === controller.published.generation, { what: 'the client learned the move from app-1' })
    await routesAll(client)
  })

  test('with a cluster token, the read credential reads the map and nothing else: every control route refuses it', async () => {
    const { controller, servers } = await cluster({ clusterToken: TOKEN })
    const credential = readCredential(TOKEN)
    expect(credential).toMatch(/^chopper-read\.[A-Za-z0-9_-]{43}$/)
    expect(credential).not.toContain(TOKEN)

    // Without it, the controller does not hand out the map; with it, it does.
    const blind = clientOf({ controllerUrl: controller.url })
    await expect(blind.ready({ timeoutMs: 300 })).rejects.toMatchObject({ code: 'CHOPPER_ERR_NO_ASSIGNMENT' })
    const client = clientOf({ controllerUrl: controller.url, readCredential: credential })
    expect(await client.ready()).toBe(controller.published.generation)
    await routesAll(client)

    // A leaked credential, used every way it can sign, on every control route.
    const generation = controller.published.generation
    const c = controller.url
    const s1 = servers[0]
    const forged = { ...controller.published, generation: generation + 1 }
    const routes = [
      ['POST', `${c}/v1/servers`, { id: 'evil', url: 'http://127.0.0.1:1', controlUrl: 'http://127.0.0.1:2' }],
      ['POST', `${c}/v1/servers/app-1/lease`, { generation, drainedGeneration: generation }],
      ['POST', `${c}/v1/servers/app-1/drain`, {}],
      ['DELETE', `${c}/v1/servers/app-1`],
      ['POST', `${c}/v1/frontends`, { id: 'fe-evil', controlUrl: 'http://127.0.0.1:2' }],
      ['POST', `${c}/v1/move`, { key: 'k1', to: 'app-2' }],
      ['PUT', `${s1.urls.controlUrl}/v1/assignment`, forged],
      ['GET', `${s1.urls.controlUrl}/v1/load`]
    ]
    for (const [method, url, json] of routes) {
      const u = new URL(url)
      const path = u.pathname + u.search
      const body = json === undefined ? undefined : JSON.stringify(json)
      const ways = {
        'as the cluster token': signRequest({ token: credential, method, path, body }),
        'as a read credential': signRead({ credential, method, path }),
        'as a map signature': { [MAP_HEADER]: signMap({ token: credential, bodyHash: hashBody(body) }) }
      }
      for (const [way, headers] of Object.entries(ways)) {
        const r = await call(url, { method, headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers }, body })
        expect({ method, url, way, refused: r.status === 401 || r.status === 403 }).toEqual({ method, url, way, refused: true })
      }
    }
    // The lease stream (an upgrade, verified outside Express): a credential cannot open one either.
    for (const headers of [signRequest({ token: credential, method: 'GET', path: '/v1/servers/app-1/lease-stream' }), signRead({ credential, path: '/v1/servers/app-1/lease-stream' })]) {
      expect(await upgradeStatus(`${c}/v1/servers/app-1/lease-stream`, headers)).toBe(403)
    }
    // Nothing changed.
    expect(Object.keys(controller.status().servers).sort()).toEqual(['app-1', 'app-2'])
    expect(Object.keys(controller.status().frontends)).toEqual([])
    expect(controller.published.generation).toBe(generation)
    expect(servers.every((s) => s.guard.generation === generation)).toBe(true)
  })
})
