'use strict'

const http = require('node:http')
const { createController } = require('../../controller')
const { createAppServer } = require('../../appserver-lib/index.js')
const compute = require('../../apps/compute')
const { KEYSPACE_SIZE, sliceKey } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { call, putJson } = require('../helpers/http')

const H = KEYSPACE_SIZE / 2
const keyIn = (lo, hi) => { for (let i = 0; ; i++) { const k = `k${i}`; const h = sliceKey(k); if (h >= lo && h < hi) return k } }
const post = (url, body) => call(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })

describe('ownership edge cases', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  async function server (options = {}) {
    const { app } = await compute.create()
    const s = createAppServer({ id: 'me', app, ...options })
    await s.start()
    closers.push(() => s.close())
    return s
  }

  test('a client that goes away while its request is held is never admitted, and the drain count does not stick', async () => {
    const s = await server()
    const servers = { me: { url: s.urls.url }, other: { url: 'http://127.0.0.1:1' } }
    const layout = (generation, moving) => ({ generation, servers, slices: [{ start: 0, end: H, servers: ['me'], ...(moving ? { moving: true } : {}) }, { start: H, end: KEYSPACE_SIZE, servers: ['other'] }] })
    expect((await putJson(`${s.urls.controlUrl}/v1/assignment`, layout(1, true))).status).toBe(200)
    // A request for the moving slice, routed with generation 1: held until the grant.
    const key = keyIn(0, H)
    const req = http.get(`${s.urls.url}/compute?key=${key}&n=2`, { headers: { 'x-chopper-generation': '1' } })
    req.on('error', () => {})
    await pollUntil(() => s.guard.stats.held === 1, { what: 'the request to be held' })
    req.destroy() // the client gives up
    await pollUntil(() => req.destroyed && req.socket && req.socket.destroyed, { what: 'the socket to close' })
    // ...and the server has seen it close (the held request's 'close'), before the grant comes
    const connections = () => new Promise((resolve) => s.listeners.data.getConnections((err, n) => resolve(err ? -1 : n)))
    await pollUntil(async () => (await connections()) === 0, { what: 'the server to see the client leave' })
    const admittedBefore = s.guard.stats.admitted
    // The grant arrives: the abandoned request must not run, and nothing stays in flight.
    const grant = await putJson(`${s.urls.controlUrl}/v1/assignment`, layout(2, false))
    expect(grant.status).toBe(200)
    expect(grant.body.drained).toBe(true)
    expect(s.guard.stats.admitted).toBe(admittedBefore)
    expect(s.guard.drainedGeneration).toBe(2)
    // A later revoke is acknowledged at once, not after the drain timeout.
    const revoke = await putJson(`${s.urls.controlUrl}/v1/assignment`, { ...layout(3, false), slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['other'] }] })
    expect(revoke.body).toMatchObject({ drained: true, drainedGeneration: 3 })
  })

  test('draining the last app server is refused with a JSON 409, and it still deregisters', async () => {
    const controller = createController({ periodMs: 600000, startupFenceMs: 0, strategyOptions: { replicate: false } })
    await controller.start()
    closers.push(() => controller.close())
    const s = await server({ controllerUrl: controller.url })
    const r = await post(`${controller.url}/v1/servers/me/drain`, {})
    expect(r.status).toBe(409)
    expect(r.body.error.code).toBe('CHOPPER_ERR_LAST_SERVER')
    expect(controller.assignment.slices.every((x) => x.servers[0] === 'me')).toBe(true)
    const out = await s.drain()
    expect(out).toEqual({ drained: false, reason: 'CHOPPER_ERR_LAST_SERVER' })
    expect(controller.status().servers.me).toBeUndefined()
  })

  test('lease and drain routes answer bad input with a JSON 4xx; a reported drainedGeneration is clamped to what the member holds', async () => {
    const controller = createController({ periodMs: 600000, startupFenceMs: 0, strategyOptions: { replicate: false } })
    await controller.start()
    closers.push(() => controller.close())
    await server({ controllerUrl: controller.url })
    const { app } = await compute.create()
    const b = createAppServer({ id: 'b', app, controllerUrl: controller.url })
    await b.start()
    closers.push(() => b.close())
    await controller.settled(5000)
    for (const body of [{}, { generation: -1, drainedGeneration: 0 }, { generation: 1, drainedGeneration: 'x' }]) {
      const r = await post(`${controller.url}/v1/servers/me/lease`, body)
      expect(r.status).toBe(400)
      expect(r.body.error.code).toBe('CHOPPER_ERR_INVALID_ARG')
    }
    expect((await post(`${controller.url}/v1/servers/nobody/lease`, { generation: 1, drainedGeneration: 1 })).status).toBe(404)
    expect((await post(`${controller.url}/v1/servers/nobody/drain`, {})).status).toBe(404)
    expect((await post(`${controller.url}/v1/move`, { key: 'x', to: 'nobody' })).status).toBe(404)
    expect((await post(`${controller.url}/v1/move`, { key: 'x', sliceKey: 3, to: 'me' })).status).toBe(400)

    // A member claiming to have drained a generation it does not hold does not acknowledge a revoke.
    // 'ghost' is registered by hand: its control port refuses, so only its own claims reach the controller.
    const reg = await post(`${controller.url}/v1/servers`, { id: 'ghost', url: 'http://127.0.0.1:9', controlUrl: 'http://127.0.0.1:7' })
    expect(reg.status).toBe(201)
    await controller.settled(5000)
    const slice = controller.assignment.slices[0]
    controller.moveSlice(slice.start, 'ghost')
    expect(await controller.settled(5000)).toBe(true) // ghost's gain needs no revoke from ghost
    const held = controller.assignment.generation
    controller.moveSlice(slice.start, 'me')
    expect(controller.status().handoff.waitingFor).toHaveProperty('ghost')
    await post(`${controller.url}/v1/servers/ghost/lease`, { generation: held, drainedGeneration: Number.MAX_SAFE_INTEGER })
    expect(controller.status().servers.ghost.drainedGeneration).toBe(held)
    expect(controller.status().handoff.inProgress).toBe(true)
    // Granted once ghost's lease lapsed instead.
    expect(await controller.settled(5000)).toBe(true)
    expect(controller.status().handoff.leaseLapses).toBeGreaterThanOrEqual(1)
  })
})
