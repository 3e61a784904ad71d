'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { freePort } = require('../../core/http')
const { InvalidArgumentError } = require('../../core/errors')
const { haproxyConfig } = require('./haproxy-config')
const { nginxConfig } = require('./nginx-config')
const { waitServing } = require('./probe')

/**
 * How to run each peer proxy: its config file name, the config for a port,
 * and the command line. Both stay in the foreground (haproxy -db, nginx
 * "daemon off"), so the child's pid is the proxy's, and stopping it stops it.
 */
const KINDS = Object.freeze({
  haproxy: {
    file: 'haproxy.cfg',
    config: ({ host, port, backend, procs }) => haproxyConfig({ host, port, backend, threads: procs }),
    args: ({ file }) => ['-db', '-f', file]
  },
  nginx: {
    file: 'nginx.conf',
    config: ({ host, port, backend, procs, dir }) => nginxConfig({ host, port, backend, workers: procs, dir }),
    // -e: the error log before the config is read (the default path may not be writable).
    args: ({ file, dir }) => ['-p', `${dir}/`, '-e', 'stderr', '-c', file]
  }
})

/** Every option of startProxy and its default. */
const defaults = Object.freeze({
  kind: undefined, // a key of KINDS
  backend: undefined, // http://host:port
  procs: 1, // HAProxy threads or nginx workers
  host: '127.0.0.1',
  binary: undefined, // defaults to the kind's name
  attempts: 5, // free-port races: another process took the port between probe and bind
  readyTimeoutMs: 10000,
  stopTimeoutMs: 5000
})

/**
 * Run HAProxy or nginx as a child process in front of `backend`, with a
 * configuration generated into a fresh temp dir, on a free port of `host`.
 * Resolves once a request through it is answered 200.
 * @param {Partial<typeof defaults>} options
 * @returns {Promise<{ url: string, pid: number, config: string, stop: () => Promise<void> }>}
 */
async function startProxy (options = {}) {
  const o = { ...defaults, ...options }
  if (!Object.hasOwn(KINDS, o.kind)) throw new InvalidArgumentError(`invalid kind: expected one of ${Object.keys(KINDS).join(', ')}, got ${JSON.stringify(o.kind)}`)
  if (!Number.isInteger(o.attempts) || o.attempts < 1) throw new InvalidArgumentError('invalid attempts: expected an integer >= 1')
  const kind = KINDS[o.kind]
  const binary = o.binary || o.kind
  // Under /tmp, world-traversable: nginx's workers run as nobody when started by root.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `chopper-bench-${o.kind}-`))
  fs.chmodSync(dir, 0o755)
  const file = path.join(dir, kind.file)
  let lastErr = null
  try {
    for (let attempt = 0; attempt < o.attempts; attempt++) {
      const port = await freePort(o.host)
      const config = kind.config({ host: o.host, port, backend: o.backend, procs: o.procs, dir })
      fs.writeFileSync(file, config)
      const child = spawn(binary, kind.args({ file, dir }), { stdio: ['ignore', 'ignore', 'pipe'] })
      let stderr = ''
      child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000) })
      let exit = null
      const exited = new Promise((resolve) => {
        child.once('exit', (code, signal) => { exit = { code, signal }; resolve(exit) })
        child.once('error', (err) => { exit = { code: err.code, signal: null }; resolve(exit) })
      })
      const url = `http://${o.host}:${port}`
      try {
        await waitServing(`${url}/x?key=bench`, { timeoutMs: o.readyTimeoutMs, gaveUp: () => exit !== null, what: `${o.kind} on ${url}` })
      } catch (err) {
        child.kill('SIGKILL')
        await exited
        throw err
      }
      if (exit !== null) {
        lastErr = new Error(`${o.kind} exited (${exit.code ?? exit.signal}) at start: ${stderr.trim()}`)
        if (/cannot bind|Address already in use/i.test(stderr)) continue
        throw lastErr
      }
      let stopping = null
      const stop = () => {
        stopping = stopping || (async () => {
          // SIGTERM is a fast stop for both: the run is over, nothing is in flight.
          if (exit === null) child.kill('SIGTERM')
          const t = setTimeout(() => child.kill('SIGKILL'), o.stopTimeoutMs)
          await exited
          clearTimeout(t)
          child.stderr.destroy()
          fs.rmSync(dir, { recursive: true, force: true })
        })()
        return stopping
      }
      return { url, pid: child.pid, config, stop }
    }
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true })
    throw err
  }
  fs.rmSync(dir, { recursive: true, force: true })
  throw lastErr
}

module.exports = { startProxy, defaults, KINDS }
