'use strict'

const crypto = require('node:crypto')
const http = require('node:http')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { performance } = require('node:perf_hooks')
const express = require('express')
const { request } = require('undici')
const { createController } = require('../../controller')
const { createFrontend } = require('../../frontend')
const { createAppServer } = require('../../appserver-lib/index.js')
const { signRequest } = require('../../core/cluster-auth')
const { sliceKey } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')
const { listen, close } = require('../../core/http')
const { call } = require('../helpers/http')

// The authenticated control plane (issue 11, docs/security.md).
const TOKEN = crypto.randomBytes(32).toString('base64url')
const LEASE_MS = 400

/** A data app that shows what reached it: its id and the request's headers. */
function echoApp (id) {
  const router = express.Router()
  router.all('/echo', (req, res) => res.json({ servedBy: id, headers: req.headers }))
  return router
}

/** Send `body` (a string) with `headers` as given: a raw, possibly replayed, request. */
function send (url, { method = 'POST', headers = {}, body } = {}) {
  return call(url, { method, headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers }, body })
}

/** Signed with `token` (the cluster's unless said otherwise), for `url`'s path and query. */
function signedSend (url, { method = 'POST', body, token = TOKEN, now } = {}) {
  const u = new URL(url)
  const headers = signRequest({ token, method, path: u.pathname + u.search, body, ...(now === undefined ? {} : { now }) })
  return send(url, { method, headers, body })
}

/**
 * A recording relay in front of the controller: what a member sends goes
 * through unchanged, and each request (method, path, headers, body) is kept,
 * as an eavesdropper on the network would keep it.
 */
async function recordingRelay (target) {
  const seen = []
  const server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', async () => {
      const body = Buffer.concat(chunks)
      const headers = { ...req.headers }
      delete headers.host
      delete headers.connection
      // recorded once the target has answered it: a test that replays what it saw replays a request already served
      const seenAs = { method: req.method, path: req.url, headers, body: body.toString('utf8') }
      try {
        const up = await request(target + req.url, { method: req.method, headers, body: body.length ? body : undefined })
        const text = await up.body.text()
        seen.push(seenAs)
        res.writeHead(up.statusCode, { 'content-type': up.headers['content-type'] || 'application/json' })
        res.end(text)
      } catch (err) {
        res.writeHead(502).end()
      }
    })
  })
  const port = await listen(server, 0, '127.0.0.1')
  return { url: `http://127.0.0.1:${port}`, seen, close: () => close(server) }
}

/** A bin/ entry point with `env`; its output (stdout and stderr) collects in `out.text`. */
function spawnBin (name, env, args = []) {
  const child = spawn(process.execPath, [path.join(__dirname, '../../bin', name), ...args], { env: { ...process.env, LOG_LEVEL: 'info', ...env } })
  const out = { text: '' }
  child.stdout.on('data', (d) => { out.text += d })
  child.stderr.on('data', (d) => { out.text += d })
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)))
  return { child, out, exited }
}

/** A field of the first JSON log line with message `msg`. */
function logged (out, msg, field) {
  for (const line of out.text.split('\n')) {
    if (!line.startsWith('{')) continue
    const rec = JSON.parse(line)
    if (rec.msg === msg && rec[field]) return rec[field]
  }
  return undefined
}

describe('the authenticated control plane (CHOPPER_CLUSTER_TOKEN)', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  /** A controller, app-1 and app-2 (app-2 registers through a recording relay) and a front end, all with the token. */
  async function clusterUp () {
    const controller = createController({ periodMs: 60000, startupFenceMs: 0, leaseMs: LEASE_MS, clusterToken: TOKEN })
    await controller.start()
    closers.push(() => controller.close())
    const relay = await recordingRelay(controller.url)
    closers.push(() => relay.close())
    const servers = new Map()
    const startServer = async (id, controllerUrl = controller.url) => {
      const s = createAppServer({ id, app: echoApp(id), controllerUrl, clusterToken: TOKEN, renewMs: 100 })
      await s.start()
      closers.push(() => s.close())
      servers.set(id, s)
      return s
    }
    await startServer('app-1')
    await startServer('app-2', relay.url)
    const fe = createFrontend({ controllerUrl: controller.url, clusterToken: TOKEN, pullIntervalMs: 0 })
    await fe.start()
    closers.push(() => fe.close())
    const synced = () => {
      const a = controller.published
      return Boolean(a && Object.keys(a.servers).length === servers.size && !controller.status().handoff.inProgress &&
        fe.table.generation === a.generation && [...servers.values()].every((s) => s.guard.generation === a.generation))
    }
    await pollUntil(synced, { what: 'every member holds the current map' })
    return { controller, servers, startServer, fe, relay, synced }
  }

  test('a signed cluster registers, renews, collects, pushes and serves; unsigned calls to every control route get a JSON 401 and change nothing', async () => {
    const { controller, servers, fe, synced } = await clusterUp()
    const [s1, s2] = [servers.get('app-1'), servers.get('app-2')]

    // Traffic flows, and load collection (signed GET /v1/load) succeeds.
    for (let i = 0; i < 20; i++) expect((await call(`${fe.urls.url}/echo?key=k${i}`)).status).toBe(200)
    const round = await controller.runRound()
    expect(round.unknown).toEqual([])
    expect(controller.status().servers['app-1'].collectionFailures).toBe(0)
    // A signed push lands (an operator's move, fenced: revoke, then grant).
    const before = controller.published.generation
    const slice = controller.published.slices[0]
    controller.moveSlice(slice.start, slice.servers[0] === 'app-1' ? 'app-2' : 'app-1')
    expect(await controller.settled(10000)).toBe(true)
    await pollUntil(synced, { what: 'the move reached every member' })
    expect(controller.published.generation).toBeGreaterThan(before)
    // Signed renewals keep both leases live well past a lease's length.
    const until = performance.now() + 3 * LEASE_MS
    await pollUntil(() => performance.now() > until, { intervalMs: 50, what: 'three lease lengths' })
    for (const id of ['app-1', 'app-2']) expect(controller.status().servers[id].leaseRemainingMs).toBeGreaterThan(0)

    const generation = controller.published.generation
    const c = controller.url
    const unsigned = [
      ['POST', `${c}/v1/servers`, { id: 'app-1', url: 'http://127.0.0.1:1', controlUrl: 'http://127.0.0.1:2' }],
      ['POST', `${c}/v1/servers/app-1/lease`, { generation, drainedGeneration: generation }],
      ['POST', `${c}/v1/servers/app-1/drain`, {}],
      ['DELETE', `${c}/v1/servers/app-1`],
      ['POST', `${c}/v1/frontends`, { id: 'fe-evil', controlUrl: 'http://127.0.0.1:2' }],
      ['DELETE', `${c}/v1/frontends/${fe.id}`],
      ['POST', `${c}/v1/move`, { key: 'k1', to: 'app-2' }],
      ['GET', `${c}/v1/assignment`],
      ['PUT', `${s1.urls.controlUrl}/v1/assignment`, { ...controller.published, generation: generation + 1 }],
      ['GET', `${s1.urls.controlUrl}/v1/load`],
      ['GET', `${s2.urls.controlUrl}/v1/load?instance=x&seq=1`],
      ['PUT', `${fe.urls.controlUrl}/v1/assignment`, { ...controller.published, generation: generation + 1 }]
    ]
    for (const [method, url, json] of unsigned) {
      const r = await send(url, { method, body: json === undefined ? undefined : JSON.stringify(json) })
      expect({ method, url, status: r.status, code: r.body.error && r.body.error.code }).toEqual({ method, url, status: 401, code: 'CHOPPER_ERR_UNAUTHENTICATED' })
    }
    // Nothing changed: membership, subscriptions, the map everywhere.
    expect(Object.keys(controller.status().servers).sort()).toEqual(['app-1', 'app-2'])
    expect(Object.keys(controller.status().frontends)).toEqual([fe.id])
    expect(controller.published.generation).toBe(generation)
    expect(synced()).toBe(true)

    // The read-only views stay open.
    for (const url of [`${c}/v1/status`, `${c}/healthz`, `${c}/metrics`, `${c}/dashboard`, `${s1.urls.controlUrl}/healthz`, `${s1.urls.controlUrl}/metrics`, `${s1.urls.controlUrl}/v1/assignment`, `${fe.urls.controlUrl}/v1/assignment`, `${fe.urls.controlUrl}/healthz`]) {
      expect({ url, status: (await call(url)).status }).toEqual({ url, status: 200 })
    }
  })

  test('a wrong token, a replayed capture and a stale timestamp get a JSON 403', async () => {
    const { controller, servers, relay } = await clusterUp()
    const s2 = servers.get('app-2')
    const c = controller.url

    const wrong = await signedSend(`${c}/v1/servers`, { body: JSON.stringify({ id: 'app-1', url: 'http://127.0.0.1:1', controlUrl: 'http://127.0.0.1:2' }), token: 'a-guess-at-the-cluster-token' })
    expect(wrong).toMatchObject({ status: 403, body: { error: { code: 'CHOPPER_ERR_FORBIDDEN', message: expect.stringMatching(/bad signature/) } } })

    // app-2's own registration and a lease renewal, captured on the wire and sent again as they were.
    await pollUntil(() => relay.seen.some((r) => r.path.endsWith('/lease')), { what: 'a captured lease renewal' })
    const registration = relay.seen.find((r) => r.method === 'POST' && r.path === '/v1/servers')
    const renewal = relay.seen.find((r) => r.path === '/v1/servers/app-2/lease')
    expect(JSON.parse(registration.body)).toMatchObject({ id: 'app-2', url: s2.urls.url })
    for (const captured of [registration, renewal]) {
      const r = await send(`${c}${captured.path}`, { method: captured.method, headers: captured.headers, body: captured.body })
      expect(r).toMatchObject({ status: 403, body: { error: { code: 'CHOPPER_ERR_FORBIDDEN', message: expect.stringMatching(/replayed/) } } })
      // The signature is bound to the body: a fresh nonce does not make it usable for another one.
      const altered = await send(`${c}${captured.path}`, { method: captured.method, headers: { ...captured.headers, 'x-chopper-nonce': crypto.randomBytes(12).toString('base64url') }, body: captured.body })
      expect(altered.status).toBe(403)
    }

    // A correctly signed call from more than 30 s ago (or ahead) is refused as stale.
    const body = JSON.stringify({ id: 'app-2', ...s2.urls, generation: 0 })
    for (const now of [Date.now() - 60000, Date.now() + 60000]) {
      const r = await signedSend(`${c}/v1/servers`, { body, now })
      expect(r).toMatchObject({ status: 403, body: { error: { code: 'CHOPPER_ERR_FORBIDDEN', message: expect.stringMatching(/stale or future timestamp/) } } })
    }

    // The members' own control ports refuse a replayed push too.
    const push = JSON.stringify(controller.published)
    const path = '/v1/assignment'
    const headers = { 'content-type': 'application/json', ...signRequest({ token: TOKEN, method: 'PUT', path, body: push }) }
    expect((await send(`${s2.urls.controlUrl}${path}`, { method: 'PUT', headers, body: push })).status).toBe(200)
    expect(await send(`${s2.urls.controlUrl}${path}`, { method: 'PUT', headers, body: push })).toMatchObject({ status: 403, body: { error: { code: 'CHOPPER_ERR_FORBIDDEN' } } })
    expect(controller.status().servers['app-2'].url).toBe(s2.urls.url)
  })

  test('the registration hijack: another process cannot take a live member\'s id, even signed; once it deregistered, the id is free', async () => {
    const { controller, servers, startServer, fe, synced } = await clusterUp()
    const real = servers.get('app-1')
    const attacker = { id: 'app-1', url: 'http://127.0.0.1:9', controlUrl: 'http://127.0.0.1:7', generation: 0 }
    const unsigned = await send(`${controller.url}/v1/servers`, { body: JSON.stringify(attacker) })
    expect(unsigned.status).toBe(401)
    // Even with the token (a misconfigured second process, or a stolen token): 409 while app-1 holds its lease.
    const hijack = await signedSend(`${controller.url}/v1/servers`, { body: JSON.stringify(attacker) })
    expect(hijack).toMatchObject({ status: 409, body: { error: { code: 'CHOPPER_ERR_ID_IN_USE' } } })
    expect(controller.published.servers['app-1'].url).toBe(real.urls.url)
    expect(controller.status().servers['app-1']).toMatchObject({ url: real.urls.url, controlUrl: real.urls.controlUrl })
    // Its keys are still served by the real app-1.
    const a = controller.published
    const key = Array.from({ length: 200 }, (_, i) => `h${i}`).find((k) => a.slices.find((s) => s.end > sliceKey(k)).servers[0] === 'app-1')
    expect((await call(`${fe.urls.url}/echo?key=${key}`)).body.servedBy).toBe('app-1')
    // The same member re-registering with its own URLs is routine.
    const again = await signedSend(`${controller.url}/v1/servers`, { body: JSON.stringify({ id: 'app-1', ...real.urls, generation: real.guard.generation }) })
    expect(again.status).toBe(201)

    // Once app-1 has deregistered, a new process may take the id on new ports.
    await real.close()
    await pollUntil(() => !controller.status().servers['app-1'], { what: 'app-1 deregistered' })
    const next = await startServer('app-1')
    expect(next.urls.url).not.toBe(real.urls.url)
    expect(await controller.settled(10000)).toBe(true) // its join is laid out in the next membership batch
    await pollUntil(synced, { what: 'the new app-1 holds the map' })
    expect(controller.status().servers['app-1'].url).toBe(next.urls.url)
    expect(controller.published.servers['app-1'].url).toBe(next.urls.url)
  })

  test('the data port is never a way into the control plane: no control route there or through a front end, and no signature headers forwarded', async () => {
    const { controller, servers, fe } = await clusterUp()
    const s1 = servers.get('app-1')
    const generation = controller.published.generation
    const push = JSON.stringify({ ...controller.published, generation: generation + 1 })
    const attempts = [
      // Straight to an app server's data port, with and without a key, signed as a control call would be.
      ['PUT', `${s1.urls.url}/v1/assignment`, push],
      ['PUT', `${s1.urls.url}/v1/assignment?key=k1`, push],
      ['GET', `${s1.urls.url}/v1/load?key=k1`],
      ['GET', `${s1.urls.url}/v1/load`],
      // Through the front end's data port, which forwards any path to the key's owner.
      ['PUT', `${fe.urls.url}/v1/assignment?key=k1`, push],
      ['GET', `${fe.urls.url}/v1/load?key=k1`],
      ['POST', `${fe.urls.url}/v1/servers?key=k1`, JSON.stringify({ id: 'app-1', url: 'http://127.0.0.1:9', controlUrl: 'http://127.0.0.1:7' })]
    ]
    for (const [method, url, body] of attempts) {
      const r = await signedSend(url, { method, body })
      expect(r.status === 400 || r.status === 404 || r.status === 421).toBe(true)
      expect(r.body.error.code).toMatch(/^CHOPPER_ERR_/)
    }
    expect(controller.published.generation).toBe(generation)
    expect(s1.guard.generation).toBe(generation)
    expect(controller.status().servers['app-1'].url).toBe(s1.urls.url)

    // A client's signature headers stop at the front end.
    const u = new URL(`${fe.urls.url}/echo?key=k2`)
    const r = await send(u.href, { method: 'GET', headers: { ...signRequest({ token: TOKEN, method: 'GET', path: u.pathname + u.search }), 'x-other': 'kept' } })
    expect(r.status).toBe(200)
    expect(r.body.headers['x-other']).toBe('kept')
    for (const h of ['x-chopper-timestamp', 'x-chopper-nonce', 'x-chopper-signature']) expect(r.body.headers).not.toHaveProperty(h)
  })

  test('the entry points take CHOPPER_CLUSTER_TOKEN: every control port refuses unsigned calls, and the token is never printed', async () => {
    const procs = []
    closers.push(async () => { for (const p of procs.reverse()) { p.child.kill('SIGTERM'); await p.exited } })
    const env = { CHOPPER_CLUSTER_TOKEN: TOKEN, CHOPPER_ADVERTISE_HOST: '127.0.0.1' }
    const ctl = spawnBin('controller.js', { ...env, CHOPPER_CONTROLLER_HOST: '127.0.0.1', CHOPPER_CONTROLLER_PORT: '0', CHOPPER_PERIOD_MS: '200' })
    procs.push(ctl)
    const controllerUrl = await pollUntil(() => logged(ctl.out, 'controller listening', 'url'), { timeoutMs: 15000, what: 'controller' })
    const app = spawnBin('appserver.js', { ...env, CHOPPER_CONTROLLER_URL: controllerUrl, CHOPPER_SERVER_ID: 'env-app', CHOPPER_APP_HOST: '127.0.0.1', CHOPPER_APP_PORT: '0', CHOPPER_APP_CONTROL_PORT: '0' })
    procs.push(app)
    // Two node:cluster workers: the primary registers and takes pushes, each worker pulls on its own.
    const fe = spawnBin('frontend.js', { ...env, CHOPPER_CONTROLLER_URL: controllerUrl, CHOPPER_FRONTEND_HOST: '127.0.0.1', CHOPPER_FRONTEND_PORT: '0', CHOPPER_FRONTEND_CONTROL_PORT: '0', CHOPPER_FRONTEND_WORKERS: '2' })
    procs.push(fe)
    const appControl = await pollUntil(() => logged(app.out, 'app server listening', 'controlUrl'), { timeoutMs: 15000, what: 'app server' })
    const feUrl = await pollUntil(() => logged(fe.out, 'front-end workers listening', 'url'), { timeoutMs: 20000, what: 'front end' })
    const feControl = logged(fe.out, 'front-end workers listening', 'controlUrl')
    await pollUntil(async () => (await call(`${feUrl}/compute?key=z&n=4`)).status === 200, { timeoutMs: 15000, what: 'a routed request' })
    for (const [method, url] of [['POST', `${controllerUrl}/v1/servers`], ['GET', `${controllerUrl}/v1/assignment`], ['GET', `${appControl}/v1/load`], ['PUT', `${appControl}/v1/assignment`], ['PUT', `${feControl}/v1/assignment`]]) {
      const r = await send(url, { method, body: method === 'GET' ? undefined : '{}' })
      expect({ url, status: r.status }).toEqual({ url, status: 401 })
    }
    const signedStatus = (await signedSend(`${controllerUrl}/v1/assignment`, { method: 'GET' })).status
    expect(signedStatus).toBe(200)
    // Rounds collect the app server's load (signed) and push (signed) without a failure.
    const status = await pollUntil(async () => {
      const s = (await call(`${controllerUrl}/v1/status`)).body
      return s.rounds.length >= 3 ? s : undefined
    }, { timeoutMs: 10000, what: 'three balancing rounds' })
    expect(status.servers['env-app']).toMatchObject({ collectionFailures: 0, loadUnknown: false, push: { lagging: false } })
    expect(status.pushes.failures).toBe(0)
    for (const p of procs) {
      expect(p.out.text).not.toContain(TOKEN)
      expect(p.out.text).not.toMatch(/control plane unauthenticated/)
    }
    // A token too short to be a secret stops the entry point, naming the variable.
    const short = spawnBin('controller.js', { CHOPPER_CLUSTER_TOKEN: 'short', CHOPPER_CONTROLLER_PORT: '0' })
    expect(await short.exited).toBe(2)
    expect(short.out.text).toContain('CHOPPER_CLUSTER_TOKEN')
    expect(short.out.text).not.toMatch(/"short"/)
  })

  test('npm start signs with CHOPPER_CLUSTER_TOKEN when set, else with a token it generates', async () => {
    for (const token of [TOKEN, undefined]) {
      const env = token === undefined ? { CHOPPER_CLUSTER_TOKEN: '' } : { CHOPPER_CLUSTER_TOKEN: token }
      const run = spawnBin('cluster.js', { ...env, LOG_FORMAT: 'json' }, ['--port', '0', '--servers', '1', '--frontends', '1', '--period', '60000'])
      try {
        await pollUntil(() => run.out.text.includes('ready; Ctrl-C to stop'), { timeoutMs: 20000, what: 'npm start ready' })
        const controllerUrl = run.out.text.match(/^controller\s+(\S+)/m)[1]
        const fe = run.out.text.match(/^frontend\s+(\S+)/m)[1]
        expect((await call(`${fe}/compute?key=a&n=5`)).status).toBe(200)
        const move = { key: 'a', to: 'app-1' }
        expect((await send(`${controllerUrl}/v1/move`, { body: JSON.stringify(move) })).status).toBe(401)
        // With the configured token an operator's call goes through; a generated one is nobody else's.
        expect((await signedSend(`${controllerUrl}/v1/move`, { body: JSON.stringify(move) })).status).toBe(token === undefined ? 403 : 200)
        expect(/generated a cluster token/.test(run.out.text)).toBe(token === undefined)
        expect(run.out.text).not.toMatch(/control plane unauthenticated/)
        if (token) expect(run.out.text).not.toContain(token)
      } finally {
        run.child.kill('SIGINT')
      }
      expect(await run.exited).toBe(0)
    }
  })

  test('without a token everything works unauthenticated, with one warning per component', async () => {
    const lines = []
    const logger = require('pino')({ level: 'warn' }, { write: (l) => lines.push(JSON.parse(l)) })
    const controller = createController({ periodMs: 60000, startupFenceMs: 0, logger })
    await controller.start()
    closers.push(() => controller.close())
    const s = createAppServer({ id: 'app-1', app: echoApp('app-1'), controllerUrl: controller.url, logger })
    await s.start()
    closers.push(() => s.close())
    const fe = createFrontend({ controllerUrl: controller.url, pullIntervalMs: 0, logger })
    await fe.start()
    closers.push(() => fe.close())
    await pollUntil(() => controller.published && fe.table.generation === controller.published.generation, { what: 'the front end holds the map' })
    expect((await call(`${fe.urls.url}/echo?key=a`)).status).toBe(200)
    const warnings = lines.filter((l) => /control plane unauthenticated/.test(l.msg)).map((l) => l.component)
    expect(warnings.sort()).toEqual(['appserver', 'controller', 'frontend'])
    expect(() => createController({ clusterToken: 'short' })).toThrow(/invalid clusterToken/)
    expect(() => createAppServer({ id: 'x', app: echoApp('x'), clusterToken: 'short' })).toThrow(/invalid clusterToken/)
    expect(() => createFrontend({ clusterToken: 'short' })).toThrow(/invalid clusterToken/)
  })
})
