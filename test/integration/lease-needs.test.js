'use strict'

const { createController } = require('../../controller')
const { createAppServer } = require('../../appserver-lib/index.js')
const compute = require('../../apps/compute')
const { pollUntil } = require('../../core/poll')
const { call } = require('../helpers/http')

const post = (url, body) => call(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })

/**
 * From largeClusterAt targets on, a generation reaches the servers it
 * changes, and a server's lease asks only for the last generation that
 * changed its slices (docs/control-plane.md, "Who needs a generation"): a
 * server a move does not touch keeps its map and its lease; the move's loser
 * and gainer must hold it.
 */
describe('what each server needs', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  test('a move is pushed to the servers it touches; a lease asks each for the last generation that changed its slices', async () => {
    // largeClusterAt 2: selective pushes and needs from two targets on; one server per slice.
    const controller = createController({ startupFenceMs: 0, largeClusterAt: 2, strategyOptions: { minReplicas: 1 } })
    await controller.start()
    closers.push(() => controller.close())
    const servers = {}
    for (const id of ['app-1', 'app-2', 'app-3']) {
      const { app } = await compute.create()
      const s = createAppServer({ id, app, controllerUrl: controller.url })
      await s.start()
      closers.push(() => s.close())
      servers[id] = s
    }
    expect(await controller.settled(5000)).toBe(true)
    const first = controller.assignment.generation
    await pollUntil(() => Object.values(servers).every((s) => s.guard.generation === first && s.guard.leaseValid()), { timeoutMs: 10000, what: 'every server holds the layout under a lease' })

    // Move one of app-1's slices to app-2: app-3's slices do not change.
    const slice = controller.assignment.slices.find((s) => s.servers.length === 1 && s.servers[0] === 'app-1')
    controller.moveSlice(slice.start, 'app-2')
    expect(await controller.settled(5000)).toBe(true)
    const moved = controller.assignment.generation
    expect(moved).toBeGreaterThan(first)
    await pollUntil(() => servers['app-1'].guard.generation === moved && servers['app-2'].guard.generation === moved, { timeoutMs: 10000, what: 'the loser and the gainer hold the move' })
    await pollUntil(() => controller.stats().lagging === 0, { timeoutMs: 10000, what: 'no target lagging behind what it must hold' })
    expect(controller.status().servers['app-3'].push).toMatchObject({ lagging: false })

    // The lease each is granted asks for what it must hold: app-3 the map it holds, the others the move.
    const renew = (id) => post(`${controller.url}/v1/servers/${id}/lease`, { generation: first, drainedGeneration: first })
    const three = await renew('app-3')
    expect(three.status).toBe(200)
    expect(three.body.lease.minGeneration).toBe(first)
    // A small map rides along all the same (here the whole map: smaller than the chain of the move's two steps).
    expect((three.body.diff || three.body.assignment).generation).toBe(moved)
    // The loser must hold the revoke (it stops admitting the slice there), the gainer the grant.
    const loser = (await renew('app-1')).body.lease.minGeneration
    expect(loser).toBeGreaterThan(first)
    expect(loser).toBeLessThanOrEqual(moved)
    expect((await renew('app-2')).body.lease.minGeneration).toBe(moved)
  })
})
