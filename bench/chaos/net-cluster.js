'use strict'

const crypto = require('node:crypto')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const pino = require('pino')
const { sliceKey } = require('../../core/keyspace')
const { SliceMap } = require('../../core/slice-map')
const { pollUntil } = require('../../core/poll')
const { InvalidArgumentError, InternalError } = require('../../core/errors')
const { validateToken } = require('../../core/cluster-auth')
const { createNetwork } = require('./netns')
const { NetRules } = require('./net-rules')
const { getText } = require('./http')

const ROOT = path.join(__dirname, '..', '..')
const CLOCK = path.join(__dirname, 'skewed-clock.js')

/** Every option of startNetCluster and its default. */
const defaults = Object.freeze({
  servers: 3,
  frontends: 2,
  controllers: 2, // a leader and a standby sharing a state table in the DynamoDB emulator
  periodMs: 1000,
  logDir: undefined, // required
  logLevel: 'info', // controllers and front ends
  appLogLevel: 'warn',
  clusterToken: undefined, // undefined: a random one for the run
  readyTimeoutMs: 60000,
  pollMs: 100 // how often the bench reads every controller's status
})

// Ports are the harness's choice: every component has a host, so an address, of its own.
const PORTS = Object.freeze({ controller: 7070, frontend: 8080, frontendControl: 8081, app: 9000, appControl: 9001, dynamo: 4567, redis: 6379 })

/**
 * The system under test on test hosts (bench/chaos/netns.js,
 * docs/network-faults.md): each component a process of its own, started
 * with its production entry point (bin/), on a host of its own: `ctl-1` and
 * `ctl-2` (a leader and a standby), `fe-1`..`fe-N`, `app-1`..`app-N`
 * (kv-cache, strict), `ddb` (dynalite: the controllers' state table and
 * kv-cache's table) and `redis` (one redis-server per app server). The bench
 * runs in the root namespace, on the bridge: it sends the load, reads every
 * controller's status every `pollMs`, and sets faults with `rules`
 * (bench/chaos/net-rules.js).
 *
 * App servers start with bench/chaos/skewed-clock.js preloaded: their clock
 * runs true until `skewClock(id, { rate, stepMs })`.
 *
 * Offers what bench/chaos/index.js reads of a cluster (the interface of
 * bench/chaos/cluster.js), from the polled status.
 */
async function startNetCluster (options = {}) {
  const opts = { ...defaults, ...options }
  if (typeof opts.logDir !== 'string') throw new InvalidArgumentError('invalid logDir: expected a directory path')
  const clusterToken = opts.clusterToken === undefined ? crypto.randomBytes(32).toString('base64url') : validateToken(opts.clusterToken)
  fs.mkdirSync(opts.logDir, { recursive: true })
  const logger = pino({ level: 'info' }, pino.destination({ dest: path.join(opts.logDir, 'bench-net.log'), sync: true }))
  const ctlIds = Array.from({ length: opts.controllers }, (_, i) => `ctl-${i + 1}`)
  const feIds = Array.from({ length: opts.frontends }, (_, i) => `fe-${i + 1}`)
  const ids = Array.from({ length: opts.servers }, (_, i) => `app-${i + 1}`)
  const network = await createNetwork({ hosts: [...ctlIds, ...feIds, ...ids, 'ddb', 'redis', 'proxy'] })
  const rules = new NetRules(network)
  const procs = new Map() // name -> child
  const statuses = new Map() // controller host -> last status read
  const reachable = new Map() // controller host -> whether the last read answered
  let published = null
  let leaderHost = null
  let poller = null
  const ip = (h) => network.ip(h)
  const url = (h, port) => `http://${ip(h)}:${port}`
  const controllerUrls = ctlIds.map((h) => url(h, PORTS.controller))
  const clockFile = (id) => path.join(opts.logDir, `${id}.clock.json`)
  const baseEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: process.env.NODE_ENV,
    // dynalite takes any credentials; the SDK wants some
    AWS_ACCESS_KEY_ID: 'chopperlocal',
    AWS_SECRET_ACCESS_KEY: 'chopperlocal',
    AWS_REGION: 'us-west-2',
    CHOPPER_CLUSTER_TOKEN: clusterToken
  }

  function start (name, host, command, args, env = {}) {
    const log = fs.openSync(path.join(opts.logDir, `${name}.log`), 'a')
    let child
    try {
      child = network.spawn(host, command, args, { cwd: ROOT, env: { ...baseEnv, ...env }, stdio: ['ignore', 'pipe', log] })
    } finally {
      fs.closeSync(log)
    }
    child.stdout.on('data', (d) => fs.appendFileSync(path.join(opts.logDir, `${name}.log`), d))
    procs.set(name, child)
    return child
  }

  async function poll () {
    await Promise.all(ctlIds.map(async (h) => {
      // A status read that fails (the controller is busy, or cut from the bench) keeps the last one read.
      try {
        statuses.set(h, JSON.parse(await getText(`${url(h, PORTS.controller)}/v1/status`, { timeoutMs: 1000 })))
        reachable.set(h, true)
      } catch {
        reachable.set(h, false)
      }
    }))
    const leading = ctlIds.filter((h) => statuses.get(h) && statuses.get(h).role === 'leader').sort((a, b) => statuses.get(b).epoch - statuses.get(a).epoch)
    if (leading.length) leaderHost = leading[0]
    const s = leaderHost && statuses.get(leaderHost)
    if (s && s.generation > 0 && (!published || published.generation !== s.generation)) {
      try {
        const a = JSON.parse(await getText(`${url(leaderHost, PORTS.controller)}/v1/assignment`, { timeoutMs: 1000, token: clusterToken }))
        if (a && a.slices && (!published || a.generation > published.generation || a.epoch !== published.epoch)) published = a
      } catch {}
    }
  }

  const status = () => (leaderHost && statuses.get(leaderHost)) || { servers: {}, handoff: {}, generation: 0 }
  const controller = {
    status,
    get published () { return published },
    get url () { return leaderHost ? url(leaderHost, PORTS.controller) : controllerUrls[0] }
  }

  const tcpUp = (host, port) => new Promise((resolve) => {
    const s = net.connect(port, ip(host))
    s.setTimeout(500, () => { s.destroy(); resolve(false) })
    s.once('connect', () => { s.destroy(); resolve(true) })
    s.once('error', () => resolve(false))
  })
  const httpUp = async (u) => { try { await getText(u, { timeoutMs: 1000 }); return true } catch { return false } }

  try {
    start('ddb', 'ddb', process.execPath, [path.join(__dirname, 'net-dynalite.js'), ip('ddb'), String(PORTS.dynamo)])
    await pollUntil(() => tcpUp('ddb', PORTS.dynamo), { timeoutMs: opts.readyTimeoutMs, what: 'dynalite on ddb' })
    for (const [i] of ids.entries()) {
      start(`redis-${i + 1}`, 'redis', 'redis-server', ['--port', String(PORTS.redis + i), '--bind', ip('redis'), '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning', '--protected-mode', 'no'])
      await pollUntil(() => tcpUp('redis', PORTS.redis + i), { timeoutMs: opts.readyTimeoutMs, what: `redis-server ${i + 1}` })
    }
    for (const [i, h] of ctlIds.entries()) {
      start(h, h, process.execPath, ['bin/controller.js'], {
        CHOPPER_CONTROLLER_HOST: ip(h),
        CHOPPER_CONTROLLER_PORT: String(PORTS.controller),
        CHOPPER_ADVERTISE_HOST: ip(h),
        CHOPPER_CONTROLLER_ID: `controller-${i + 1}`,
        CHOPPER_PERIOD_MS: String(opts.periodMs),
        CHOPPER_STATE_TABLE: 'chopper-controller',
        CHOPPER_STATE_ENDPOINT: url('ddb', PORTS.dynamo),
        LOG_LEVEL: opts.logLevel
      })
      await pollUntil(() => httpUp(`${url(h, PORTS.controller)}/healthz`), { timeoutMs: opts.readyTimeoutMs, what: `controller on ${h}` })
      if (i === 0) {
        await pollUntil(async () => { await poll(); return leaderHost === h }, { timeoutMs: opts.readyTimeoutMs, what: 'the first controller to lead' })
      }
    }
    poller = setInterval(() => { poll().catch(() => {}) }, opts.pollMs)
    for (const id of ids) startServer(id)
    await Promise.all(ids.map((id) => waitRegistered(id, { timeoutMs: opts.readyTimeoutMs })))
    for (const h of feIds) {
      start(h, h, process.execPath, ['bin/frontend.js'], {
        CHOPPER_FRONTEND_WORKERS: '1',
        CHOPPER_FRONTEND_ID: h,
        CHOPPER_FRONTEND_HOST: ip(h),
        CHOPPER_FRONTEND_PORT: String(PORTS.frontend),
        CHOPPER_FRONTEND_CONTROL_PORT: String(PORTS.frontendControl),
        CHOPPER_ADVERTISE_HOST: ip(h),
        CHOPPER_CONTROLLER_URL: controllerUrls.join(','),
        LOG_LEVEL: opts.logLevel
      })
    }
    await Promise.all(feIds.map((h) => pollUntil(() => httpUp(`${url(h, PORTS.frontend)}/healthz`), { timeoutMs: opts.readyTimeoutMs, what: `front end on ${h}` })))
    await waitSettled({ timeoutMs: opts.readyTimeoutMs })
  } catch (err) {
    await closeAll()
    throw err
  }

  /** Start app server `id` on its host (again, after a kill). */
  function startServer (id) {
    const i = ids.indexOf(id)
    if (i === -1) throw new InvalidArgumentError(`unknown app server id ${JSON.stringify(id)}`)
    return start(id, id, process.execPath, ['-r', CLOCK, 'bin/appserver.js'], {
      CHOPPER_APP: 'kv-cache',
      CHOPPER_SERVER_ID: id,
      CHOPPER_CONTROLLER_URL: controllerUrls.join(','),
      CHOPPER_APP_HOST: ip(id),
      CHOPPER_APP_PORT: String(PORTS.app),
      CHOPPER_APP_CONTROL_PORT: String(PORTS.appControl),
      CHOPPER_ADVERTISE_HOST: ip(id),
      CHOPPER_DDB_ENDPOINT: url('ddb', PORTS.dynamo),
      REDIS_URL: `redis://${ip('redis')}:${PORTS.redis + i}`,
      CHOPPER_CLOCK_FILE: clockFile(id),
      LOG_LEVEL: opts.appLogLevel
    })
  }

  /**
   * One delay proxy (bench/chaos/delay-proxy.js) per controller, each a
   * process on the `proxy` host: `[{ ip, port, to, toPort }]` for
   * `rules.redirect`, and `close()`, which stops them and resolves their stats.
   */
  async function startDelayProxies ({ delayMs, jitterMs, seed }) {
    const started = []
    try {
      for (const h of ctlIds) {
        const options = { host: ip('proxy'), port: 0, target: { host: ip(h), port: PORTS.controller }, delayMs, jitterMs, seed: seed + started.length }
        const child = network.spawn('proxy', process.execPath, [path.join(__dirname, 'delay-proxy.js'), JSON.stringify(options)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
        const lines = []
        let buf = ''
        child.stdout.on('data', (d) => {
          buf += d
          let nl
          while ((nl = buf.indexOf('\n')) !== -1) {
            lines.push(JSON.parse(buf.slice(0, nl)))
            buf = buf.slice(nl + 1)
          }
        })
        const entry = { controller: h, child, lines, exited: new Promise((resolve) => child.once('exit', resolve)) }
        started.push(entry)
        const { port } = await pollUntil(() => lines.find((l) => l.port), { timeoutMs: 10000, intervalMs: 20, what: `the delay proxy for ${h}` })
        Object.assign(entry, { ip: ip(h), port: PORTS.controller, to: ip('proxy'), toPort: port })
      }
    } catch (err) {
      for (const e of started) e.child.kill('SIGKILL')
      throw err
    }
    return {
      targets: started.map(({ ip, port, to, toPort }) => ({ ip, port, to, toPort })),
      async close () {
        for (const e of started) e.child.kill('SIGTERM')
        await Promise.all(started.map((e) => e.exited))
        return started.map((e) => ({ controller: e.controller, ...((e.lines.find((l) => l.stats) || {}).stats) }))
      }
    }
  }

  /** Make app server `id`'s clock run at `rate` from now, stepped `stepMs` forward (bench/chaos/skewed-clock.js). */
  function skewClock (id, { rate = 1, stepMs = 0 } = {}) {
    fs.writeFileSync(clockFile(id), JSON.stringify({ rate, stepMs }))
    procs.get(id).kill('SIGUSR2')
  }

  function waitRegistered (id, { timeoutMs = 30000 } = {}) {
    return pollUntil(() => {
      const s = status()
      const e = s.servers[id]
      return Boolean(e && e.leaseRemainingMs > 0 && e.generation === s.generation)
    }, { timeoutMs, intervalMs: 50, what: `app server ${id} to be registered` })
  }

  function waitSettled ({ timeoutMs = 30000 } = {}) {
    return pollUntil(async () => {
      const s = status()
      const a = published
      if (!a || a.generation !== s.generation || s.handoff.inProgress) return false
      if (!ids.every((id) => s.servers[id] && s.servers[id].generation === a.generation)) return false
      const gens = await Promise.all(feIds.map(async (h) => {
        try { return JSON.parse(await getText(`${url(h, PORTS.frontend)}/healthz`, { timeoutMs: 1000 })).generation } catch { return -1 }
      }))
      return gens.every((g) => g === a.generation)
    }, { timeoutMs, intervalMs: 100, what: 'every component to hold the current assignment' })
  }

  function ownersOf (keys) {
    const a = published
    const out = new Map()
    if (!a) return out
    const map = new SliceMap(a)
    for (const key of keys) out.set(key, map.ownerOf(sliceKey(key)))
    return out
  }

  async function closeAll () {
    clearInterval(poller)
    for (const child of procs.values()) {
      try { child.kill('SIGTERM') } catch {}
    }
    await Promise.race([
      Promise.all([...procs.values()].map((c) => (c.exitCode !== null || c.signalCode !== null ? null : new Promise((resolve) => c.once('exit', resolve))))),
      new Promise((resolve) => setTimeout(resolve, 5000).unref())
    ])
    await network.close()
  }

  const member = (id) => {
    if (!ids.includes(id)) return undefined
    return {
      proc: {
        url: url(id, PORTS.app),
        controlUrl: url(id, PORTS.appControl),
        pid: procs.get(id) && procs.get(id).pid,
        signal: (sig) => procs.get(id).kill(sig),
        exitInfo: () => { const c = procs.get(id); return c.exitCode !== null || c.signalCode !== null ? { code: c.exitCode, signal: c.signalCode } : null },
        call: async () => ({}) // nothing to restore: network faults are healed by `rules`
      }
    }
  }

  return {
    kind: 'net',
    ids,
    controllerHosts: ctlIds,
    frontendHosts: feIds,
    network,
    rules,
    controller,
    controllers: () => ctlIds.map((h) => ({ host: h, url: url(h, PORTS.controller), status: statuses.get(h) || null, reachable: reachable.get(h) === true })),
    get leaderHost () { return leaderHost },
    clusterToken,
    logger,
    logDir: opts.logDir,
    get controllerUrl () { return controller.url },
    frontendUrls: feIds.map((h) => url(h, PORTS.frontend)),
    frontendControlUrls: feIds.map((h) => url(h, PORTS.frontendControl)),
    member,
    startServer,
    skewClock,
    startDelayProxies,
    waitRegistered,
    waitSettled,
    ownersOf,
    poll,
    close: closeAll,
    describe: () => ({ hosts: Object.fromEntries([...network.hosts.values()].map((h) => [h.name, h.ip])), bench: network.address, ports: PORTS })
  }
}

/** A clear reason when `fn` is not available, for callers that want one before starting. */
function assertRedis () {
  const found = (process.env.PATH || '').split(':').some((d) => d && fs.existsSync(path.join(d, 'redis-server')))
  if (!found) throw new InternalError('redis-server is not on PATH: the network chaos cluster runs real Redis')
}

module.exports = { startNetCluster, assertRedis, defaults, PORTS }
