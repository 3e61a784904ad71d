'use strict'

/**
 * The real controller in a process of its own, for bench/control-plane.js:
 * its CPU and event loop are then its own, not the fake members'. Messages:
 *
 *  - start { options, root? } createController(options) (plain JSON; the
 *    logger is made here: pino at options.logLevel, default silent) and start
 *    it; root: the checkout whose controller/ to load (default this one), to
 *    measure another commit's controller with the same bench
 *  - stats { reset? } `{ cpuUs, wallMs, rssMB, eventLoop: { p50, p99, max }, stats, statsSource }`;
 *    reset starts a new event-loop window (CPU is cumulative: subtract readings)
 *  - close
 *
 * `stats` is the controller's own `stats()` when it has one (cheap, O(1)-ish:
 * generation, members, frontends, owning, lagging, handoffInProgress,
 * leaseExpiries, evictions, pushes { messages, bytes, full, diffs, failures },
 * renewals, registrations). Without it, the same names are read from
 * `status()` (in this process: what GET /v1/status would serialize) and the
 * Prometheus registry, and what they cannot tell is null.
 */
const path = require('node:path')
const pino = require('pino')
const { silent } = require('../../core/logger')
const { serveChild } = require('./child')
const { ProcessWindow } = require('./control-plane-window')

const window = new ProcessWindow()
let controller = null

async function counter (registry, name) {
  const m = registry && registry.getSingleMetric(name)
  if (!m) return null
  return (await m.get()).values.reduce((a, v) => a + v.value, 0)
}

/** The stats() names, from status() and the metrics (today's controller). */
async function fromStatus (c) {
  const s = c.status()
  const servers = Object.values(s.servers || {})
  const pushes = s.pushes || {}
  return {
    generation: s.generation,
    members: servers.length,
    frontends: Object.keys(s.frontends || {}).length,
    owning: servers.filter((x) => x.slices > 0).length,
    lagging: Array.isArray(pushes.lagging) ? pushes.lagging.length : null,
    handoffInProgress: Boolean(s.handoff && s.handoff.inProgress),
    leaseExpiries: await counter(c.registry, 'chopper_controller_lease_expiries_total'),
    evictions: await counter(c.registry, 'chopper_controller_evictions_total'),
    pushes: { messages: pushes.pushes ?? null, bytes: null, full: null, diffs: null, failures: pushes.failures ?? null },
    renewals: null,
    registrations: null
  }
}

serveChild({
  async start ({ options, root = path.join(__dirname, '..', '..') }) {
    const { createController } = require(path.join(root, 'controller', 'controller.js'))
    const { logLevel = 'silent', ...rest } = options || {}
    const logger = logLevel === 'silent' ? silent : pino({ level: logLevel, base: { pid: process.pid } }, pino.destination({ fd: 2, sync: false }))
    controller = createController({ ...rest, logger })
    const { url } = await controller.start()
    window.reset()
    return { url, pid: process.pid }
  },

  async stats ({ reset = false } = {}) {
    if (!controller) throw new Error('stats before start')
    const own = typeof controller.stats === 'function'
    const stats = own ? await controller.stats() : await fromStatus(controller)
    const out = { ...window.read(), stats, statsSource: own ? 'stats' : 'status' }
    if (reset) window.reset()
    return out
  },

  async close () {
    if (controller) await controller.close()
    controller = null
    window.close()
    return { closed: true }
  }
})
