'use strict'

// One process whose memory bench/memory.js measures: a front end
// (createFrontend), an app server (createAppServer with a trivial app), or a
// backend that holds every request until told to answer. Run with
// --expose-gc so `measure` can collect garbage first. Modules are required
// lazily, so `measure` before `start-*` is a bare Node process with this
// harness loaded.
const fs = require('node:fs')
const { serveChild } = require('./child')

let component = null
let backend = null

/** Open file descriptors of this process (sockets included); -1 where /proc is missing. */
function countFds () {
  try {
    return fs.readdirSync('/proc/self/fd').length
  } catch {
    return -1
  }
}

async function collect () {
  if (typeof global.gc !== 'function') return false
  // Twice, with a turn of the event loop between: weak callbacks and
  // finalizers run after the first, freeing more for the second.
  global.gc()
  await new Promise((resolve) => setImmediate(resolve))
  global.gc()
  // V8 hands freed pages back to the OS from background threads after the
  // collection, so RSS keeps falling for a moment: wait (at most 2 s) until
  // two readings 50 ms apart are within 256 KiB of each other.
  const deadline = Date.now() + 2000
  let last = process.memoryUsage.rss()
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    const now = process.memoryUsage.rss()
    if (Math.abs(now - last) < 256 * 1024) break
    last = now
  }
  return true
}

function startBackend () {
  const http = require('node:http')
  const held = []
  const stats = { received: 0, held: 0, answered: 0, holding: true }
  const answer = (res) => {
    res.setHeader('content-type', 'text/plain')
    res.end('ok')
    stats.answered++
  }
  const server = http.createServer((req, res) => {
    stats.received++
    req.resume()
    if (!stats.holding) return answer(res)
    held.push(res)
    stats.held++
    res.once('close', () => { if (!res.writableEnded) stats.held-- })
  })
  server.keepAliveTimeout = 60000
  backend = {
    server,
    stats,
    hold () {
      stats.holding = true
    },
    release () {
      stats.holding = false
      for (const res of held.splice(0)) {
        if (!res.destroyed) { stats.held--; answer(res) }
      }
    }
  }
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${server.address().port}` })))
}

const handlers = {
  async measure ({ gc = true }) {
    const collected = gc ? await collect() : false
    const m = process.memoryUsage()
    return {
      rss: m.rss,
      heapUsed: m.heapUsed,
      heapTotal: m.heapTotal,
      external: m.external,
      arrayBuffers: m.arrayBuffers,
      maxRss: process.resourceUsage().maxRSS * 1024, // peak so far (resourceUsage reports KiB)
      fds: countFds(),
      gc: collected
    }
  },
  fds: () => countFds(),
  async 'start-frontend' () {
    const { createFrontend } = require('../../frontend')
    component = createFrontend({})
    return component.start()
  },
  async 'start-appserver' () {
    const express = require('express')
    const { createAppServer } = require('../../appserver-lib/index.js')
    const app = express.Router()
    app.get('/hello', (req, res) => res.json({ key: req.query.key, ok: true }))
    component = createAppServer({ id: 'app-0', app })
    return component.start()
  },
  'start-backend': () => startBackend(),
  'backend-stats': () => ({ ...backend.stats }),
  'backend-hold': () => { backend.hold(); return { ...backend.stats } },
  'backend-release': () => { backend.release(); return { ...backend.stats } }
}

serveChild(handlers)
