'use strict'

const { performance } = require('node:perf_hooks')
const { createController } = require('../../controller')
const { createFrontend } = require('../../frontend')
const { createAppServer } = require('../../appserver-lib/index.js')
const compute = require('../../apps/compute')
const { pollUntil } = require('../../core/poll')
const { call, runLimited } = require('../helpers/http')

describe('controller restart', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  test('members re-register with a restarted controller, which numbers its assignments above theirs', async () => {
    let controller = createController({ periodMs: 60000, startupFenceMs: 0 })
    await controller.start()
    const port = Number(new URL(controller.url).port)
    const servers = []
    for (const id of ['app-1', 'app-2']) {
      const { app } = await compute.create()
      const s = createAppServer({ id, app, controllerUrl: controller.url, reregisterMs: 100 })
      await s.start()
      closers.push(() => s.close())
      servers.push(s)
    }
    const fe = createFrontend({ controllerUrl: controller.url, pullIntervalMs: 100 })
    await fe.start()
    closers.push(() => fe.close())
    // Some history so the members hold a generation well above 1.
    const keys = Array.from({ length: 40 }, (_, i) => `k${i}`)
    for (let round = 0; round < 3; round++) {
      await runLimited(keys.map((k) => () => call(`${fe.urls.url}/compute?key=${k}&n=2`)), 4)
      await controller.runRound()
      await controller.settled(5000)
    }
    const oldGeneration = controller.assignment.generation
    await pollUntil(() => fe.table.generation === oldGeneration, { what: 'front end synced' })
    expect(oldGeneration).toBeGreaterThan(2)

    await controller.close()
    controller = createController({ periodMs: 60000, port })
    await controller.start()
    closers.push(() => controller.close())

    await pollUntil(() => controller.assignment && Object.keys(controller.assignment.servers).length === 2 && !controller.status().handoff.inProgress &&
      fe.table.generation === controller.assignment.generation &&
      servers.every((s) => s.guard.generation === controller.assignment.generation),
    { timeoutMs: 10000, what: 'members relearned and synced' })
    expect(controller.assignment.generation).toBeGreaterThan(oldGeneration)
    const rs = await runLimited(keys.map((k) => () => call(`${fe.urls.url}/compute?key=${k}&n=2`)), 4)
    expect(rs.every((r) => r.status === 200)).toBe(true)
  })
  test('a restarted controller issues nothing until the leases its predecessor may have granted have lapsed', async () => {
    let controller = createController({ periodMs: 60000, startupFenceMs: 0 })
    await controller.start()
    const port = Number(new URL(controller.url).port)
    const servers = []
    for (const id of ['app-1', 'app-2']) {
      const { app } = await compute.create()
      const s = createAppServer({ id, app, controllerUrl: controller.url, consistency: 'strict', reregisterMs: 100 })
      await s.start()
      closers.push(() => s.close())
      servers.push(s)
    }
    await controller.settled(5000)
    await controller.close()
    const restartedAt = performance.now()
    controller = createController({ periodMs: 60000, port })
    await controller.start()
    closers.push(() => controller.close())
    // Members re-register at once (their renewals get 404), reporting the generation they hold.
    await pollUntil(() => Object.keys(controller.status().servers).length === 2, { what: 'members re-registered' })
    let firstAt = null
    await pollUntil(() => {
      if (!controller.assignment) return false
      firstAt = performance.now()
      return true
    }, { intervalMs: 5, what: 'the first assignment' })
    expect(firstAt - restartedAt).toBeGreaterThanOrEqual(controller.status().leaseMs)
    await pollUntil(() => servers.every((s) => s.guard.generation === controller.assignment.generation && s.guard.leaseValid()), { what: 'members leased again' })
  })
})
