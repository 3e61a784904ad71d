'use strict'

// The environment files the boot scripts write, run by the real entry
// points the systemd units start: `node bin/<component>.js` with exactly that
// environment (plus PATH), as EnvironmentFile= gives it. Only what belongs to
// the machine is rewritten, after checking it is what the deployment sets:
// listen and advertise addresses become 127.0.0.1, ports become free ones,
// and for kv-cache the DynamoDB endpoint and Redis URL point at a local
// dynalite and redis-server. Every variable name and every other value is
// the deployment's own.

const { freePort } = require('../../core/http')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { DynamoDBClient, GetItemCommand } = require('@aws-sdk/client-dynamodb')
const { pollUntil } = require('../../core/poll')
const { startDynalite, spawnRedis } = require('../../apps/kv-cache/embedded')
const { call } = require('../helpers/http')
const { ROOT, loadConfig } = require('./terraform-config')
const { COMPONENTS, BOOT_VALUES, createRenderer } = require('./user-data-render')

const PORT_VARS = ['CHOPPER_CONTROLLER_PORT', 'CHOPPER_FRONTEND_PORT', 'CHOPPER_FRONTEND_CONTROL_PORT', 'CHOPPER_APP_PORT', 'CHOPPER_APP_CONTROL_PORT']
const HOST_VARS = ['CHOPPER_CONTROLLER_HOST', 'CHOPPER_FRONTEND_HOST', 'CHOPPER_APP_HOST']

let renderer
const cleanups = []

beforeAll(async () => {
  renderer = createRenderer(await loadConfig())
})

afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn()
})

/** The env file the deployment writes for `component`, made runnable on this machine. */
function localEnv (component, { ports, overrides = {}, replace = {} }) {
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
    const url = new URL(env.CHOPPER_CONTROLLER_URL)
    expect(url.port).toBe(String(ports.deployed.CHOPPER_CONTROLLER_PORT))
    out.CHOPPER_CONTROLLER_URL = `http://127.0.0.1:${ports.local.CHOPPER_CONTROLLER_PORT}`
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

async function portsFor () {
  const local = {}
  for (const name of PORT_VARS) local[name] = await freePort()
  const envOf = (c) => renderer.writtenEnv(renderer.userData(c), c)
  const deployed = { ...envOf('controller'), ...envOf('frontend'), ...envOf('appserver') }
  return { local, deployed: Object.fromEntries(PORT_VARS.map((n) => [n, Number(deployed[n])])) }
}

/** Boot controller, one app server and one front end from the deployment's env files; resolve once the front end routes. */
async function bootCluster ({ app, replace = {} }) {
  const ports = await portsFor()
  const procs = {}
  procs.controller = startEntry(COMPONENTS.controller.entry, localEnv('controller', { ports }))
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
    err.message += `\n--- controller:\n${procs.controller.output()}\n--- appserver:\n${procs.appserver.output()}\n--- frontend:\n${procs.frontend.output()}`
    throw err
  }
  return { base, ports, procs }
}

test('compute: the deployment\'s env files boot a routing cluster through the real entry points', async () => {
  const { base, ports } = await bootCluster({ app: 'compute' })
  const res = await call(`${base}/compute?key=user-1&n=100`)
  expect(res.status).toBe(200)
  expect(res.body).toMatchObject({ key: 'user-1', n: 100 })
  // Both registered under their instance ids, as the boot scripts set them.
  const status = await call(`http://127.0.0.1:${ports.local.CHOPPER_CONTROLLER_PORT}/v1/status`)
  expect(Object.keys(status.body.servers)).toEqual([BOOT_VALUES.INSTANCE_ID])
  expect(Object.keys(status.body.frontends)).toEqual([BOOT_VALUES.INSTANCE_ID])
  expect(status.body.strategy).toBe('chopper')
})

test('kv-cache: writes land in the deployment\'s table, read back through the front end', async () => {
  const dynalite = await startDynalite()
  cleanups.push(() => dynalite.close())
  const redis = await spawnRedis()
  if (!redis) throw new Error('redis-server is not installed (apt-get install -y redis-server)')
  cleanups.push(() => redis.close())
  const { base } = await bootCluster({
    app: 'kv-cache',
    replace: { CHOPPER_DDB_ENDPOINT: dynalite.endpoint, REDIS_URL: redis.url }
  })
  const put = await call(`${base}/kv?key=greeting`, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'hello' })
  expect(put.status).toBeLessThan(300)
  const got = await call(`${base}/kv?key=greeting`)
  expect(got.status).toBe(200)
  expect(got.body).toBe('hello')
  // The table named by the deployment (var.ddb_table_name) holds the item.
  const table = renderer.writtenEnv(renderer.userData('appserver', { app: 'kv-cache' }), 'appserver').CHOPPER_DDB_TABLE
  const client = new DynamoDBClient({ region: 'us-west-2', endpoint: dynalite.endpoint, credentials: { accessKeyId: 'x', secretAccessKey: 'x' } })
  cleanups.push(() => client.destroy())
  const item = await client.send(new GetItemCommand({ TableName: table, Key: { k: { S: 'greeting' } } }))
  expect(Buffer.from(item.Item.v.B).toString()).toBe('hello')
})
