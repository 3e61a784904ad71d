'use strict'

const { createController } = require('../controller')
const { createFrontend } = require('../frontend')
const { createAppServer } = require('../appserver-lib/index.js')
const compute = require('../apps/compute')
const { KEYSPACE_SIZE, sliceKey } = require('../core/keyspace')
const { pollUntil } = require('../core/poll')
const { silent } = require('../core/logger')
const { createSigner } = require('./auth')

/**
 * The components under fuzz, each started in this process on 127.0.0.1 port
 * 0 with real dependencies. A target is:
 *
 *   { name, origins: { control, data? }, ctx, legit(): [{ origin, req, check(res), then? }],
 *     health: [{ origin, path }], snapshot(): Promise<string>, prepare(req): req[], close() }
 *
 * `ctx` is what the surfaces need to aim (the installed generation, a server
 * id the component knows, keys it owns; `signed` with a cluster token).
 * `snapshot` is everything a malformed call must not change (the installed
 * generation and layout). `legit()` gives the well-formed requests mixed
 * into each batch, which must keep succeeding (a wedged server would answer
 * errors to everything); `then` is one more sent after the first succeeded
 * (a read after a write). `prepare` turns a generated request into what is
 * sent: signed, or with its signature spoiled (fuzz/auth.js).
 *
 * Options that differ from the components' defaults, and why:
 * - controller `periodMs` 1 h: no balancing round during the run, so the
 *   layout only changes if a fuzzed call changes it;
 * - controller `leaseMs` 10 s: the fuzzer shares the event loop with the
 *   members renewing their leases; a lapse would move slices, which is not
 *   what is under test here;
 * - app servers `holdMs` 100 ms (appserver target): a request routed with a
 *   (fuzzed) newer generation waits this long for a map that never comes,
 *   then gets its 421.
 */

const LEGIT_KEYS = 64

/** Keys `legit-0`, `legit-1`, ... whose slice key is in [start, end). */
function keysIn (start, end, n = 4) {
  const out = []
  for (let i = 0; out.length < n; i++) {
    const k = `legit-${i}`
    const s = sliceKey(k)
    if (s >= start && s < end) out.push(k)
  }
  return out
}

const isJsonOk = (res) => res.status === 200 && /^application\/json/.test(res.headers['content-type'] || '')

/** One legit compute request per batch, taking the keys in turn. */
function computeLegit (origin, keys) {
  const list = keys.map((key) => ({
    origin,
    req: { method: 'GET', path: `/compute?key=${encodeURIComponent(key)}&n=3`, headers: {} },
    check: (res) => {
      if (!isJsonOk(res)) return `expected 200 JSON, got ${res.status}`
      const body = JSON.parse(res.text)
      return body.key === key && body.n === 3 ? null : `unexpected body ${res.text.slice(0, 200)}`
    }
  }))
  let turn = 0
  return () => [list[turn++ % list.length]]
}

/**
 * How a target sends: `prepare` (sign what it verifies, when it has a
 * token) and `send`, which sends a prepared request.
 */
function sender (client, { clusterToken, signs, contextOf }) {
  const prepare = clusterToken === undefined ? (req) => [req] : createSigner({ token: clusterToken, signs, contextOf })
  const send = (origin, req) => client.send(origin, prepare(req)[0])
  return { prepare, send }
}

async function pushOrThrow (send, controlUrl, assignment) {
  const res = await send(controlUrl, { origin: 'control', method: 'PUT', path: '/v1/assignment', headers: { 'content-type': 'application/json' }, body: JSON.stringify(assignment) })
  if (res.status !== 200) throw new Error(`baseline push to ${controlUrl} failed: ${res.status} ${res.text}`)
}

const controlOnly = (req) => req.origin === 'control'

/** The installed map as the control port reports it, with the in-process generation. */
async function installed (send, controlUrl, generation) {
  const res = await send(controlUrl, { origin: 'control', method: 'GET', path: '/v1/assignment' })
  return `${res.status} ${res.text} in-process@${generation}`
}

function closer () {
  const list = []
  return {
    add: (fn) => list.push(fn),
    close: async () => { for (const c of list.splice(0).reverse()) await c() }
  }
}

/**
 * A controller with two compute app servers and a front end registered
 * (the cluster the controller's API serves), waited on until every member
 * holds the controller's assignment.
 */
async function controllerTarget ({ client, clusterToken, logger = silent }) {
  const c = closer()
  try {
    const auth = clusterToken === undefined ? {} : { clusterToken }
    const { prepare, send } = sender(client, { clusterToken, signs: controlOnly })
    const controller = createController({ periodMs: 3600 * 1000, leaseMs: 10000, startupFenceMs: 0, logger, ...auth })
    const { url: controllerUrl } = await controller.start()
    c.add(() => controller.close())
    const app = await compute.create({})
    const members = []
    for (const id of ['app-1', 'app-2']) {
      const server = createAppServer({ id, app: app.app, cost: app.cost, controllerUrl, logger, ...auth })
      await server.start()
      c.add(() => server.close())
      members.push(server)
    }
    const fe = createFrontend({ controllerUrl, pullIntervalMs: 0, logger, ...auth })
    await fe.start()
    c.add(() => fe.close())
    const getAssignment = () => send(controllerUrl, { origin: 'control', method: 'GET', path: '/v1/assignment' })
    // Joins are laid out in batches, the second after a fenced handoff: settled means no handoff nor batch pending.
    if (!await controller.settled(15000)) throw new Error('the controller did not settle')
    const published = await pollUntil(async () => {
      const res = await getAssignment()
      if (res.status !== 200) return null
      const a = JSON.parse(res.text)
      const both = Object.keys(a.servers).length === 2
      return both && members.every((m) => m.guard.generation === a.generation) && fe.table.generation === a.generation ? a : null
    }, { timeoutMs: 15000, intervalMs: 20, what: 'the controller cluster to settle' })

    return {
      name: 'controller',
      origins: { control: controllerUrl },
      ctx: { generation: published.generation, knownServer: 'app-1', knownServers: ['app-1', 'app-2'], knownFrontend: fe.id, signed: clusterToken !== undefined },
      legit: () => [{
        origin: 'control',
        req: { origin: 'control', method: 'GET', path: '/v1/assignment' },
        check: (res) => (isJsonOk(res) && JSON.parse(res.text).generation === published.generation ? null : `expected the published assignment, got ${res.status} ${res.text.slice(0, 200)}`)
      }],
      health: [{ origin: 'control', path: '/healthz' }],
      async snapshot () {
        const res = await getAssignment()
        const held = members.map((m) => `${m.guard.serverId}@${m.guard.generation}`).join(',')
        return `${res.status} ${res.text} members ${held} frontend@${fe.table.generation}`
      },
      prepare,
      close: c.close
    }
  } catch (err) {
    await c.close()
    throw err
  }
}

/**
 * A compute app server with no controller (maps are pushed), owning the
 * lower half of the keyspace; the upper half belongs to a server that does
 * not exist.
 */
async function appServerTarget ({ client, clusterToken, logger = silent }) {
  const c = closer()
  try {
    const { prepare, send } = sender(client, { clusterToken, signs: controlOnly })
    const app = await compute.create({})
    const id = 'app-f'
    const server = createAppServer({ id, app: app.app, cost: app.cost, holdMs: 100, logger, ...(clusterToken === undefined ? {} : { clusterToken }) })
    const { url, controlUrl } = await server.start()
    c.add(() => server.close())
    const half = KEYSPACE_SIZE / 2
    const generation = Date.now()
    await pushOrThrow(send, controlUrl, {
      generation,
      slices: [{ start: 0, end: half, servers: [id] }, { start: half, end: KEYSPACE_SIZE, servers: ['other'] }],
      servers: { [id]: { url }, other: { url: 'http://127.0.0.1:9' } }
    })
    const owned = keysIn(0, half, LEGIT_KEYS)
    return {
      name: 'appserver',
      origins: { control: controlUrl, data: url },
      ctx: { generation, serverId: id, ownedKeys: owned, dataPaths: ['/compute'], signed: clusterToken !== undefined },
      legit: computeLegit('data', owned.slice(0, 8)),
      health: [{ origin: 'data', path: '/healthz' }, { origin: 'control', path: '/healthz' }],
      snapshot: () => installed(send, controlUrl, server.guard.generation),
      prepare,
      close: c.close
    }
  } catch (err) {
    await c.close()
    throw err
  }
}

/**
 * A front end with no controller (maps are pushed) in front of two compute
 * app servers, each owning half of the keyspace: a request the front end
 * routes by one key and the app server admits by another meets a 421.
 */
async function frontendTarget ({ client, clusterToken, logger = silent }) {
  const c = closer()
  try {
    const auth = clusterToken === undefined ? {} : { clusterToken }
    const { prepare, send } = sender(client, { clusterToken, signs: controlOnly })
    const app = await compute.create({})
    const backends = []
    for (const id of ['app-b1', 'app-b2']) {
      const server = createAppServer({ id, app: app.app, cost: app.cost, logger, ...auth })
      const urls = await server.start()
      c.add(() => server.close())
      backends.push({ id, server, ...urls })
    }
    const fe = createFrontend({ pullIntervalMs: 0, logger, ...auth })
    const { url, controlUrl } = await fe.start()
    c.add(() => fe.close())
    const generation = Date.now()
    const half = KEYSPACE_SIZE / 2
    const baseline = {
      generation,
      slices: [{ start: 0, end: half, servers: ['app-b1'] }, { start: half, end: KEYSPACE_SIZE, servers: ['app-b2'] }],
      servers: Object.fromEntries(backends.map((b) => [b.id, { url: b.url }]))
    }
    for (const b of backends) await pushOrThrow(send, b.controlUrl, baseline)
    await pushOrThrow(send, controlUrl, baseline)
    const keys = [...keysIn(0, half, LEGIT_KEYS / 2), ...keysIn(half, KEYSPACE_SIZE, LEGIT_KEYS / 2)]
    return {
      name: 'frontend',
      origins: { control: controlUrl, data: url },
      ctx: { generation, serverId: 'app-b1', ownedKeys: keys, dataPaths: ['/compute'], signed: clusterToken !== undefined },
      legit: computeLegit('data', [...keys.slice(0, 4), ...keys.slice(-4)]),
      health: [{ origin: 'data', path: '/healthz' }, { origin: 'control', path: '/healthz' }],
      snapshot: async () => `${await installed(send, controlUrl, fe.table.generation)} backends@${backends.map((b) => b.server.guard.generation).join(',')}`,
      prepare,
      close: c.close
    }
  } catch (err) {
    await c.close()
    throw err
  }
}

/**
 * kv-cache hosted by appserver-lib (the shard guard first), against a real
 * redis-server and an in-process dynalite, owning every key. Values are
 * limited to 4 KB so oversized ones are cheap to send. With a cluster token
 * its fence route takes signed fences only.
 */
async function kvCacheTarget ({ client, clusterToken, logger = silent, maxValueBytes = 4096 }) {
  const { startDynalite } = require('../apps/kv-cache/embedded')
  const kvCache = require('../apps/kv-cache')
  const fenceClient = require('../apps/kv-cache/fence-client')
  const c = closer()
  try {
    const id = 'kv-f'
    const auth = clusterToken === undefined ? {} : { clusterToken }
    const isFence = (req) => req.origin === 'data' && req.path.toLowerCase().startsWith(fenceClient.FENCE_PATH)
    const { prepare, send } = sender(client, {
      clusterToken,
      signs: (req) => req.origin === 'control' || isFence(req),
      contextOf: (req) => {
        if (!isFence(req) || typeof fenceClient.fenceContext !== 'function') return undefined
        const h = Object.fromEntries(Object.entries(req.headers || {}).map(([k, v]) => [k.toLowerCase(), v]))
        return fenceClient.fenceContext({ to: id, phase: h['x-kv-fence'], fenceId: h['x-kv-fence-id'], from: h['x-kv-fence-from'], generation: h['x-chopper-generation'], version: h['x-kv-version'], contentType: h['content-type'] })
      }
    })
    const dynamo = await startDynalite({ logger })
    c.add(() => dynamo.close())
    const kv = await kvCache.create({ serverId: id, dynamoEndpoint: dynamo.endpoint, table: 'fuzz-kv', maxValueBytes, spawnRedis: true, logger, ...auth })
    c.add(() => kv.close())
    if (kv.cache.backend !== 'redis') throw new Error('kv-cache fuzzing needs redis-server on PATH (it fell back to the in-process cache)')
    const server = createAppServer({ id, app: kv.app, onAcquire: kv.onAcquire, onRelease: kv.onRelease, onAssignment: kv.onAssignment, consistency: kv.consistency, logger, ...auth })
    const { url, controlUrl } = await server.start()
    c.add(() => server.close())
    const generation = Date.now()
    await pushOrThrow(send, controlUrl, { generation, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: [id] }], servers: { [id]: { url } } })
    // A handful of keys written and read back in every batch: a bounded set, so
    // the store does not grow with the run.
    const legitKeys = Array.from({ length: 8 }, (_, i) => `legit-kv-${i}`)
    let turn = 0
    const legit = () => {
      const key = legitKeys[turn++ % legitKeys.length]
      const value = `v-${turn}`
      return [{
        origin: 'data',
        req: { method: 'PUT', path: `/kv?key=${key}`, headers: { 'content-type': 'text/plain' }, body: value },
        check: (res) => (res.status === 204 ? null : `legit PUT: expected 204, got ${res.status} ${res.text.slice(0, 200)}`),
        then: {
          origin: 'data',
          req: { method: 'GET', path: `/kv?key=${key}`, headers: {} },
          check: (res) => (res.status === 200 && res.text === value ? null : `legit GET after PUT: expected 200 ${value}, got ${res.status} ${res.text.slice(0, 200)}`)
        }
      }]
    }
    return {
      name: 'kv-cache',
      origins: { control: controlUrl, data: url },
      ctx: { generation, serverId: id, maxValueBytes, ownedKeys: legitKeys, dataPaths: ['/kv'], signed: clusterToken !== undefined },
      legit,
      health: [{ origin: 'data', path: '/healthz' }, { origin: 'control', path: '/healthz' }],
      snapshot: () => installed(send, controlUrl, server.guard.generation),
      prepare,
      close: c.close
    }
  } catch (err) {
    await c.close()
    throw err
  }
}

const TARGETS = { controller: controllerTarget, appserver: appServerTarget, frontend: frontendTarget, 'kv-cache': kvCacheTarget }

module.exports = { TARGETS, keysIn }
