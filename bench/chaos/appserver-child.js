'use strict'

/**
 * One kv-cache app server in a process of its own, so the chaos bench can
 * SIGKILL it, SIGTERM it, or hang its control port. The parent
 * (appserver-process.js) sends `start` with the server's configuration and
 * gets its URLs back; afterwards it may send `hang-control`,
 * `restore-control` and `close`.
 *
 * SIGTERM does what bin/appserver.js does: drain (slices handed off,
 * in-flight requests finished, deregistered), close, exit. SIGINT is ignored:
 * a Ctrl-C in the terminal reaches the whole process group, and the parent
 * decides the order things stop in.
 */
const pino = require('pino')
const { Registry } = require('prom-client')
const { loadApp, startApp } = require('../../apps')

let started = null
let closing = null
let hang = null // { saved: listeners, pending: Set<res>, handler } while the control port hangs

function makeLogger (level) {
  // Synchronous writes to stderr: the parent keeps the lines in a log file,
  // and nothing is lost when the process exits right after a line.
  return pino({ level, base: { pid: process.pid } }, pino.destination({ fd: 2, sync: true }))
}

/** Let the control listener accept requests and never answer them. */
function hangControl () {
  if (hang) return { hung: true, already: true }
  const control = started.server.listeners.control
  const pending = new Set()
  const handler = (req, res) => {
    pending.add(res)
    res.once('close', () => pending.delete(res))
  }
  const saved = control.listeners('request')
  control.removeAllListeners('request')
  control.on('request', handler)
  hang = { saved, pending, handler }
  return { hung: true }
}

/** Answer control requests again; the requests left hanging are cut off. */
function restoreControl () {
  if (!hang) return { hung: false, already: true }
  const control = started.server.listeners.control
  control.removeListener('request', hang.handler)
  for (const l of hang.saved) control.on('request', l)
  const cut = hang.pending.size
  for (const res of hang.pending) res.destroy()
  hang = null
  return { hung: false, cut }
}

async function closeServer ({ drain }) {
  if (!started) return
  if (hang) restoreControl() // hung sockets would hold close() open
  if (drain) await started.server.drain()
  await started.close()
  started = null
}

function shutdown ({ drain, code }) {
  closing = closing || closeServer({ drain })
  closing.then(() => process.exit(code), (err) => {
    process.stderr.write(`close failed: ${err && err.stack}\n`)
    process.exit(1)
  })
  return closing
}

const handlers = {
  async start ({ config }) {
    const logger = makeLogger(config.logLevel || 'warn')
    const appModule = loadApp('kv-cache')
    started = await startApp(appModule, {
      id: config.id,
      appOptions: { dynamoEndpoint: config.dynamoEndpoint, redisUrl: config.redisUrl, spawnRedis: false, ...(config.heldReads ? { heldReads: config.heldReads } : {}) },
      registry: new Registry(),
      logger,
      controllerUrl: config.controllerUrl,
      host: '127.0.0.1',
      advertiseHost: '127.0.0.1',
      port: 0,
      controlPort: 0,
      clusterToken: config.clusterToken, // signs its control calls and its replica fences
      // undefined keeps kv-cache's default (strict); set only for a negative control
      ...(config.consistency ? { consistency: config.consistency } : {})
    })
    return { id: started.id, url: started.url, controlUrl: started.controlUrl, pid: process.pid }
  },
  'hang-control': () => hangControl(),
  'restore-control': () => restoreControl(),
  stats: () => ({ guard: started ? started.server.guard.stats : null, hung: Boolean(hang) }),
  close: () => closeServer({ drain: false })
}

process.on('message', async (msg) => {
  if (!msg || typeof msg.type !== 'string') return
  let reply
  try {
    if (!Object.hasOwn(handlers, msg.type)) throw new Error(`unknown message type ${msg.type}`)
    reply = { id: msg.id, value: await handlers[msg.type](msg) }
  } catch (err) {
    reply = { id: msg.id, error: { code: err.code, message: err.message } }
  }
  if (!process.connected) return
  process.send(reply, () => {
    if (msg.type === 'close') process.exit(0)
  })
})

process.on('SIGTERM', () => shutdown({ drain: true, code: 0 }))
process.on('SIGINT', () => {})
// The parent went away (crashed or was killed): stop without draining.
process.on('disconnect', () => shutdown({ drain: false, code: 0 }))
