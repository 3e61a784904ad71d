'use strict'

const { freePort } = require('../../core/http')
const fs = require('node:fs')
const http = require('node:http')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const dynalite = require('dynalite')
const { listen } = require('../../core/http')
const { pollUntil } = require('../../core/poll')
const { silent } = require('../../core/logger')
const { StoreUnavailableError } = require('../../core/errors')

/**
 * Embedded defaults, so `npm start -- --app kv-cache` works on a fresh
 * machine: an in-process dynalite (a real DynamoDB API server, so the same
 * SDK code runs) and one private redis-server per app server.
 */

/**
 * Start dynalite in this process on 127.0.0.1 (in-memory, tables created
 * instantly). `stop()` stops answering at once but keeps the data; `start()`
 * serves it again on the same port (used to test a DynamoDB outage);
 * `close({ drainMs })` stops accepting, lets requests in flight answer, then
 * ends it. `stats()`: requests in flight, and requests aborted before their
 * body arrived (logged, never thrown).
 * @param {{ logger?, port?: number, host?: string }} [options] port 0 (default) picks a free one; host: 127.0.0.1 unless given (a test host's address)
 * @returns {Promise<{ endpoint: string, port: number, server, stats(), stop(), start(), close() }>}
 */
async function startDynalite ({ logger = silent, port = 0, host = '127.0.0.1' } = {}) {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })
  const bound = await listen(server, port, host)
  const endpoint = `http://${host}:${bound}`
  const log = logger.child({ component: 'dynalite' })
  log.info({ endpoint }, 'in-process dynalite started (embedded DynamoDB; data lives in memory)')

  // dynalite's request listener, wrapped:
  // - dynalite throws a request's 'error' (a client gone before its body
  //   arrived, or a connection dropped by stop() or close()) out of its own
  //   listener: an uncaught exception in the embedding process. Here such an
  //   error is logged and counted, and the request is abandoned.
  // - requests whose handlers are still running are counted, so close() can
  //   let them answer.
  const [handle] = server.listeners('request')
  server.removeAllListeners('request')
  let aborted = 0
  let inFlight = 0
  let drained = null
  server.on('request', (req, res) => {
    inFlight++
    res.once('close', () => {
      if (--inFlight === 0 && drained) drained()
    })
    const on = req.on
    // dynalite adds its listeners synchronously, so the patch lasts for that call only
    req.on = function (event, fn) {
      if (event !== 'error') return on.call(this, event, fn)
      return on.call(this, event, (err) => {
        aborted++
        log.warn({ err, aborted }, 'dynalite request aborted before its body arrived')
      })
    }
    try {
      handle.call(server, req, res)
    } finally {
      delete req.on // the prototype's again
    }
  })

  // Only the HTTP side ever closes. dynalite's own close() also closes its
  // in-memory LevelDB, and a request whose handler is between two reads then
  // fails with "Database is closed", which dynalite throws out of its request
  // handler: an uncaught exception in whatever process embeds it. The memdown
  // store holds no OS handles, so leaving it to the garbage collector costs
  // nothing, and a later listen() serves the same data (used to test a
  // DynamoDB outage).
  function closeHttp () {
    return new Promise((resolve) => http.Server.prototype.close.call(server, () => resolve()))
  }
  async function stop () {
    if (!server.listening) return
    const closed = closeHttp()
    // Keep-alive sockets from SDK clients would otherwise keep it answering.
    server.closeAllConnections()
    await closed
    log.info({ endpoint }, 'dynalite stopped answering (data kept)')
  }
  return {
    endpoint,
    port: bound,
    server, // the http.Server (benchmarks may wrap its request handling)
    stats: () => ({ inFlight, aborted }),
    stop,
    async start () {
      if (!server.listening) await listen(server, bound, host)
      log.info({ endpoint }, 'dynalite answering again')
    },
    /** Stop accepting, let requests in flight answer (up to drainMs), then drop every connection. */
    async close ({ drainMs = 2000 } = {}) {
      if (!server.listening) return
      const closed = closeHttp() // also closes idle keep-alive connections
      if (inFlight > 0) {
        let timer
        await Promise.race([
          new Promise((resolve) => { drained = resolve }),
          new Promise((resolve) => { timer = setTimeout(resolve, drainMs) })
        ])
        clearTimeout(timer)
        drained = null
      }
      server.closeAllConnections()
      await closed
    }
  }
}

/** Absolute path of an executable named `bin` on PATH (or `bin` itself if it has a slash), else null. */
function findBinary (bin) {
  const candidates = bin.includes('/') ? [bin] : (process.env.PATH || '').split(path.delimiter).filter(Boolean).map((d) => path.join(d, bin))
  for (const c of candidates) {
    try {
      fs.accessSync(c, fs.constants.X_OK)
      if (fs.statSync(c).isFile()) return c
    } catch {}
  }
  return null
}

/** One PING over a raw socket: true when Redis answers +PONG. */
function ping (port) {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1' })
    let buf = ''
    const done = (ok) => {
      sock.destroy()
      resolve(ok)
    }
    sock.setTimeout(500, () => done(false))
    sock.on('error', () => done(false))
    sock.on('connect', () => sock.write('PING\r\n'))
    sock.on('data', (d) => {
      buf += d.toString('latin1')
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'))
    })
  })
}

// Children still running when this process exits are killed with it.
const children = new Set()
let exitHook = false
/** Kill `child` (SIGKILL) if it is still running when this process exits. */
function killOnExit (child) {
  children.add(child)
  child.once('exit', () => children.delete(child))
  if (!exitHook) {
    exitHook = true
    process.once('exit', () => { for (const c of children) c.kill('SIGKILL') })
  }
}

/**
 * Spawn a private redis-server on 127.0.0.1 with no persistence
 * (`--save '' --appendonly no`), and wait until it answers PING.
 * @param {{ logger?, port?: number, bin?: string, timeoutMs?: number, args?: string[] }} [options]
 *   port: a fixed port (e.g. to restart one on the port a client knows); default a free one.
 *   args: more redis-server arguments, after ours (a later `--dir` wins), e.g. for a test
 *   that restarts Redis from a snapshot taken with SAVE
 * @returns {Promise<{ url, port, pid, child, close() } | null>} null when the binary is missing
 */
async function spawnRedis ({ logger = silent, port, bin = 'redis-server', timeoutMs = 10000, args = [] } = {}) {
  const file = findBinary(bin)
  if (!file) return null
  const log = logger.child({ component: 'redis-server' })
  // A free port can be taken between our probe and Redis's bind: try again.
  for (let attempt = 1; ; attempt++) {
    const p = port || await freePort()
    const child = spawn(file, [
      '--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--dir', os.tmpdir(), '--daemonize', 'no', '--loglevel', 'warning', ...args
    ], { stdio: ['ignore', 'pipe', 'pipe'] })
    killOnExit(child)
    let output = ''
    const keep = (d) => { output = (output + d.toString()).slice(-2000) }
    child.stdout.on('data', keep)
    child.stderr.on('data', keep)
    let exited = false
    const exit = new Promise((resolve) => child.once('exit', (code, signal) => { exited = true; resolve({ code, signal }) }))
    child.once('error', keep)
    try {
      await pollUntil(async () => exited ? 'exited' : (await ping(p)) || undefined, { timeoutMs, intervalMs: 25, what: `redis-server on port ${p}` })
    } catch (err) {
      child.kill('SIGKILL')
      throw new StoreUnavailableError(`redis-server did not start on port ${p}: ${err.message}; output: ${output.trim()}`, { cause: err })
    }
    if (exited) {
      if (!port && attempt < 5) continue
      throw new StoreUnavailableError(`redis-server exited on start (port ${p}): ${output.trim()}`)
    }
    const url = `redis://127.0.0.1:${p}`
    log.info({ url, pid: child.pid }, 'spawned redis-server (no persistence)')
    return {
      url,
      port: p,
      pid: child.pid,
      child,
      async close () {
        if (!exited) {
          child.kill('SIGTERM')
          const t = setTimeout(() => child.kill('SIGKILL'), 5000)
          await exit
          clearTimeout(t)
        }
        log.info({ url }, 'redis-server stopped')
      }
    }
  }
}

module.exports = { startDynalite, spawnRedis, findBinary, killOnExit }
