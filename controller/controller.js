'use strict'

const http = require('node:http')
const express = require('express')
const { Registry, Counter, Gauge } = require('prom-client')
const { Pusher } = require('./pusher')
const { LoadCollector } = require('./load-collector')
const { getStrategy } = require('./strategies')
const { sameLayout, spreadLoads, serverLoads, imbalance, keyChurn } = require('../core/assignment')
const { KEYSPACE_SIZE } = require('../core/keyspace')
const { jsonErrorHandler, listen, close } = require('../core/http')
const { InvalidArgumentError, NoAssignmentError, UnknownServerError } = require('../core/errors')
const { silent } = require('../core/logger')

/** Every option of createController and its default. */
const defaults = Object.freeze({
  host: '127.0.0.1',
  port: 0,
  advertiseHost: '127.0.0.1',
  strategy: 'chopper', // 'chopper' | 'consistent-hash'
  strategyOptions: {}, // thresholds, see docs/algorithm.md
  periodMs: 5000,
  historySize: 120, // rounds kept for /v1/status
  evictAfterFailures: 3, // consecutive failed load collections before a server is dropped
  requestTimeoutMs: 2000, // pushes and load collection
  logger: silent
})

const ID = /^[A-Za-z0-9._-]{1,128}$/
const URL_RE = /^https?:\/\/[^\s/]+$/

/**
 * The controller: membership, the periodic balancing round, assignment
 * pushes, and status. `runRound()` is exposed so tests can drive rounds
 * without waiting for the timer.
 */
function createController (options = {}) {
  const opts = { ...defaults, ...options }
  if (!Number.isInteger(opts.periodMs) || opts.periodMs < 10) throw new InvalidArgumentError('invalid periodMs: expected an integer >= 10')
  if (!Number.isInteger(opts.evictAfterFailures) || opts.evictAfterFailures < 1) throw new InvalidArgumentError('invalid evictAfterFailures: expected an integer >= 1')
  const strategy = getStrategy(opts.strategy)
  const strategyOptions = { ...opts.strategyOptions }
  // Validate the strategy options now rather than at the first round.
  strategy.initial({ probe: { url: 'http://127.0.0.1:1' } }, strategyOptions)
  const log = opts.logger.child({ component: 'controller' })

  const servers = new Map() // id -> { url, controlUrl, failures }
  const frontends = new Map() // id -> { controlUrl }
  const pusher = new Pusher({ timeoutMs: opts.requestTimeoutMs, logger: log })
  const collector = new LoadCollector({ timeoutMs: Math.min(opts.requestTimeoutMs, Math.max(50, Math.floor(opts.periodMs / 2))) })
  const history = []
  let assignment = null
  let pristine = true // no traffic seen yet: membership changes re-lay the keyspace evenly
  // Highest generation any member reported holding. After a controller restart
  // members hold generations this process never issued; numbering above them
  // keeps their stale-generation check from refusing every new push.
  let generationFloor = 0
  let round = 0
  let timer = null
  let running = null
  let lastLoads = null

  const registry = new Registry()
  const registers = [registry]
  const m = {
    rounds: new Counter({ name: 'chopper_controller_rounds_total', help: 'Balancing rounds run', registers }),
    churn: new Counter({ name: 'chopper_controller_key_churn_total', help: 'Key-range length moved between servers', registers }),
    collectFailures: new Counter({ name: 'chopper_controller_load_collection_failures_total', help: 'Failed load collections', labelNames: ['server'], registers }),
    evictions: new Counter({ name: 'chopper_controller_evictions_total', help: 'Servers dropped after failing load collection', registers }),
    imbalance: new Gauge({ name: 'chopper_controller_imbalance', help: 'Imbalance (max/mean server load) of the last period', registers })
  }
  new Gauge({ name: 'chopper_controller_generation', help: 'Current assignment generation', registers, collect () { this.set(assignment ? assignment.generation : 0) } }) // eslint-disable-line no-new
  new Gauge({ name: 'chopper_controller_push_failures', help: 'Failed assignment pushes (retried)', registers, collect () { this.set(pusher.stats.failures) } }) // eslint-disable-line no-new
  new Gauge({ name: 'chopper_controller_servers', help: 'Registered app servers', registers, collect () { this.set(servers.size) } }) // eslint-disable-line no-new

  function serverMap () {
    const out = {}
    for (const [id, s] of servers) out[id] = { url: s.url }
    return out
  }

  /** Install `next` if its layout differs, with the next generation, and push it. */
  function commit (next, reason) {
    if (assignment && next && sameLayout(next, assignment)) return false
    const generation = Math.max(assignment ? assignment.generation : 0, generationFloor) + 1
    assignment = next ? { ...next, generation } : null
    if (assignment) {
      pusher.publish(assignment)
      log.info({ generation, reason, slices: assignment.slices.length }, 'new assignment')
    }
    return true
  }

  /**
   * Note a member's generation; re-issue the current layout above it when it
   * is one this controller never issued (strictly above our current one: the
   * generations we issued are all at or below it, and members report them back).
   */
  function noteGeneration (generation) {
    if (!Number.isSafeInteger(generation) || generation <= generationFloor) return
    generationFloor = generation
    if (assignment && assignment.generation < generationFloor) {
      assignment = { ...assignment, generation: generationFloor + 1 }
      pusher.publish(assignment)
      log.info({ generation: assignment.generation }, 'members hold newer generations (controller restart?): re-issued the assignment above them')
    }
  }

  function addServer (id, url, controlUrl) {
    const known = servers.get(id)
    servers.set(id, { url, controlUrl, failures: 0 })
    pusher.addTarget(`server:${id}`, controlUrl)
    if (known && known.url === url) return
    if (!assignment || pristine) {
      commit(strategy.initial(serverMap(), strategyOptions), `join ${id}`)
    } else if (known) {
      const next = { ...assignment, servers: serverMap() }
      commit(next, `url change ${id}`)
    } else {
      commit(strategy.addServer(assignment, id, url, lastLoadsFor(assignment), strategyOptions), `join ${id}`)
    }
  }

  function removeServer (id, reason) {
    if (!servers.has(id)) return false
    servers.delete(id)
    pusher.removeTarget(`server:${id}`)
    if (servers.size === 0) {
      // Keep numbering above what members hold when servers come back.
      generationFloor = Math.max(generationFloor, assignment ? assignment.generation : 0)
      assignment = null
      log.warn({ server: id }, 'last app server left; no assignment')
    } else if (pristine) {
      commit(strategy.initial(serverMap(), strategyOptions), `${reason} ${id}`)
    } else {
      // Slices of a leaving server are reassigned at once, not at the next round.
      commit(strategy.removeServer(assignment, id, lastLoadsFor(assignment), strategyOptions), `${reason} ${id}`)
    }
    return true
  }

  function lastLoadsFor (a) {
    return lastLoads ? spreadLoads(a, lastLoads) : new Float64Array(a.slices.length)
  }

  /** One balancing period: collect, rebalance, bump, push (paper 4.3). */
  async function runRound () {
    if (running) return running
    running = (async () => {
      const t0 = process.hrtime.bigint()
      round++
      if (!assignment) return null
      const { entries, perServer, failed } = await collector.collect(servers)
      for (const f of failed) {
        const s = servers.get(f.id)
        m.collectFailures.inc({ server: f.id })
        if (!s) continue
        s.failures++
        log.warn({ server: f.id, failures: s.failures, err: f.error }, 'load collection failed')
        if (s.failures >= opts.evictAfterFailures) {
          m.evictions.inc()
          log.error({ server: f.id }, 'evicting unreachable app server')
          removeServer(f.id, 'evict')
        }
      }
      for (const id of Object.keys(perServer)) { const s = servers.get(id); if (s) s.failures = 0 }
      if (!assignment) return null

      const before = assignment
      const loads = spreadLoads(before, entries)
      lastLoads = entries
      const total = loads.reduce((x, y) => x + y, 0)
      const perServerLoad = serverLoads(before, loads)
      const imb = imbalance(perServerLoad)
      let churn = 0
      let changed = false
      if (total > 0) {
        pristine = false
        const next = strategy.rebalance(before, loads, strategyOptions)
        churn = keyChurn(before, next)
        changed = commit(next, `round ${round}`)
      }
      m.rounds.inc()
      m.churn.inc(churn)
      m.imbalance.set(imb)
      const entry = {
        round,
        at: Date.now(),
        generation: assignment ? assignment.generation : 0,
        totalLoad: total,
        perServer: Object.fromEntries(Object.entries(perServerLoad).map(([id, v]) => [id, v.load])),
        imbalance: imb,
        changed,
        churn,
        churnFraction: churn / KEYSPACE_SIZE,
        slices: assignment ? assignment.slices.length : 0,
        durationMs: Number(process.hrtime.bigint() - t0) / 1e6
      }
      history.push(entry)
      if (history.length > opts.historySize) history.shift()
      return entry
    })()
    try {
      return await running
    } finally {
      running = null
    }
  }

  function schedule () {
    timer = setTimeout(async () => {
      try {
        await runRound()
      } catch (err) {
        log.error({ err }, 'balancing round failed')
      }
      if (timer) schedule()
    }, opts.periodMs)
  }

  // ---- HTTP API (control plane only) ----
  const app = express()
  app.disable('x-powered-by')
  app.use(express.json({ limit: '1mb' }))

  const bad = (msg) => { throw new InvalidArgumentError(msg) }
  app.post('/v1/servers', (req, res) => {
    const { id, url, controlUrl, generation = 0 } = req.body || {}
    if (typeof id !== 'string' || !ID.test(id)) bad('invalid id: expected 1-128 characters of [A-Za-z0-9._-]')
    if (!Number.isSafeInteger(generation) || generation < 0) bad('invalid generation: expected a non-negative integer')
    if (typeof url !== 'string' || !URL_RE.test(url)) bad('invalid url: expected http(s)://host:port')
    if (typeof controlUrl !== 'string' || !URL_RE.test(controlUrl)) bad('invalid controlUrl: expected http(s)://host:port')
    if (url === controlUrl) bad('invalid controlUrl: the control plane must listen on its own port')
    noteGeneration(generation)
    addServer(id, url, controlUrl)
    res.status(201).json({ assignment })
  })
  app.delete('/v1/servers/:id', (req, res) => {
    if (!removeServer(req.params.id, 'leave')) throw new UnknownServerError(`unknown app server ${req.params.id}`)
    res.json({ removed: req.params.id, generation: assignment ? assignment.generation : 0 })
  })
  app.post('/v1/frontends', (req, res) => {
    const { id, controlUrl, generation = 0 } = req.body || {}
    if (typeof id !== 'string' || !ID.test(id)) bad('invalid id: expected 1-128 characters of [A-Za-z0-9._-]')
    if (typeof controlUrl !== 'string' || !URL_RE.test(controlUrl)) bad('invalid controlUrl: expected http(s)://host:port')
    if (!Number.isSafeInteger(generation) || generation < 0) bad('invalid generation: expected a non-negative integer')
    noteGeneration(generation)
    frontends.set(id, { controlUrl })
    pusher.addTarget(`frontend:${id}`, controlUrl)
    res.status(201).json({ assignment })
  })
  app.delete('/v1/frontends/:id', (req, res) => {
    if (!frontends.delete(req.params.id)) throw new UnknownServerError(`unknown front end ${req.params.id}`)
    pusher.removeTarget(`frontend:${req.params.id}`)
    res.json({ removed: req.params.id })
  })
  app.get('/v1/assignment', (req, res) => {
    if (!assignment) throw new NoAssignmentError('no assignment: no app server has registered')
    res.json(assignment)
  })
  app.get('/v1/status', (req, res) => res.json(status()))
  app.get('/healthz', (req, res) => res.json({ ok: true, generation: assignment ? assignment.generation : 0 }))
  app.get('/metrics', async (req, res) => {
    res.set('Content-Type', registry.contentType).send(await registry.metrics())
  })
  app.use(jsonErrorHandler(log))

  function status () {
    const share = assignment ? serverLoads(assignment, new Float64Array(assignment.slices.length)) : {}
    const last = history[history.length - 1]
    return {
      strategy: strategy.name,
      periodMs: opts.periodMs,
      generation: assignment ? assignment.generation : 0,
      servers: Object.fromEntries([...servers].map(([id, s]) => [id, {
        url: s.url,
        controlUrl: s.controlUrl,
        slices: share[id] ? share[id].slices : 0,
        keyspaceShare: share[id] ? share[id].keys / KEYSPACE_SIZE : 0,
        lastLoad: last && last.perServer[id] !== undefined ? last.perServer[id] : null,
        collectionFailures: s.failures
      }])),
      frontends: Object.fromEntries([...frontends].map(([id, f]) => [id, { controlUrl: f.controlUrl }])),
      pushes: { ...pusher.stats, lagging: pusher.lagging() },
      rounds: history.slice()
    }
  }

  const server = http.createServer(app)
  let url = null
  return {
    app,
    async start () {
      const port = await listen(server, opts.port, opts.host)
      url = `http://${opts.advertiseHost}:${port}`
      schedule()
      log.info({ url, strategy: strategy.name, periodMs: opts.periodMs }, 'controller listening')
      return { url }
    },
    async close () {
      clearTimeout(timer)
      timer = null
      if (running) await running.catch(() => {})
      pusher.close()
      await close(server)
    },
    runRound,
    status,
    registry,
    get assignment () { return assignment },
    get url () { return url }
  }
}

module.exports = { createController, defaults }
