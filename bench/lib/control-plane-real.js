'use strict'

/**
 * bench/control-plane.js's real-member row: `count` appserver-lib members
 * (createAppServer, a trivial Express app) in `procs` processes start at once
 * against a fresh controller; how long until every one is registered and
 * holds what it must (the controller's current generation, or the last that
 * changed its slices, which its live lease proves), and lapses (members the
 * controller dropped while they ran; 0 expected).
 */
const path = require('node:path')
const { setTimeout: delay } = require('node:timers/promises')
const { forkChild } = require('./child')
const { startController, pollInterval } = require('./control-plane-cluster')
const { cpuShare } = require('./control-plane-window')

const CHILD = path.join(__dirname, 'control-plane-app-child.js')

async function runRealMembers ({ count, procs, clusterToken, controllerOptions, deadlineMs, steadyMs, root, log = () => {} }) {
  const controller = await startController({ ...controllerOptions, clusterToken }, root)
  const children = []
  const out = { count, procs }
  try {
    for (let i = 0; i < procs; i++) children.push(forkChild(CHILD, { callTimeoutMs: 30000 }))
    const ids = Array.from({ length: count }, (_, i) => `app${String(i).padStart(4, '0')}`)
    const per = Math.ceil(count / procs)
    log(`real: ${count} appserver-lib members join at once over ${procs} processes`)
    const since = Date.now()
    await Promise.all(children.map((c, i) => c.call('start', { controllerUrl: controller.url, clusterToken, root, ids: ids.slice(i * per, (i + 1) * per) })))
    let last = null
    for (;;) {
      try {
        const s = (await controller.stats()).stats
        const held = await Promise.all(children.map((c) => c.call('held', { generation: s.generation }, 10000)))
        const holding = held.reduce((n, h) => n + h.holding, 0)
        const registered = held.reduce((n, h) => n + h.registered, 0)
        last = { generation: s.generation, members: s.members, owning: s.owning, lagging: s.lagging, handoffInProgress: s.handoffInProgress, registered, holding }
        if (s.members === count && (s.owning === null || s.owning === count) && !s.handoffInProgress && (s.lagging === null || s.lagging === 0) && s.generation > 0 && registered === count && holding === count) {
          out.converged = true
          out.ms = Date.now() - since
          break
        }
      } catch (err) {
        last = { ...last, error: err.message }
      }
      if (Date.now() - since >= deadlineMs) {
        out.converged = false
        out.ms = Date.now() - since
        break
      }
      await delay(pollInterval(count))
    }
    out.last = last
    log(`real: ${out.converged ? `all registered and acknowledged in ${out.ms} ms` : `NOT converged after ${out.ms} ms`}`)
    if (out.converged && steadyMs > 0) {
      const c0 = await controller.stats(true)
      await delay(steadyMs)
      const c1 = await controller.stats(true)
      out.steady = { ms: steadyMs, controllerCpuPct: cpuShare(c0, c1), controllerEventLoopMs: c1.eventLoop }
    }
    const stats = await Promise.all(children.map((c) => c.call('stats', {}, 10000)))
    const s = (await controller.stats()).stats
    out.lapses = {
      leaseExpiries: s.leaseExpiries ?? null,
      evictions: s.evictions ?? null,
      notFound: stats.reduce((n, x) => n + x.notFound, 0),
      renewalFailures: stats.reduce((n, x) => n + x.renewalFailures, 0)
    }
    out.startFailures = stats.reduce((n, x) => n + x.failed, 0)
    out.firstError = stats.map((x) => x.firstError).find(Boolean) || null
    return out
  } finally {
    await controller.close().catch(() => {})
    await Promise.all(children.map((c) => c.shutdown(15000, 3000).catch(() => {})))
  }
}

module.exports = { runRealMembers }
