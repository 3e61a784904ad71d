'use strict'

const net = require('node:net')
const { performance } = require('node:perf_hooks')
const { createController } = require('../../controller')
const { DynamoStateStore } = require('../../controller/state-store')
const { createFrontend } = require('../../frontend')
const { createAppServer } = require('../../appserver-lib/index.js')
const compute = require('../../apps/compute')
const { startDynalite } = require('../../apps/kv-cache/embedded')
const { keyChurn, withoutMoving, sameLayout } = require('../../core/assignment')
const { listen, close } = require('../../core/http')
const { pollUntil } = require('../../core/poll')
const { call, putJson, runLimited } = require('../helpers/http')

/** A TCP proxy to `port` whose connections can be cut (a network partition for one client). */
async function cuttableProxy (port) {
  const sockets = new Set()
  let open = true
  const server = net.createServer((client) => {
    if (!open) return client.destroy()
    const upstream = net.connect(port, '127.0.0.1')
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('close', () => sockets.delete(s))
      s.on('error', () => {})
    }
    client.pipe(upstream).pipe(client)
  })
  const bound = await listen(server, 0, '127.0.0.1')
  return {
    endpoint: `http://127.0.0.1:${bound}`,
    cut () {
      open = false
      for (const s of sockets) s.destroy()
    },
    heal () { open = true },
    close: () => { for (const s of sockets) s.destroy(); return close(server) }
  }
}

describe('controller high availability (docs/controller-ha.md)', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })
  let dynamo
  beforeAll(async () => { dynamo = await startDynalite() })
  afterAll(() => dynamo.close())

  let tables = 0
  const storeFor = (endpoint, table) => {
    const store = new DynamoStateStore({ table, endpoint, timeoutMs: 500 })
    closers.push(() => store.close())
    return store
  }

  async function startController (options) {
    const merged = { periodMs: 60000, leaseMs: 1000, electionLeaseMs: 1000, electionCheckMs: 50, ...options }
    for (const k of Object.keys(merged)) if (merged[k] === undefined) delete merged[k] // undefined: the default
    const c = createController(merged)
    await c.start()
    closers.push(() => c.close())
    return c
  }

  async function startMembers (controllerUrl, n = 3, { consistency } = {}) {
    const servers = []
    for (let i = 1; i <= n; i++) {
      const { app } = await compute.create()
      const s = createAppServer({ id: `app-${i}`, app, controllerUrl, reregisterMs: 100, renewMs: 150, ...(consistency ? { consistency } : {}) })
      await s.start()
      closers.push(() => s.close())
      servers.push(s)
    }
    const fe = createFrontend({ controllerUrl, pullIntervalMs: 100 })
    await fe.start()
    closers.push(() => fe.close())
    return { servers, fe }
  }

  /** Traffic and rounds until the layout is no longer the even initial one. */
  async function shapeLayout (controller, fe, keys) {
    for (let round = 0; round < 3; round++) {
      await runLimited(keys.map((k, i) => () => call(`${fe.urls.url}/compute?key=${k}&n=${i < 10 ? 40 : 2}`)), 4)
      await controller.runRound()
      await controller.settled(5000)
    }
  }

  const synced = (controller, { servers, fe }) => controller.published &&
    fe.table.generation === controller.published.generation &&
    servers.every((s) => s.guard.generation === controller.published.generation)

  test('a restarted controller resumes its layout exactly: no key changes owner', async () => {
    const table = `state-${++tables}`
    let controller = await startController({ store: storeFor(dynamo.endpoint, table), controllerId: 'c1' })
    const port = Number(new URL(controller.url).port)
    await pollUntil(() => controller.leading, { what: 'the first controller to lead' })
    const members = await startMembers(controller.url)
    await pollUntil(() => controller.published && Object.keys(controller.published.servers).length === 3, { what: 'three servers registered' })
    const keys = Array.from({ length: 60 }, (_, i) => `key-${i}`)
    await shapeLayout(controller, members.fe, keys)
    await pollUntil(() => synced(controller, members), { what: 'members synced' })
    const before = controller.published
    const acquiredBefore = members.servers.map((s) => s.guard.stats.assignmentsAccepted)

    await controller.close() // releases the lease
    controller = await startController({ store: storeFor(dynamo.endpoint, table), controllerId: 'c1', port })
    await pollUntil(() => controller.leading && synced(controller, members), { timeoutMs: 10000, what: 'the restarted controller leads and members hold its map' })
    const after = controller.published
    expect(after.generation).toBeGreaterThan(before.generation)
    expect(after.epoch).toBeGreaterThan(before.epoch)
    expect(keyChurn(withoutMoving(before), withoutMoving(after))).toBe(0)
    expect(sameLayout(withoutMoving(before), withoutMoving(after))).toBe(true)
    // Every member installed the resumed map; none gained or lost a range.
    members.servers.forEach((s, i) => expect(s.guard.stats.assignmentsAccepted).toBeGreaterThan(acquiredBefore[i]))
    expect(controller.status().servers['app-1'].url).toBe(members.servers[0].urls.url)
    const rs = await runLimited(keys.map((k) => () => call(`${members.fe.urls.url}/compute?key=${k}&n=2`)), 4)
    expect(rs.map((r) => r.status)).toEqual(keys.map(() => 200))
  })

  test('a leader that closes lets the save under way finish before it releases its lease', async () => {
    const real = storeFor(dynamo.endpoint, `state-${++tables}`)
    const events = []
    let gate = null // while set, saves wait for it
    const store = new Proxy(real, {
      get (target, prop) {
        if (prop === 'saveState') {
          return async (...args) => {
            events.push('save')
            if (gate) await gate.promise
            const out = await target.saveState(...args)
            events.push('saved')
            return out
          }
        }
        if (prop === 'releaseLease') return (...args) => { events.push('release'); return target.releaseLease(...args) }
        const v = Reflect.get(target, prop)
        return typeof v === 'function' ? v.bind(target) : v
      }
    })
    const controller = await startController({ store, controllerId: 'c1' })
    await pollUntil(() => controller.leading, { what: 'the controller to lead' })
    const count = (e) => events.filter((x) => x === e).length
    await pollUntil(() => count('save') === count('saved'), { what: 'its first saves done' })
    let open
    gate = { promise: new Promise((resolve) => { open = resolve }) }
    const seen = events.length
    await startMembers(controller.url, 1) // the registration is a new layout to save
    await pollUntil(() => events.slice(seen).includes('save'), { what: 'a save held at the gate' })

    const closing = controller.close()
    await new Promise((resolve) => setImmediate(resolve))
    expect(events).not.toContain('release') // still saving: the lease is kept
    open()
    await closing
    const tail = events.slice(seen)
    expect(tail.indexOf('saved')).toBeGreaterThan(-1)
    expect(tail.lastIndexOf('release')).toBeGreaterThan(tail.lastIndexOf('saved'))
    expect(tail.lastIndexOf('save')).toBeLessThan(tail.lastIndexOf('saved')) // nothing saved after that
  })

  // strict: members admit only under a live lease (1.5 s), shorter than the
  // failover; front ends hold the refused requests until the new leader renews.
  test.each(['available', 'strict'])('killing the leader under load (%s members): a standby leads within 5 s, every request is served, no key moves, and the old epoch is refused', async (consistency) => {
    const table = `state-${++tables}`
    // Defaults for the election (electionLeaseMs 2000) and member leases: the issue asks for 5 s by default.
    const defaults = { electionLeaseMs: undefined, electionCheckMs: undefined, leaseMs: undefined }
    const a = await startController({ store: storeFor(dynamo.endpoint, table), controllerId: 'ca', ...defaults })
    await pollUntil(() => a.leading, { what: 'a to lead' })
    const b = await startController({ store: storeFor(dynamo.endpoint, table), controllerId: 'cb', ...defaults })
    expect(b.leading).toBe(false)
    const members = await startMembers(`${a.url},${b.url}`, 3, { consistency })
    await pollUntil(() => a.published && Object.keys(a.published.servers).length === 3, { what: 'three servers registered' })
    const keys = Array.from({ length: 60 }, (_, i) => `key-${i}`)
    await shapeLayout(a, members.fe, keys)
    await pollUntil(() => synced(a, members), { what: 'members synced' })
    const before = a.published
    // A standby answers members with the leader's address.
    const standby = await call(`${b.url}/v1/assignment`)
    expect(standby.status).toBe(503)
    expect(standby.body.error.code).toBe('CHOPPER_ERR_NOT_LEADER')
    expect(standby.headers['x-chopper-leader']).toBe(a.url)
    // An expected refusal: counted, not logged as a failure.
    expect((await b.registry.getSingleMetric('chopper_controller_standby_refusals_total').get()).values[0].value).toBeGreaterThanOrEqual(1)

    // Steady load through the front end while the leader dies.
    const load = { on: true }
    const statuses = []
    const loader = (async () => {
      for (let i = 0; i < 20000; i++) {
        if (!load.on) break
        statuses.push((await call(`${members.fe.urls.url}/compute?key=${keys[i % keys.length]}&n=2`)).status)
      }
    })()
    await pollUntil(() => statuses.length >= 50, { what: 'load running' })
    const killedAt = performance.now()
    await a.crash()
    await pollUntil(() => b.leading, { timeoutMs: 8000, intervalMs: 10, what: 'the standby to lead' })
    const takeoverMs = performance.now() - killedAt
    await pollUntil(() => synced(b, members), { timeoutMs: 5000, what: 'members hold the new leader\'s map' })
    const servedAfter = statuses.length
    await pollUntil(() => statuses.length >= servedAfter + 50, { what: 'load continuing after the failover' })
    load.on = false
    await loader

    expect(takeoverMs).toBeLessThanOrEqual(5000)
    expect(statuses.filter((s) => s !== 200)).toEqual([])
    const after = b.published
    expect(after.epoch).toBeGreaterThan(before.epoch)
    expect(keyChurn(withoutMoving(before), withoutMoving(after))).toBe(0)
    expect(b.status().rounds.length).toBe(0) // the failover itself ran no balancing
    // A push from the deposed leader (its epoch, any generation) is refused everywhere.
    const forged = { ...before, generation: after.generation + 5 }
    for (const s of members.servers) {
      const r = await putJson(`${s.urls.controlUrl}/v1/assignment`, forged)
      expect(r.status).toBe(409)
      expect(r.body.error.code).toBe('CHOPPER_ERR_STALE_EPOCH')
      expect(s.guard.generation).toBe(after.generation)
    }
    const r = await putJson(`${members.fe.urls.controlUrl}/v1/assignment`, forged)
    expect(r.body.error.code).toBe('CHOPPER_ERR_STALE_EPOCH')
    console.log(`leader killed under load (${consistency}): the standby led after ${Math.round(takeoverMs)} ms; ${statuses.length} requests, all 200`)
  })

  test('a leader cut off from the state store steps down before the standby takes over, and cannot save or push again', async () => {
    const table = `state-${++tables}`
    const proxy = await cuttableProxy(dynamo.port)
    closers.push(() => proxy.close())
    const a = await startController({ store: storeFor(proxy.endpoint, table), controllerId: 'ca' })
    await pollUntil(() => a.leading, { what: 'a to lead' })
    const b = await startController({ store: storeFor(dynamo.endpoint, table), controllerId: 'cb' })
    const members = await startMembers(`${a.url},${b.url}`, 2)
    await pollUntil(() => a.published && Object.keys(a.published.servers).length === 2 && synced(a, members), { what: 'members synced with a' })
    const epochA = a.epoch

    let overlap = false
    proxy.cut()
    await pollUntil(() => {
      if (a.leading && b.leading) overlap = true
      return b.leading
    }, { timeoutMs: 8000, intervalMs: 5, what: 'b to lead' })
    expect(overlap).toBe(false)
    expect(a.leading).toBe(false)
    expect(a.status().role).toBe('standby')
    await pollUntil(() => synced(b, members), { what: 'members follow b' })
    expect(b.epoch).toBeGreaterThan(epochA)
    // Reconnected, a stays a standby: b renews the lease.
    proxy.heal()
    const move = () => call(`${a.url}/v1/move`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ key: 'x', to: 'app-1' }) })
    expect((await move()).status).toBe(503)
    // Once it reads the lease again it names the new leader.
    await pollUntil(async () => (await move()).headers['x-chopper-leader'] === b.url, { what: 'a to name b as the leader' })
    // Members renew their leases with b now.
    await pollUntil(() => b.status().servers['app-1'] && b.status().servers['app-1'].leaseRemainingMs > 0, { what: 'leases renewed by b' })
  })
})
