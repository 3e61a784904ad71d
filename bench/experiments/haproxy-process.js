'use strict'

const { freePort } = require('../../core/http')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const net = require('node:net')
const { spawn, execFileSync } = require('node:child_process')
const { haproxyConfig } = require('./haproxy-config')
const { InvalidArgumentError, TimeoutError } = require('../../core/errors')
const { pollUntil } = require('../../core/poll')

/** Every option of startHaproxy and its default. */
const defaults = Object.freeze({
  balance: 'haproxy-ch',
  servers: [], // [{ id, url }]
  host: '127.0.0.1',
  binary: 'haproxy',
  attempts: 5, // free-port races (another process took the port between probe and bind)
  readyTimeoutMs: 5000,
  stopTimeoutMs: 5000
})

/** The HAProxy binary's version line, or null when it is not installed. */
function haproxyVersion (binary = defaults.binary) {
  try {
    return execFileSync(binary, ['-v'], { encoding: 'utf8' }).split('\n')[0].trim()
  } catch {
    return null
  }
}

/** A port that was free a moment ago (HAProxy cannot bind port 0, so the caller retries on a race). */

function canConnect (host, port) {
  return new Promise((resolve) => {
    const sock = net.connect({ host, port })
    sock.once('connect', () => { sock.destroy(); resolve(true) })
    sock.once('error', () => resolve(false))
  })
}

/**
 * Run HAProxy as a child process in front of `servers` with a generated
 * configuration, on a free port of 127.0.0.1.
 * @param {Partial<typeof defaults>} options
 * @returns {Promise<{ url: string, port: number, config: string, version: string, stop: () => Promise<void> }>}
 */
async function startHaproxy (options = {}) {
  const o = { ...defaults, ...options }
  if (!Number.isInteger(o.attempts) || o.attempts < 1) throw new InvalidArgumentError('invalid attempts: expected an integer >= 1')
  const version = haproxyVersion(o.binary)
  if (!version) throw new InvalidArgumentError(`invalid binary: ${o.binary} is not installed (apt-get install -y haproxy)`)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-haproxy-'))
  let lastErr
  try {
    for (let attempt = 0; attempt < o.attempts; attempt++) {
      const port = await freePort(o.host)
      const config = haproxyConfig({ balance: o.balance, host: o.host, port, servers: o.servers })
      const file = path.join(dir, 'haproxy.cfg')
      fs.writeFileSync(file, config)
      // -db: stay in the foreground, so stopping the child stops HAProxy.
      const child = spawn(o.binary, ['-db', '-f', file], { stdio: ['ignore', 'ignore', 'pipe'] })
      let stderr = ''
      child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000) })
      const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
      let exit = null
      exited.then((e) => { exit = e })
      try {
        await pollUntil(async () => exit !== null || await canConnect(o.host, port), { timeoutMs: o.readyTimeoutMs, intervalMs: 20, what: `HAProxy to listen on ${o.host}:${port}` })
      } catch (err) {
        child.kill('SIGKILL')
        await exited
        throw err
      }
      if (exit !== null) {
        lastErr = new InvalidArgumentError(`haproxy exited (${exit.code ?? exit.signal}) at start: ${stderr.trim()}`)
        if (/cannot bind|Address already in use/i.test(stderr)) continue
        throw lastErr
      }
      const stop = async () => {
        if (exit !== null) return
        child.kill('SIGTERM') // hard stop: the run is over, nothing is in flight
        const t = setTimeout(() => child.kill('SIGKILL'), o.stopTimeoutMs)
        await exited
        clearTimeout(t)
        child.stderr.destroy()
        fs.rmSync(dir, { recursive: true, force: true })
      }
      return { url: `http://${o.host}:${port}`, port, config, version, stop }
    }
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true })
    throw err
  }
  fs.rmSync(dir, { recursive: true, force: true })
  throw lastErr || new TimeoutError('haproxy did not start')
}

module.exports = { startHaproxy, haproxyVersion, defaults }
