'use strict'

const { createController } = require('../../controller')
const { createFrontend } = require('../../frontend')
const { createAppServer } = require('../../appserver-lib/index.js')
const compute = require('../../apps/compute')
const { pollUntil } = require('../../core/poll')
const { call, putJson } = require('../helpers/http')

const post = (url, body) => call(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })

describe('the forged-generation wedge (issue 11)', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  test('a push or registration with generation 2^53 - 1 is refused, and the cluster keeps taking the controller\'s pushes', async () => {
    const controller = createController({ periodMs: 60000, startupFenceMs: 0 })
    await controller.start()
    closers.push(() => controller.close())
    const servers = []
    for (const id of ['app-1', 'app-2']) {
      const { app } = await compute.create()
      const s = createAppServer({ id, app, controllerUrl: controller.url })
      await s.start()
      closers.push(() => s.close())
      servers.push(s)
    }
    const fe = createFrontend({ controllerUrl: controller.url, pullIntervalMs: 0 })
    await fe.start()
    closers.push(() => fe.close())
    const synced = () => servers.every((s) => s.guard.generation === controller.published.generation) && fe.table.generation === controller.published.generation
    await pollUntil(() => controller.published && Object.keys(controller.published.servers).length === 2 && synced(), { what: 'members synced' })

    // The forged push: a valid layout under the highest generation there is.
    const forged = { ...controller.published, generation: Number.MAX_SAFE_INTEGER }
    for (const target of [...servers.map((s) => s.urls.controlUrl), fe.urls.controlUrl]) {
      const r = await putJson(`${target}/v1/assignment`, forged)
      expect(r.status).toBe(400)
      expect(r.body.error.code).toBe('CHOPPER_ERR_IMPLAUSIBLE')
    }
    // Nor can a member's claim drag the controller's numbering up there.
    const reg = await post(`${controller.url}/v1/servers`, { id: 'app-9', url: 'http://127.0.0.1:1', controlUrl: 'http://127.0.0.1:2', generation: Number.MAX_SAFE_INTEGER })
    expect(reg.status).toBe(400)
    expect(reg.body.error.code).toBe('CHOPPER_ERR_IMPLAUSIBLE')
    const fer = await post(`${controller.url}/v1/frontends`, { id: 'fe-9', controlUrl: 'http://127.0.0.1:2', generation: Number.MAX_SAFE_INTEGER })
    expect(fer.status).toBe(400)

    // The controller's next push still lands everywhere.
    const before = controller.published.generation
    const slice = controller.published.slices[0]
    const to = slice.servers[0] === 'app-1' ? 'app-2' : 'app-1'
    controller.moveSlice(slice.start, to)
    expect(await controller.settled(10000)).toBe(true)
    expect(controller.published.generation).toBeGreaterThan(before)
    expect(controller.published.generation).toBeLessThan(Date.now() + 3600e3)
    await pollUntil(synced, { what: 'members took the next push' })
  })
})
