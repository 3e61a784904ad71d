'use strict'

const { spawn } = require('node:child_process')
const net = require('node:net')
const path = require('node:path')
const { call } = require('../helpers/http')
const { pollUntil } = require('../../core/poll')

const bin = (name) => path.join(__dirname, '../../bin', name)

function start (name, env) {
  const child = spawn(process.execPath, [bin(name)], { env: { ...process.env, LOG_LEVEL: 'info', ...env } })
  const out = { text: '' }
  child.stdout.on('data', (d) => { out.text += d })
  child.stderr.on('data', (d) => { out.text += d })
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)))
  return { child, out, exited }
}

/** The port a pino "listening" line reports for `field` (url/controlUrl). */
function listened (out, msg, field) {
  for (const line of out.text.split('\n')) {
    if (!line.startsWith('{')) continue
    const rec = JSON.parse(line)
    if (rec.msg === msg && rec[field]) return rec[field]
  }
  return undefined
}

describe('production entry points (bin/controller.js, bin/frontend.js, bin/appserver.js)', () => {
  const procs = []
  afterEach(async () => {
    for (const p of procs.splice(0).reverse()) { p.child.kill('SIGTERM'); await p.exited }
  })

  test('configured only by environment, they find each other and serve; SIGTERM stops them', async () => {
    const ctl = start('controller.js', { CHOPPER_CONTROLLER_HOST: '127.0.0.1', CHOPPER_CONTROLLER_PORT: '0', CHOPPER_PERIOD_MS: '500' })
    procs.push(ctl)
    const controllerUrl = await pollUntil(() => listened(ctl.out, 'controller listening', 'url'), { timeoutMs: 15000, what: 'controller' })
    const common = { CHOPPER_CONTROLLER_URL: controllerUrl, CHOPPER_ADVERTISE_HOST: '127.0.0.1' }
    const app = start('appserver.js', { ...common, CHOPPER_APP: 'compute', CHOPPER_SERVER_ID: 'env-app', CHOPPER_APP_HOST: '127.0.0.1', CHOPPER_APP_PORT: '0', CHOPPER_APP_CONTROL_PORT: '0' })
    procs.push(app)
    const fe = start('frontend.js', { ...common, CHOPPER_FRONTEND_HOST: '127.0.0.1', CHOPPER_FRONTEND_PORT: '0', CHOPPER_FRONTEND_CONTROL_PORT: '0' })
    procs.push(fe)
    const feUrl = await pollUntil(() => listened(fe.out, 'front end listening', 'url'), { timeoutMs: 15000, what: 'front end' })
    const r = await pollUntil(async () => {
      const res = await call(`${feUrl}/compute?key=z&n=4`)
      return res.status === 200 ? res : undefined
    }, { timeoutMs: 15000, what: 'a routed request' })
    expect(r.headers['x-served-by']).toBe('env-app')
    // Graceful stop deregisters: the controller forgets the server.
    app.child.kill('SIGTERM')
    expect(await app.exited).toBe(0)
    const status = (await call(`${controllerUrl}/v1/status`)).body
    expect(status.servers).toEqual({})
  })

  test('a signal while the start still runs (its DynamoDB never answers) exits at once, saying why', async () => {
    const sockets = new Set()
    const silentDb = net.createServer((socket) => sockets.add(socket)) // accepts, never answers
    await new Promise((resolve) => silentDb.listen(0, '127.0.0.1', resolve))
    try {
      const ctl = start('controller.js', {
        CHOPPER_CONTROLLER_HOST: '127.0.0.1',
        CHOPPER_CONTROLLER_PORT: '0',
        CHOPPER_STATE_TABLE: 'hung',
        CHOPPER_STATE_ENDPOINT: `http://127.0.0.1:${silentDb.address().port}`
      })
      procs.push(ctl)
      await pollUntil(() => sockets.size > 0, { timeoutMs: 15000, what: 'the controller to reach its state store' })
      ctl.child.kill('SIGTERM')
      expect(await ctl.exited).toBe(1)
      expect(ctl.out.text).toMatch(/interrupted before the start finished/)
    } finally {
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => silentDb.close(resolve))
    }
  })

  test('a malformed setting exits 2 naming the variable', async () => {
    for (const [name, env, variable] of [
      ['controller.js', { CHOPPER_PERIOD_MS: 'soon' }, 'CHOPPER_PERIOD_MS'],
      ['controller.js', { CHOPPER_LOAD_METRIC: 'bytes' }, 'invalid loadMetric'],
      ['frontend.js', { CHOPPER_FRONTEND_PORT: '-1' }, 'CHOPPER_FRONTEND_PORT'],
      ['appserver.js', { CHOPPER_APP: 'nope' }, 'app'],
      ['appserver.js', { CHOPPER_APP: 'kv-cache', CHOPPER_CACHE_TTL_MS: 'z' }, 'CHOPPER_CACHE_TTL_MS']
    ]) {
      const p = start(name, env)
      expect(await p.exited).toBe(2)
      expect(p.out.text).toContain(variable)
    }
  })
})
