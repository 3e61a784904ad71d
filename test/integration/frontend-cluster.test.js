'use strict'

const { createController } = require('../../controller')
const { createAppServer } = require('../../appserver-lib/index.js')
const { startFrontendCluster } = require('../../frontend')
const compute = require('../../apps/compute')
const { sliceKey } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { call, runLimited } = require('../helpers/http')

/** The lowest generation any worker holds, from the aggregated /metrics (the gauge aggregates by min). */
async function workersGeneration (url) {
  const text = (await call(`${url}/metrics`)).body
  const m = /^chopper_frontend_assignment_generation (\d+)$/m.exec(text)
  return m ? Number(m[1]) : -1
}

describe('front end on every core (node:cluster)', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  test('two workers share the data port; every push reaches every worker; metrics aggregate across workers', async () => {
    const controller = createController({ periodMs: 600000, startupFenceMs: 0 })
    await controller.start()
    closers.push(() => controller.close())
    for (const id of ['app-1', 'app-2']) {
      const { app } = await compute.create()
      const s = createAppServer({ id, app, controllerUrl: controller.url })
      await s.start()
      closers.push(() => s.close())
    }
    await controller.settled(5000)
    const fe = await startFrontendCluster({ workers: 2, controllerUrl: controller.url, pullIntervalMs: 0, logLevel: 'silent' })
    closers.push(() => fe.close())
    expect(fe.workers).toBe(2)
    // One front end to the controller: the primary, which relays.
    expect(Object.keys(controller.status().frontends)).toEqual([fe.id])
    await pollUntil(async () => (await workersGeneration(fe.url)) === controller.assignment.generation, { what: 'both workers hold the current map' })

    // Many pushes: after each, the slowest worker catches up without any request having to meet a 421.
    const key = 'k-moving'
    for (let i = 0; i < 5; i++) {
      const owner = controller.assignment.slices.find((s) => s.end > sliceKey(key)).servers[0]
      controller.moveSlice(sliceKey(key), owner === 'app-1' ? 'app-2' : 'app-1')
      await controller.settled(5000)
      const g = controller.assignment.generation
      await pollUntil(async () => (await workersGeneration(fe.url)) === g, { what: `both workers at generation ${g}` })
    }
    const before = Number(/^chopper_frontend_requests_total\{code="200"\} (\d+)$/m.exec((await call(`${fe.url}/metrics`)).body)?.[1] || 0)
    const owner = controller.assignment.slices.find((s) => s.end > sliceKey(key)).servers[0]
    const rs = await runLimited(Array.from({ length: 40 }, () => () => call(`${fe.url}/compute?key=${key}&n=3`)), 8)
    expect(rs.every((r) => r.status === 200 && r.headers['x-served-by'] === owner)).toBe(true)
    const metrics = (await call(`${fe.url}/metrics`)).body
    expect(Number(/^chopper_frontend_requests_total\{code="200"\} (\d+)$/m.exec(metrics)[1])).toBe(before + 40)
    // No request needed a 421: the pushes reached both workers.
    expect(metrics).not.toMatch(/^chopper_frontend_misdirected_total [1-9]/m)
    // The control port serves the same aggregate.
    expect((await call(`${fe.controlUrl}/metrics`)).body).toMatch(/chopper_frontend_requests_total\{code="200"\}/)
  })
})
