'use strict'

// appserver-lib as a package (issue 13): `npm pack` builds the tarball, a
// project outside this repository installs it the way a user would, and the
// example service runs from there against a local cluster. The TypeScript
// example, and a file of misuses, are type-checked against the declarations.

const { execFile, spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { promisify } = require('node:util')
const express = require('express')
const { startLocalCluster } = require('../../cluster/local-cluster')
const { createController } = require('../../controller')
const { createAppServer } = require('../../appserver-lib/index.js')
const { SliceMap } = require('../../core/slice-map')
const { sliceKey } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { collect } = require('../../appserver-lib/scripts/build')
const { call } = require('../helpers/http')

const execFileP = promisify(execFile)
const ROOT = path.resolve(__dirname, '../..')
const PKG_DIR = path.join(ROOT, 'appserver-lib')
const CLIENT_DIR = path.join(ROOT, 'client')
const TSC = require.resolve('typescript/bin/tsc')

// Under `npm test`, npm passes its run's context (npm_config_local_prefix,
// npm_package_*, ...) in lowercase variables, which would point the npm we
// start back at this repository. Drop those; keep a user's NPM_CONFIG_* settings.
const cleanEnv = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_') && k !== 'NODE_PATH'))

async function run (file, args, { cwd, timeoutMs = 60000 } = {}) {
  try {
    return await execFileP(file, args, { cwd, env: cleanEnv(), timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 })
  } catch (err) {
    err.message += `\nstdout:\n${err.stdout}\nstderr:\n${err.stderr}`
    throw err
  }
}

/** A child process with its stdout parsed as JSON lines. */
function startService (cwd, env) {
  const child = spawn(process.execPath, ['server.js'], { cwd, env: { PATH: process.env.PATH, ...env } })
  const out = { lines: [], text: '' }
  let partial = ''
  child.stdout.on('data', (d) => {
    partial += d
    const parts = partial.split('\n')
    partial = parts.pop()
    for (const line of parts) {
      out.text += line + '\n'
      try { out.lines.push(JSON.parse(line)) } catch {}
    }
  })
  child.stderr.on('data', (d) => { out.text += d })
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  return { child, out, exited, line: (msg) => out.lines.find((l) => l.msg === msg) }
}

describe('appserver-lib as a package', () => {
  let tmp
  let tarball
  let project
  let packed
  let clientPacked

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-pack-'))
    // prepack builds dist/, postpack removes it.
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', tmp], { cwd: PKG_DIR })
    packed = JSON.parse(stdout)[0]
    tarball = path.join(tmp, packed.filename)
    clientPacked = JSON.parse((await run('npm', ['pack', '--json', '--pack-destination', tmp], { cwd: CLIENT_DIR })).stdout)[0]
    project = path.join(tmp, 'profile-service')
    fs.cpSync(path.join(ROOT, 'examples/profile-service'), project, { recursive: true, filter: (src) => !src.includes('node_modules') })
    // The example's file: links point into this repository; a user installs the tarballs.
    const manifest = path.join(project, 'package.json')
    const pkg = JSON.parse(fs.readFileSync(manifest, 'utf8'))
    pkg.dependencies['@chopper/appserver-lib'] = `file:${tarball}`
    pkg.dependencies['@chopper/client'] = `file:${path.join(tmp, clientPacked.filename)}`
    fs.writeFileSync(manifest, JSON.stringify(pkg, null, 2))
    await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: project, timeoutMs: 120000 })
  }, 150000)

  afterAll(() => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true })
  })

  test('the tarball holds the built package: appserver-lib, the core files it requires, the declarations', () => {
    const files = packed.files.map((f) => f.path).sort()
    const { files: sources } = collect(path.join(PKG_DIR, 'index.js'))
    const built = sources.map((f) => 'dist/' + path.relative(ROOT, f).split(path.sep).join('/'))
    expect(files).toEqual(['README.md', ...built, 'index.d.ts', 'package.json'].sort())
    // What the walk must have found: the shared core, and only what is used.
    expect(files).toEqual(expect.arrayContaining(['dist/appserver-lib/index.js', 'dist/appserver-lib/shard-guard.js', 'dist/core/keyspace.js', 'dist/core/controller-client.js']))
    expect(files).not.toContain('dist/core/settings.js')
    // postpack cleaned up: the repository keeps no build output.
    expect(fs.existsSync(path.join(PKG_DIR, 'dist'))).toBe(false)
  })

  test('@chopper/client: the tarball holds the client, the core files it requires and the declarations; it loads outside the repository', async () => {
    const files = clientPacked.files.map((f) => f.path).sort()
    const { files: sources } = collect(path.join(CLIENT_DIR, 'index.js'))
    const built = sources.map((f) => 'dist/' + path.relative(ROOT, f).split(path.sep).join('/'))
    expect(files).toEqual(['README.md', ...built, 'index.d.ts', 'package.json'].sort())
    // The shared router, and none of the server side.
    expect(files).toEqual(expect.arrayContaining(['dist/client/index.js', 'dist/core/key-router.js', 'dist/core/replica-router.js', 'dist/core/request-signing.js']))
    for (const f of ['dist/core/cluster-auth.js', 'dist/frontend/proxy.js', 'dist/appserver-lib/index.js']) expect(files).not.toContain(f)
    expect(fs.existsSync(path.join(CLIENT_DIR, 'dist'))).toBe(false)
    const cjs = await run(process.execPath, ['-e', `
      const m = require('@chopper/client')
      const c = m.createClient({ members: 'http://127.0.0.1:1', pollIntervalMs: 0 })
      c.close().then(() => console.log(JSON.stringify({ keys: Object.keys(m).sort(), dispatcher: typeof c.dispatch, from: require.resolve('@chopper/client') })))`], { cwd: project })
    const out = JSON.parse(cjs.stdout)
    expect(out).toMatchObject({ keys: ['ChopperClient', 'createClient', 'defaults', 'readCredential'], dispatcher: 'function' })
    expect(out.from).toBe(path.join(fs.realpathSync(project), 'node_modules/@chopper/client/dist/client/index.js'))
  })

  test('installed outside the repository, it loads from CommonJS and from ESM', async () => {
    const names = ['CONSISTENCY', 'COST_MODES', 'HANDOFF_DRAIN', 'ShardGuard', 'createAppServer', 'defaultKeyFrom', 'defaults', 'setRequestCost', 'settleRequest', 'shardGuardMiddleware']
    const cjs = await run(process.execPath, ['-e', `
      const m = require('@chopper/appserver-lib')
      console.log(JSON.stringify({ keys: Object.keys(m).sort(), from: require.resolve('@chopper/appserver-lib') }))`], { cwd: project })
    const { keys, from } = JSON.parse(cjs.stdout)
    expect(keys).toEqual(names)
    expect(from).toBe(path.join(fs.realpathSync(project), 'node_modules/@chopper/appserver-lib/dist/appserver-lib/index.js'))
    // Named ESM imports need Node's CommonJS export detection to see through index.js.
    const esm = await run(process.execPath, ['--input-type=module', '-e', `
      import { ${names.join(', ')} } from '@chopper/appserver-lib'
      const g = new ShardGuard({ serverId: 'x' })
      console.log(JSON.stringify({ generation: g.generation, consistency: defaults.consistency, modes: CONSISTENCY }))`], { cwd: project })
    expect(JSON.parse(esm.stdout)).toEqual({ generation: 0, consistency: 'available', modes: ['strict', 'available'] })
  })

  describe('the example service, installed from the tarball', () => {
    let cluster
    let service
    const counters = []

    /** A controller and one app server counting POST /hits?key=U (ts-service's API). */
    async function counterCluster () {
      const controller = createController({ periodMs: 600000, startupFenceMs: 0 })
      await controller.start()
      counters.push(() => controller.close())
      const seen = []
      const hits = new Map()
      const app = express.Router()
      app.post('/hits', (req, res) => {
        const user = req.query.key
        hits.set(user, (hits.get(user) || 0) + 1)
        seen.push({ user, forwarded: req.headers['x-forwarded-for'] !== undefined })
        res.json({ key: user, hits: hits.get(user) })
      })
      const server = createAppServer({ id: 'counter-1', app, controllerUrl: controller.url })
      await server.start()
      counters.push(() => server.close())
      await pollUntil(() => server.guard.generation > 0 && server.guard.generation === (controller.published && controller.published.generation), { what: 'the counter cluster is up' })
      return { url: controller.url, seen }
    }

    afterEach(async () => {
      if (service) {
        service.child.kill('SIGKILL')
        await service.exited
        service = null
      }
      if (cluster) await cluster.close()
      cluster = null
      for (const close of counters.splice(0).reverse()) await close()
    })

    test('serves the keys it owns through the front end, refuses others with 421, and drains on SIGTERM', async () => {
      cluster = await startLocalCluster({ app: 'compute', servers: 1, frontends: 1, port: 0, periodMs: 60000, strategyOptions: { minReplicas: 1 } })
      const { controller } = cluster.controller
      const fe = cluster.frontends[0]
      // The counter service, a cluster of its own that profile-service calls through @chopper/client.
      const counter = await counterCluster()
      service = startService(project, {
        CHOPPER_SERVER_ID: 'profile-1',
        CHOPPER_CONTROLLER_URL: cluster.controller.url,
        CHOPPER_COUNTER_CONTROLLER_URL: counter.url,
        CHOPPER_APP_HOST: '127.0.0.1',
        CHOPPER_APP_PORT: '0',
        CHOPPER_APP_CONTROL_PORT: '0'
      })
      const { url } = await pollUntil(() => service.line('profile service listening'), { timeoutMs: 15000, what: `the example to listen\n${service.out.text}` })

      // Settled: profile-1 owns slices, no handoff in flight, everyone holds the map.
      const a = await pollUntil(() => {
        const cur = controller.assignment
        const settled = cur && cur.slices.some((s) => s.servers[0] === 'profile-1') && !controller.status().handoff.inProgress &&
          fe.frontend.table.generation === cur.generation
        return settled && cur
      }, { timeoutMs: 20000, what: 'profile-1 to own slices' })
      const map = new SliceMap(a)
      const keys = Array.from({ length: 200 }, (_, i) => `user-${i}`)
      const mine = keys.find((k) => map.ownerOf(sliceKey(k)) === 'profile-1')
      const theirs = keys.find((k) => map.ownerOf(sliceKey(k)) === 'app-1')
      expect(mine).toBeDefined()
      expect(theirs).toBeDefined()

      const put = await call(`${fe.url}/profile?key=${mine}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'Ada' }) })
      expect(put.status).toBe(200)
      expect(put.headers['x-served-by']).toBe('profile-1')
      expect(put.body).toEqual({ user: mine, stored: true, generation: a.generation, hits: 1 })
      // Counted by the counter server that owns the user, reached with no front end in between.
      expect(counter.seen).toEqual([{ user: mine, forwarded: false }])
      const get = await call(`${fe.url}/profile?key=${mine}`)
      expect(get.status).toBe(200)
      expect(get.headers['x-served-by']).toBe('profile-1')
      expect(get.body.profile).toEqual({ name: 'Ada' })

      // A key it does not own, sent to it directly: the package's guard refuses it.
      const refused = await call(`${url}/profile?key=${theirs}`)
      expect(refused.status).toBe(421)
      expect(refused.body.error.code).toBe('CHOPPER_ERR_NOT_OWNER')
      expect(refused.headers['x-chopper-generation']).toBe(String(a.generation))

      // SIGTERM: the example drains (its slices go to app-1), deregisters and exits 0.
      service.child.kill('SIGTERM')
      const { code } = await service.exited
      expect(code).toBe(0)
      expect(service.line('stopped')).toMatchObject({ drained: true })
      expect(Object.keys(controller.assignment.servers)).toEqual(['app-1'])
      // Its keys are app-1's now (which has no /profile route: the compute app).
      const after = await pollUntil(async () => {
        const r = await call(`${fe.url}/profile?key=${mine}`)
        return r.headers['x-served-by'] === 'app-1' ? r : undefined
      }, { timeoutMs: 10000, what: `${mine} to be served by app-1` })
      expect(after.status).toBe(404)
      service = null
    }, 60000)
  })

  describe('TypeScript declarations', () => {
    test('the TypeScript example type-checks (tsc --noEmit), in this repository and against the installed tarball', async () => {
      await run(process.execPath, [TSC, '--noEmit', '-p', path.join(ROOT, 'examples/ts-service')], { cwd: ROOT, timeoutMs: 110000 })
      // In the temporary project the declarations and the @types they import
      // come from the tarball's dependencies alone.
      const copy = path.join(tmp, 'ts-service')
      fs.cpSync(path.join(ROOT, 'examples/ts-service'), copy, { recursive: true, filter: (src) => !/node_modules|dist/.test(path.relative(ROOT, src)) })
      fs.symlinkSync(path.join(project, 'node_modules'), path.join(copy, 'node_modules'), 'dir')
      await run(process.execPath, [TSC, '--noEmit', '-p', copy], { cwd: copy, timeoutMs: 110000 })
    }, 240000)

    test('misuses are type errors (every @ts-expect-error in test/package/types/ is needed)', async () => {
      await run(process.execPath, [TSC, '-p', path.join(__dirname, 'types')], { cwd: ROOT, timeoutMs: 85000 })
    }, 90000)
  })
})
