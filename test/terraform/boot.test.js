'use strict'

// The environment files the boot scripts write, run by the real entry
// points the systemd units start: `node bin/<component>.js` with exactly that
// environment (plus PATH), as EnvironmentFile= gives it. As many controllers
// as controller_count deploys run from the one controller file, sharing a
// state table created with dynamodb.tf's key schema, and the members get
// every one of them in their controller list. Only what belongs to the
// machine is rewritten, after checking it is what the deployment sets:
// listen and advertise addresses become 127.0.0.1, ports become free ones,
// instance ids differ per controller, and the DynamoDB endpoints and the
// Redis URL point at a local dynalite and redis-server. Every variable name
// and every other value is the deployment's own.

const { freePorts } = require('../../core/http')
const net = require('node:net')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { DynamoDBClient, CreateTableCommand, GetItemCommand } = require('@aws-sdk/client-dynamodb')
const { pollUntil } = require('../../core/poll')
const { startDynalite, spawnRedis } = require('../../apps/kv-cache/embedded')
const { call } = require('../helpers/http')
const { ENV } = require('../../core/settings')
const { ROOT, loadConfig, resolve } = require('./terraform-config')
const { COMPONENTS, BOOT_VALUES, createRenderer } = require('./user-data-render')

const PORT_VARS = ['CHOPPER_FRONTEND_PORT', 'CHOPPER_FRONTEND_CONTROL_PORT', 'CHOPPER_APP_PORT', 'CHOPPER_APP_CONTROL_PORT']
const HOST_VARS = ['CHOPPER_CONTROLLER_HOST', 'CHOPPER_FRONTEND_HOST', 'CHOPPER_APP_HOST']
// Whether bin/controller.js reads the state-store settings yet (issue 11):
// until then each controller keeps its state in memory and members use the
// first one in their list.
const CONTROLLERS_SHARE_STATE = Object.hasOwn(ENV.controller, 'CHOPPER_STATE_TABLE')

let model
let renderer
const cleanups = []

beforeAll(async () => {
  model = await loadConfig()
  renderer = createRenderer(model)
})

afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn()
})

const dynamoClient = (endpoint) => {
  const client = new DynamoDBClient({ region: 'us-west-2', endpoint, credentials: { accessKeyId: 'x', secretAccessKey: 'x' } })
  cleanups.push(() => client.destroy())
  return client
}

/** The controllers' state table as Terraform creates it (dynamodb.tf), in a local dynalite. */
async function createStateTable (endpoint) {
  const table = resolve(model, model.resource.aws_dynamodb_table.controller_state)
  await dynamoClient(endpoint).send(new CreateTableCommand({
    TableName: table.name,
    BillingMode: table.billing_mode,
    AttributeDefinitions: table.attribute.map((a) => ({ AttributeName: a.name, AttributeType: a.type })),
    KeySchema: [{ AttributeName: table.hash_key, KeyType: 'HASH' }]
  }))
  return table.name
}

/**
 * The env file the deployment writes for `component`, made runnable on this
 * machine. `controller` is the index of the controller instance it stands for.
 */
function localEnv (component, { ports, overrides = {}, replace = {}, controller = 0 }) {
  const env = renderer.writtenEnv(renderer.userData(component, overrides), component)
  const out = { ...env }
  for (const name of HOST_VARS) {
    if (name in env) {
      expect({ name, value: env[name] }).toEqual({ name, value: '0.0.0.0' })
      out[name] = '127.0.0.1'
    }
  }
  if ('CHOPPER_ADVERTISE_HOST' in env) {
    expect(env.CHOPPER_ADVERTISE_HOST).toBe(BOOT_VALUES.PRIVATE_IP)
    out.CHOPPER_ADVERTISE_HOST = '127.0.0.1'
  }
  if ('CHOPPER_CONTROLLER_URL' in env) {
    // Every controller, in order: the i-th deployed address is controller i here.
    const urls = env.CHOPPER_CONTROLLER_URL.split(',').map((u) => new URL(u))
    expect(urls.map((u) => u.port)).toEqual(ports.controllers.map(() => String(ports.deployed.CHOPPER_CONTROLLER_PORT)))
    out.CHOPPER_CONTROLLER_URL = ports.controllers.map((p) => `http://127.0.0.1:${p}`).join(',')
  }
  if (component === 'controller') {
    expect(env.CHOPPER_CONTROLLER_PORT).toBe(String(ports.deployed.CHOPPER_CONTROLLER_PORT))
    out.CHOPPER_CONTROLLER_PORT = String(ports.controllers[controller])
    // Each controller is its own instance, with its own id in the leader lease.
    expect(env.CHOPPER_CONTROLLER_ID).toBe(BOOT_VALUES.INSTANCE_ID)
    out.CHOPPER_CONTROLLER_ID = `${BOOT_VALUES.INSTANCE_ID.slice(0, -1)}${controller}`
    // The state table in DynamoDB, here in the local dynalite.
    expect(new URL(env.CHOPPER_STATE_ENDPOINT).hostname).toBe('dynamodb.us-west-2.amazonaws.com')
    out.CHOPPER_STATE_ENDPOINT = ports.dynamoEndpoint
  }
  for (const name of PORT_VARS) {
    if (name in env) out[name] = String(ports.local[name])
  }
  for (const [name, value] of Object.entries(replace)) {
    expect(Object.keys(env)).toContain(name)
    out[name] = value
  }
  return out
}

/** Start `node <entry>` with only `env` (and PATH), as the systemd unit does. */
function startEntry (entry, env) {
  const child = spawn(process.execPath, [path.join(ROOT, entry)], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let output = ''
  const keep = (d) => { output = (output + d.toString()).slice(-4000) }
  child.stdout.on('data', keep)
  child.stderr.on('data', keep)
  let exited = null
  const exit = new Promise((resolve) => child.once('exit', (code, signal) => { exited = { code, signal }; resolve() }))
  cleanups.push(async () => {
    if (!exited) {
      child.kill('SIGTERM')
      const t = setTimeout(() => child.kill('SIGKILL'), 5000)
      await exit
      clearTimeout(t)
    }
  })
  return { child, output: () => output, exited: () => exited }
}

/** Listen on `port` and reset every connection (a lost instance's address); closed at cleanup. */
async function holdDeadPort (port) {
  const sockets = new Set()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on('error', () => {})
    socket.resetAndDestroy()
  })
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', resolve)
  })
  cleanups.push(() => new Promise((resolve) => {
    for (const s of sockets) s.destroy()
    server.close(resolve)
  }))
}

async function portsFor (dynamoEndpoint) {
  // distinct ports: one freePort() after another could hand out the same one twice
  // (seen in CI: a front end's control port was the app server's, EADDRINUSE)
  const ports = await freePorts(PORT_VARS.length + model.variable.controller_count.default)
  const local = Object.fromEntries(PORT_VARS.map((name, i) => [name, ports[i]]))
  const controllers = ports.slice(PORT_VARS.length)
  const envOf = (c) => renderer.writtenEnv(renderer.userData(c), c)
  const deployed = { ...envOf('controller'), ...envOf('frontend'), ...envOf('appserver') }
  return { local, controllers, dynamoEndpoint, deployed: Object.fromEntries([...PORT_VARS, 'CHOPPER_CONTROLLER_PORT'].map((n) => [n, Number(deployed[n])])) }
}

/** /v1/status of every controller, in order. */
const statuses = (ports) => Promise.all(ports.controllers.map(async (p) => (await call(`http://127.0.0.1:${p}/v1/status`)).body))
/** The status of the controller that leads (without a shared state table, the first: members register there). */
const leaderStatus = async (ports) => (await statuses(ports)).find((s) => s.role !== 'standby')

/**
 * Boot the deployment's controllers (controller_count of them, sharing a
 * state table in `dynalite`), one app server and one front end from the
 * deployment's env files; resolve once the front end routes.
 */
async function bootCluster ({ app, dynalite, replace = {} }) {
  const table = await createStateTable(dynalite.endpoint)
  const ports = await portsFor(dynalite.endpoint)
  const procs = {}
  const startController = (i) => {
    procs[`controller ${i}`] = startEntry(COMPONENTS.controller.entry, localEnv('controller', { ports, controller: i }))
  }
  // The first controller in the members' lists leads (it starts alone and
  // the others find its lease), so losing the leader sends members on
  // through their lists.
  startController(0)
  if (CONTROLLERS_SHARE_STATE) {
    await pollUntil(async () => {
      try {
        return (await call(`http://127.0.0.1:${ports.controllers[0]}/v1/status`)).body.role === 'leader'
      } catch {
        return false
      }
    }, { timeoutMs: 20000, intervalMs: 50, what: 'the first controller to lead' })
  }
  for (let i = 1; i < ports.controllers.length; i++) startController(i)
  procs.appserver = startEntry(COMPONENTS.appserver.entry, localEnv('appserver', { ports, overrides: { app }, replace }))
  procs.frontend = startEntry(COMPONENTS.frontend.entry, localEnv('frontend', { ports }))
  const base = `http://127.0.0.1:${ports.local.CHOPPER_FRONTEND_PORT}`
  try {
    await pollUntil(async () => {
      for (const [name, p] of Object.entries(procs)) {
        if (p.exited()) throw new Error(`${name} exited ${JSON.stringify(p.exited())}: ${p.output()}`)
      }
      try {
        return (await call(`${base}/healthz`)).status === 200
      } catch {
        return false
      }
    }, { timeoutMs: 30000, intervalMs: 100, what: 'the front end to report healthy' })
  } catch (err) {
    err.message += Object.entries(procs).map(([name, p]) => `\n--- ${name}:\n${p.output()}`).join('')
    throw err
  }
  return { base, ports, procs, table }
}

/** With a shared state table: exactly one controller leads, and its lease is in the table. */
async function expectOneLeader ({ ports, table }, client) {
  if (!CONTROLLERS_SHARE_STATE) return
  const roles = (await statuses(ports)).map((s) => s.role).sort()
  expect(roles).toEqual(['leader', ...ports.controllers.slice(1).map(() => 'standby')])
  const lease = await client.send(new GetItemCommand({ TableName: table, Key: { pk: { S: 'lease' } }, ConsistentRead: true }))
  expect(lease.Item).toBeDefined()
}

test('compute: the deployment\'s env files boot a routing cluster through the real entry points', async () => {
  const dynalite = await startDynalite()
  cleanups.push(() => dynalite.close())
  const cluster = await bootCluster({ app: 'compute', dynalite })
  const res = await call(`${cluster.base}/compute?key=user-1&n=100`)
  expect(res.status).toBe(200)
  expect(res.body).toMatchObject({ key: 'user-1', n: 100 })
  // Both registered under their instance ids, as the boot scripts set them.
  const status = await leaderStatus(cluster.ports)
  expect(Object.keys(status.servers)).toEqual([BOOT_VALUES.INSTANCE_ID])
  expect(Object.keys(status.frontends)).toEqual([BOOT_VALUES.INSTANCE_ID])
  expect(status.strategy).toBe('chopper')
  expect(cluster.ports.controllers).toHaveLength(2) // controller_count's default
  await expectOneLeader(cluster, dynamoClient(dynalite.endpoint))
  // The members registered with the token their boot read; a call without
  // it is refused, so the controllers really run with it.
  if (Object.hasOwn(ENV.controller, 'CHOPPER_CLUSTER_TOKEN')) {
    const leader = cluster.ports.controllers[0]
    const forged = await call(`http://127.0.0.1:${leader}/v1/servers`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: BOOT_VALUES.INSTANCE_ID, url: 'http://127.0.0.1:1', controlUrl: 'http://127.0.0.1:2' })
    })
    expect(forged.status).toBe(401)
  }
})

;(CONTROLLERS_SHARE_STATE ? test : test.skip)('compute: when the leading controller\'s instance dies, the standby leads and the members follow it', async () => {
  const dynalite = await startDynalite()
  cleanups.push(() => dynalite.close())
  const cluster = await bootCluster({ app: 'compute', dynalite })
  // The leader is the first controller of the members' lists.
  expect((await statuses(cluster.ports)).map((s) => s.role)).toEqual(['leader', 'standby'])
  // An instance lost, not a clean stop: no lease release, no goodbye.
  const dead = cluster.procs['controller 0']
  dead.child.kill('SIGKILL')
  await pollUntil(() => dead.exited() !== null, { timeoutMs: 5000, what: 'controller 0 to die' })
  // Its address stays dead: the port is held by a listener that resets every
  // connection, as a lost instance's address would. Left free, another test's
  // process running in parallel may bind it, and the members, which still
  // try it first, would talk to a stranger (CI once saw a 404 from one).
  await holdDeadPort(cluster.ports.controllers[0])
  const survivor = cluster.ports.controllers[1]
  // The new leader restores the membership with a fresh member lease each;
  // past two lease periods only the app server's own calls (renewals, or a
  // registration again if a renewal came late) keep it in, and those find
  // the new leader through the controller list the deployment gave it.
  // With the first controller alone in the list, this never holds.
  const memberLeaseMs = ENV.controller.CHOPPER_LEASE_MS.default
  let ledSince = null
  await pollUntil(async () => {
    const s = (await call(`http://127.0.0.1:${survivor}/v1/status`)).body
    if (s.role !== 'leader') return false
    ledSince ??= Date.now()
    const server = s.servers[BOOT_VALUES.INSTANCE_ID]
    return Date.now() - ledSince > 2 * memberLeaseMs && Boolean(server) && server.leaseRemainingMs > 0
  }, { timeoutMs: 20000, intervalMs: 100, what: 'the standby to lead, with the app server renewing its lease there' })
  const res = await call(`${cluster.base}/compute?key=user-2&n=10`)
  expect({ status: res.status, body: res.status === 200 ? 'ok' : res.body }).toEqual({ status: 200, body: 'ok' })
})

test('kv-cache: writes land in the deployment\'s table, read back through the front end', async () => {
  const dynalite = await startDynalite()
  cleanups.push(() => dynalite.close())
  const redis = await spawnRedis()
  if (!redis) throw new Error('redis-server is not installed (apt-get install -y redis-server)')
  cleanups.push(() => redis.close())
  const cluster = await bootCluster({
    app: 'kv-cache',
    dynalite,
    replace: { CHOPPER_DDB_ENDPOINT: dynalite.endpoint, REDIS_URL: redis.url }
  })
  const { base } = cluster
  const put = await call(`${base}/kv?key=greeting`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'hello' })
  expect(put.status).toBeLessThan(300)
  const got = await call(`${base}/kv?key=greeting`)
  expect(got.status).toBe(200)
  expect(got.body).toBe('hello')
  // The table named by the deployment (var.ddb_table_name) holds the item.
  const table = renderer.writtenEnv(renderer.userData('appserver', { app: 'kv-cache' }), 'appserver').CHOPPER_DDB_TABLE
  const client = dynamoClient(dynalite.endpoint)
  const item = await client.send(new GetItemCommand({ TableName: table, Key: { k: { S: 'greeting' } } }))
  expect(Buffer.from(item.Item.v.B).toString()).toBe('hello')
  await expectOneLeader(cluster, client)
})
