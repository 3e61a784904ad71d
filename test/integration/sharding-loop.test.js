'use strict'

const { createController } = require('../../controller')
const { getStrategy } = require('../../controller/strategies')
const { createFrontend } = require('../../frontend')
const { createAppServer } = require('../../appserver-lib/index.js')
const compute = require('../../apps/compute')
const { evenAssignment } = require('../../core/assignment')
const { SliceMap } = require('../../core/slice-map')
const { sliceKey } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { call, runLimited } = require('../helpers/http')

const SERVER_IDS = ['app-1', 'app-2', 'app-3']
const fakeServers = Object.fromEntries(SERVER_IDS.map((id) => [id, { url: 'http://127.0.0.1:1' }]))

/**
 * 10 keys, 3 hot (weight 10 each) and 7 cold (weight 1). The hot keys are
 * chosen so that both the initial even split and the consistent-hash ring put
 * all three on the same server: the worst case for a static strategy.
 */
function skewedKeys () {
  const even = new SliceMap(evenAssignment(fakeServers))
  const ring = new SliceMap(getStrategy('consistent-hash').initial(fakeServers, {}))
  const hot = []
  const cold = []
  for (let i = 0; hot.length < 3 || cold.length < 7; i++) {
    const k = `user-${i}`
    const h = sliceKey(k)
    if (hot.length < 3 && even.ownerOf(h) === 'app-1' && ring.ownerOf(h) === 'app-1') hot.push(k)
    else if (cold.length < 7 && even.ownerOf(h) !== 'app-1') cold.push(k)
  }
  return { hot, cold }
}

/** One window of traffic: every hot key 10 times, every cold key once, interleaved. */
function windowSequence ({ hot, cold }) {
  const seq = []
  for (let r = 0; r < 10; r++) {
    seq.push(...hot)
    if (r < cold.length) seq.push(cold[r])
  }
  return seq
}

async function startStack (strategy, periodMs) {
  const closers = []
  const controller = createController({ strategy, periodMs, startupFenceMs: 0, quietBelow: 0, ...(strategy === 'chopper' ? { strategyOptions: { minReplicas: 1 } } : {}) }) // the paper's start: one server per slice
  const { url: controllerUrl } = await controller.start()
  closers.push(() => controller.close())
  const servers = []
  for (const id of SERVER_IDS) {
    const { app } = await compute.create()
    const s = createAppServer({ id, app, controllerUrl })
    await s.start()
    closers.push(() => s.close())
    servers.push(s)
  }
  const fe = createFrontend({ controllerUrl })
  await fe.start()
  closers.push(() => fe.close())
  await pollUntil(() => controller.assignment && Object.keys(controller.assignment.servers).length === 3 && !controller.status().handoff.inProgress && fe.table.generation === controller.assignment.generation, { timeoutMs: 10000, what: 'cluster ready' })
  return { controller, servers, fe, close: async () => { for (const c of closers.reverse()) await c() } }
}

/** Send windows of skewed traffic; return the max/mean of X-Served-By counts per window. */
async function driveWindows (fe, keys, { windows, stopBelow }) {
  const seq = windowSequence(keys)
  const imbalances = []
  for (let w = 0; w < windows; w++) {
    const counts = Object.fromEntries(SERVER_IDS.map((id) => [id, 0]))
    const responses = await runLimited(seq.map((k) => () => call(`${fe.urls.url}/compute?key=${k}&n=20`)), 8)
    for (const r of responses) {
      expect(r.status).toBe(200)
      counts[r.headers['x-served-by']]++
    }
    const values = Object.values(counts)
    const imb = Math.max(...values) / (values.reduce((a, b) => a + b, 0) / values.length)
    imbalances.push(imb)
    if (stopBelow !== undefined && imb < stopBelow) break
  }
  return imbalances
}

describe('the sharding loop end to end', () => {
  let stack
  afterEach(async () => { if (stack) await stack.close(); stack = null })

  test('chopper brings max/mean of requests per server below 1.25 within a few periods', async () => {
    const keys = skewedKeys()
    stack = await startStack('chopper', 250)
    // The layout before any traffic puts the window's requests this unevenly (a
    // window's own figure depends on how many rounds ran during it, on a busy machine).
    const initial = new SliceMap(stack.controller.assignment)
    const perServer = Object.fromEntries(SERVER_IDS.map((id) => [id, 0]))
    for (const k of windowSequence(keys)) perServer[initial.ownerOf(sliceKey(k))]++
    const counts = Object.values(perServer)
    expect(Math.max(...counts) / (counts.reduce((a, b) => a + b, 0) / counts.length)).toBeGreaterThan(2)
    // Each window is ~37 requests; a period is 250 ms, so a window spans about one period.
    const deadline = Date.now() + 30000
    let imbalances = []
    while (Date.now() < deadline) {
      imbalances = imbalances.concat(await driveWindows(stack.fe, keys, { windows: 1 }))
      if (imbalances.length >= 3 && imbalances.slice(-3).every((x) => x < 1.25)) break
    }
    // Converged: three windows in a row under 1.25.
    expect(imbalances.slice(-3).every((x) => x < 1.25)).toBe(true)
    const status = (await call(`${stack.controller.url}/v1/status`)).body
    expect(status.rounds.some((r) => r.churn > 0)).toBe(true)
    expect(status.generation).toBeGreaterThan(1)
  })

  test('consistent-hash leaves the same traffic imbalanced', async () => {
    const keys = skewedKeys()
    stack = await startStack('consistent-hash', 250)
    const generation = stack.controller.assignment.generation
    const imbalances = []
    const until = Date.now() + 2500 // ten periods
    while (Date.now() < until) imbalances.push(...await driveWindows(stack.fe, keys, { windows: 1 }))
    expect(imbalances.length).toBeGreaterThan(2)
    expect(Math.min(...imbalances)).toBeGreaterThan(1.25)
    expect(stack.controller.assignment.generation).toBe(generation) // never moves anything
  })
})
