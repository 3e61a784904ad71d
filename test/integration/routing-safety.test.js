'use strict'

const { createController } = require('../../controller')
const { createFrontend } = require('../../frontend')
const { createAppServer } = require('../../appserver-lib/index.js')
const compute = require('../../apps/compute')
const { SliceMap } = require('../../core/slice-map')
const { sliceKey } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { freePort } = require('../../core/http')
const { ControllerClient } = require('../../core/controller-client')
const { call, putJson, runLimited } = require('../helpers/http')

const KEYS = Array.from({ length: 60 }, (_, i) => `k${i}`)

describe('routing safety', () => {
  const closers = []
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c()
  })

  async function controllerUp (options = {}) {
    const controller = createController({ periodMs: 60000, startupFenceMs: 0, strategyOptions: { replicate: false }, ...options }) // single owners: the test checks who serves each key
    await controller.start()
    closers.push(() => controller.close())
    return controller
  }

  async function serverUp (id, controllerUrl) {
    const { app } = await compute.create()
    const s = createAppServer({ id, app, controllerUrl })
    await s.start()
    closers.push(() => s.close())
    return s
  }

  async function frontendUp (controllerUrl, options = {}) {
    const fe = createFrontend({ controllerUrl, pullIntervalMs: 0, ...options })
    await fe.start()
    closers.push(() => fe.close())
    return fe
  }

  test('a stale front end gets 421, refreshes and succeeds; no request is served by a non-owner', async () => {
    const controller = await controllerUp()
    const servers = [await serverUp('app-1', controller.url), await serverUp('app-2', controller.url)]
    const fe = await frontendUp(controller.url)
    // Settled first: a grant still on its way to the front end would land after it unsubscribes.
    expect(await controller.settled(5000)).toBe(true)
    await pollUntil(() => fe.table.generation === controller.published.generation, { what: 'front end synced' })
    // Stop pushes to the front end: it can still pull, but it will not be told.
    expect((await call(`${controller.url}/v1/frontends/${fe.id}`, { method: 'DELETE' })).status).toBe(200)
    const staleGeneration = fe.table.generation

    // A third server joins: the keyspace is re-laid, so many keys change owner.
    servers.push(await serverUp('app-3', controller.url))
    expect(await controller.settled(5000)).toBe(true) // the fenced handoff of the join is granted
    const current = new SliceMap(controller.assignment)
    await pollUntil(() => servers.every((s) => s.guard.generation === current.generation), { what: 'servers synced' })
    expect(fe.table.generation).toBe(staleGeneration)
    const moved = KEYS.filter((k) => new SliceMap(fe.table.map.assignment).ownerOf(sliceKey(k)) !== current.ownerOf(sliceKey(k)))
    expect(moved.length).toBeGreaterThan(0)

    const misdirectedBefore = servers.reduce((n, s) => n + s.guard.stats.misdirected, 0)
    const responses = await runLimited(KEYS.map((k) => () => call(`${fe.urls.url}/compute?key=${k}&n=5`)), 4)
    responses.forEach((r, i) => {
      expect(r.status).toBe(200)
      expect(r.headers['x-served-by']).toBe(current.ownerOf(sliceKey(KEYS[i])))
    })
    // The first moved key hit its old owner, got 421, and the front end pulled the new map.
    expect(servers.reduce((n, s) => n + s.guard.stats.misdirected, 0)).toBeGreaterThan(misdirectedBefore)
    expect(fe.table.generation).toBe(current.generation)
    const metrics = (await call(`${fe.urls.url}/metrics`)).body
    expect(metrics).toMatch(/chopper_frontend_retries_total\{reason="misdirected"\} [1-9]/)
    // Served-by-owner holds on every server's own books: nothing admitted for a non-owned slice.
    for (const s of servers) {
      const own = KEYS.filter((k) => current.ownerOf(sliceKey(k)) === s.guard.serverId).length
      expect(s.guard.stats.admitted).toBe(own)
    }
  })

  // The front end is cut from the controllers: no pushes reach it, and its
  // pulls either fail (nothing listens) or bring back the map it holds (a
  // controller that has not caught up). Neither gets it the moved slices.
  const cuts = {
    'pulls fail': async (fe) => {
      const dead = new ControllerClient({ controllerUrl: `http://127.0.0.1:${await freePort()}` })
      closers.push(() => dead.close())
      fe.table.pull = () => dead.getAssignment(fe.table.generation)
    },
    'pulls bring the old map': async (fe) => {
      const old = fe.table.map.assignment
      fe.table.pull = async () => old
    }
  }
  test.each(Object.keys(cuts))('a front end cut from the controllers (%s) serves moved keys on the server the 421 names', async (cut) => {
    const controller = await controllerUp()
    const servers = [await serverUp('app-1', controller.url), await serverUp('app-2', controller.url)]
    expect(await controller.settled(5000)).toBe(true)
    const fe = await frontendUp(controller.url, { holdMs: 1000 })
    await pollUntil(() => fe.table.generation === controller.published.generation, { what: 'front end synced' })
    expect((await call(`${controller.url}/v1/frontends/${fe.id}`, { method: 'DELETE' })).status).toBe(200)
    await cuts[cut](fe)
    const stale = new SliceMap(fe.table.map.assignment)

    // Slices move between servers the front end knows: three of app-1's go to app-2.
    const slices = new Set(KEYS.filter((k) => stale.ownerOf(sliceKey(k)) === 'app-1').map((k) => stale.indexOf(sliceKey(k))))
    expect(slices.size).toBeGreaterThan(0)
    for (const i of [...slices].slice(0, 3)) {
      expect(controller.moveSlice(stale.starts[i], 'app-2').changed).toBe(true)
      expect(await controller.settled(5000)).toBe(true)
    }
    const current = new SliceMap(controller.assignment)
    await pollUntil(() => servers.every((s) => s.guard.generation === current.generation), { what: 'servers synced' })
    const moved = KEYS.filter((k) => stale.ownerOf(sliceKey(k)) !== current.ownerOf(sliceKey(k)))
    expect(moved.length).toBeGreaterThan(0)

    // The old owner's refusal names the new owner, by id.
    const refusal = await call(`${servers[0].urls.url}/compute?key=${moved[0]}&n=5`)
    expect(refusal.status).toBe(421)
    expect(refusal.headers['x-chopper-generation']).toBe(String(current.generation))
    expect(refusal.headers['x-chopper-owner']).toBe('app-2')

    // Without the hint each moved key would wait out the hold and fail with 503.
    const responses = await runLimited(KEYS.map((k) => () => call(`${fe.urls.url}/compute?key=${k}&n=5`)), 4)
    const failed = responses.filter((r) => r.status !== 200).length
    expect(failed).toBe(0)
    responses.forEach((r, i) => expect(r.headers['x-served-by']).toBe(current.ownerOf(sliceKey(KEYS[i]))))
    expect(fe.table.generation).toBe(stale.generation) // still cut: served without the new map
    const metrics = (await call(`${fe.urls.url}/metrics`)).body
    expect(metrics).toMatch(/chopper_frontend_retries_total\{reason="hint"\} [1-9]/)
  })

  test('a malformed assignment push is rejected with a JSON 4xx and the old map is kept', async () => {
    const controller = await controllerUp()
    const server = await serverUp('app-1', controller.url)
    const fe = await frontendUp(controller.url)
    await pollUntil(() => fe.table.generation === controller.assignment.generation && server.guard.generation === fe.table.generation, { what: 'synced' })
    const good = controller.assignment
    const g = good.generation
    const broken = {
      gap: { ...good, generation: g + 1, slices: [{ start: 0, end: 100, servers: ['app-1'] }, { start: 200, end: 2 ** 32, servers: ['app-1'] }] },
      overlap: { ...good, generation: g + 1, slices: [{ start: 0, end: 300, servers: ['app-1'] }, { start: 200, end: 2 ** 32, servers: ['app-1'] }] },
      unknownServer: { ...good, generation: g + 1, slices: [{ start: 0, end: 2 ** 32, servers: ['ghost'] }] },
      staleGeneration: { ...good, generation: g - 1 },
      badTypes: { ...good, generation: 'seven' },
      notCovering: { ...good, generation: g + 1, slices: [{ start: 0, end: 2 ** 31, servers: ['app-1'] }] }
    }
    for (const target of [server.urls.controlUrl, fe.urls.controlUrl]) {
      for (const [name, a] of Object.entries(broken)) {
        const r = await putJson(`${target}/v1/assignment`, a)
        expect({ name, status: r.status }).toEqual({ name, status: name === 'staleGeneration' ? 409 : 400 })
        expect(r.body.error.code).toMatch(/^CHOPPER_ERR_(INVALID_ASSIGNMENT|STALE_GENERATION)$/)
        expect(typeof r.body.error.message).toBe('string')
      }
      const notJson = await call(`${target}/v1/assignment`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{"generation": 9,' })
      expect(notJson.status).toBe(400)
      expect(notJson.body.error.code).toBe('CHOPPER_ERR_MALFORMED_BODY')
      const kept = await call(`${target}/v1/assignment`)
      expect(kept.body.generation).toBe(g)
    }
    // Still routing on the old map.
    const r = await call(`${fe.urls.url}/compute?key=alpha&n=3`)
    expect(r.status).toBe(200)
    expect(r.headers['x-chopper-generation']).toBe(String(g))
  })

  test('control routes are not reachable on the app server data port', async () => {
    const controller = await controllerUp()
    const server = await serverUp('app-1', controller.url)
    const push = await putJson(`${server.urls.url}/v1/assignment`, controller.assignment)
    expect(push.status).toBe(400) // treated as data: no key
    expect(push.body.error.code).toBe('CHOPPER_ERR_MISSING_KEY')
    const load = await call(`${server.urls.url}/v1/load?key=a`)
    expect(load.body.entries).toBeUndefined()
    expect(load.status).toBe(404)
    expect((await call(`${server.urls.controlUrl}/v1/load`)).body.entries).toEqual(expect.any(Array))
  })

  test('a leaving server\'s slices are reassigned at once; an unreachable owner gets a clear 502', async () => {
    const controller = await controllerUp()
    const a = await serverUp('app-1', controller.url)
    const b = await serverUp('app-2', controller.url)
    // app-2's join is laid out first: a leave within the same batch would
    // cancel it, and no new generation would come of it.
    expect(await controller.settled(5000)).toBe(true)
    const fe = await frontendUp(controller.url)
    // Leave the pristine state so the leave goes through the strategy, not a re-layout.
    await runLimited(KEYS.map((k) => () => call(`${fe.urls.url}/compute?key=${k}&n=5`)), 4)
    await controller.runRound()
    const before = controller.assignment.generation
    await b.close() // graceful: deregisters
    expect(await controller.settled(5000)).toBe(true)
    expect(controller.assignment.generation).toBeGreaterThan(before)
    expect(controller.assignment.slices.every((s) => s.servers[0] === 'app-1')).toBe(true)
    await pollUntil(() => fe.table.generation === controller.assignment.generation, { what: 'front end got the new map' })
    const rs = await runLimited(KEYS.map((k) => () => call(`${fe.urls.url}/compute?key=${k}&n=5`)), 4)
    expect(rs.every((r) => r.status === 200 && r.headers['x-served-by'] === 'app-1')).toBe(true)

    // Now the last server leaves too: the front end's map still names it, and no newer map exists.
    await a.close()
    const r = await call(`${fe.urls.url}/compute?key=k1&n=5`)
    expect([502, 503]).toContain(r.status)
    expect(r.body.error.code).toMatch(/^CHOPPER_ERR_UPSTREAM_/)

    // A server joining afterwards gets a generation above the one the front end holds, so it is accepted.
    const held = fe.table.generation
    await serverUp('app-3', controller.url)
    expect(controller.assignment.generation).toBeGreaterThan(held)
    await pollUntil(() => fe.table.generation === controller.assignment.generation, { what: 'front end took the new map' })
    expect((await call(`${fe.urls.url}/compute?key=k1&n=5`)).headers['x-served-by']).toBe('app-3')
  })

  test('the controller evicts a server that stops answering load collection', async () => {
    const controller = await controllerUp({ evictAfterFailures: 2 })
    await serverUp('app-1', controller.url)
    const { app } = await compute.create()
    // Registered by hand so that closing it does not deregister: a crash.
    const b = createAppServer({ id: 'app-2', app })
    const urls = await b.start()
    closers.push(() => b.close())
    const reg = await call(`${controller.url}/v1/servers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id: 'app-2', ...urls }) })
    expect(reg.status).toBe(201)
    expect(await controller.settled(5000)).toBe(true) // joins are laid out in batches
    await b.close()
    await controller.runRound()
    expect(Object.keys(controller.assignment.servers)).toContain('app-2')
    await controller.runRound()
    expect(await controller.settled(5000)).toBe(true) // the eviction is laid out in the next membership batch
    expect(Object.keys(controller.assignment.servers)).toEqual(['app-1'])
    const metrics = (await call(`${controller.url}/metrics`)).body
    expect(metrics).toMatch(/chopper_controller_evictions_total 1/)
  })

  test('with enforceOwnership: false an app server serves every key (baselines without a slice map)', async () => {
    const { app } = await compute.create()
    const open = createAppServer({ id: 'open', app, enforceOwnership: false })
    const strict = createAppServer({ id: 'strict', app })
    for (const s of [open, strict]) { await s.start(); closers.push(() => s.close()) }
    const assignment = { generation: 1, slices: [{ start: 0, end: 2 ** 32, servers: ['elsewhere'] }], servers: { elsewhere: { url: 'http://127.0.0.1:1' } } }
    for (const s of [open, strict]) expect((await putJson(`${s.urls.controlUrl}/v1/assignment`, assignment)).status).toBe(200)
    const r = await call(`${open.urls.url}/compute?key=a&n=3`)
    expect(r.status).toBe(200)
    expect(r.headers['x-served-by']).toBe('open')
    expect((await call(`${strict.urls.url}/compute?key=a&n=3`)).status).toBe(421)
  })

  test('bad registration input gets a JSON 400', async () => {
    const controller = await controllerUp()
    const r1 = await putJson(`${controller.url}/v1/servers`, {})
    expect(r1.status).toBe(404)
    const r2 = await call(`${controller.url}/v1/servers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ id: 'x y', url: 'nope' }) })
    expect(r2.status).toBe(400)
    expect(r2.body.error.code).toBe('CHOPPER_ERR_INVALID_ARG')
    const r3 = await call(`${controller.url}/v1/servers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{bad' })
    expect(r3.status).toBe(400)
    expect(r3.body.error.code).toBe('CHOPPER_ERR_MALFORMED_BODY')
    const r4 = await call(`${controller.url}/v1/assignment`)
    expect(r4.status).toBe(503)
    expect(r4.body.error.code).toBe('CHOPPER_ERR_NO_ASSIGNMENT')
  })
})
