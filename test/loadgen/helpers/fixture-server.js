'use strict'

const http = require('node:http')
const path = require('node:path')
const { fork } = require('node:child_process')
const { once } = require('node:events')
const { performance } = require('node:perf_hooks')
const { listen, close } = require('../../../core/http')

/**
 * A fast local HTTP server standing in for a cluster: it answers
 * `/<anything>?key=K` itself, says which "server" owns the key in
 * X-Served-By (route(key)), and records every arrival. `behave(req)` can
 * delay, fail or hang individual requests to exercise the driver.
 * @param {object} [options]
 * @param {(key: string) => string|null} [options.route] server id for a key (null: no header)
 * @param {(info: { key: string, method: string, t: number }) => { status?: number, delayMs?: number, hang?: boolean, serverTimingMs?: number } | undefined} [options.behave]
 *   serverTimingMs: answer with `Server-Timing: app;dur=<it>` (the time the server says it spent)
 */
async function startFixture ({ route = defaultRoute, behave = () => undefined } = {}) {
  const arrivals = []
  const sockets = new Set()
  const timers = new Set()
  const server = http.createServer((req, res) => {
    const t = performance.now()
    const url = new URL(req.url, 'http://fixture')
    const key = url.searchParams.get('key') || ''
    let bodyLength = 0
    req.on('data', (c) => { bodyLength += c.length })
    req.on('end', () => {
      const arrival = { t, method: req.method, key, bodyLength, contentType: req.headers['content-type'], path: req.url, repliedAt: null }
      arrivals.push(arrival)
      const b = behave({ key, method: req.method, t }) || {}
      if (b.hang) return
      const reply = () => {
        arrival.repliedAt = performance.now()
        const id = route(key)
        if (id) res.setHeader('X-Served-By', id)
        if (b.serverTimingMs !== undefined) res.setHeader('Server-Timing', `app;dur=${b.serverTimingMs}`)
        res.statusCode = b.status || 200
        res.end(JSON.stringify({ key }))
      }
      if (b.delayMs > 0) {
        const timer = setTimeout(() => { timers.delete(timer); reply() }, b.delayMs)
        timers.add(timer)
      } else reply()
    })
  })
  server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)) })
  const port = await listen(server, 0, '127.0.0.1')
  return {
    url: `http://127.0.0.1:${port}`,
    arrivals,
    async close () {
      for (const t of timers) clearTimeout(t)
      // Hung requests keep their sockets open; close() would wait for them forever.
      for (const s of sockets) s.destroy()
      await close(server)
    }
  }
}

/** key-N is owned by s(N mod 3); keys without a number by s0. */
function defaultRoute (key) {
  const m = /(\d+)$/.exec(key.split('_')[0])
  return 's' + (m ? Number(m[1]) % 3 : 0)
}

/**
 * The same fixture in a child process (default routing; optional one-off
 * stall or fixed delay). `arrivals()` fetches what it recorded; times are the
 * child's performance.now(), so compare them with each other only.
 * @param {{ stallAtMs?: number, stallMs?: number, delayMs?: number }} [options]
 */
async function startFixtureProcess (options = {}) {
  const child = fork(path.join(__dirname, 'fixture-child.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const next = async (type) => {
    for (;;) {
      const [msg] = await once(child, 'message')
      if (msg.type === type) return msg
    }
  }
  child.send({ type: 'start', options })
  const { url } = await next('listening')
  return {
    url,
    async arrivals () {
      child.send({ type: 'arrivals' })
      return (await next('arrivals')).arrivals
    },
    async close () {
      if (child.exitCode !== null) return
      const exited = once(child, 'exit')
      child.send({ type: 'close' })
      await exited
    }
  }
}

/** A port nothing listens on (bound, then released). */
async function closedPort () {
  const server = http.createServer()
  const port = await listen(server, 0, '127.0.0.1')
  await close(server)
  return port
}

module.exports = { startFixture, startFixtureProcess, closedPort, defaultRoute }
