'use strict'

/**
 * One app server in a process of its own (bench/lib/app-process.js forks it):
 * the app, wrapped in the capacity model when `capacity.mode` is 'model',
 * hosted by appserver-lib, registered with the controller when one is given.
 * Pushes, lease renewals, load reports and requests therefore cross real
 * sockets and this process's own scheduler.
 *
 * argv[2] is the app's name, so the parent can fork several of these at once
 * and the slow part (loading the app's modules) runs in parallel; `start`
 * then only listens and registers, in the order the parent chooses.
 */
const pino = require('pino')
const { Registry } = require('prom-client')
const { loadApp, startApp } = require('../../apps')
const { withCapacity, MODELS } = require('./capacity')
const { serveChild } = require('./child')

const appName = process.argv[2]
const appModule = loadApp(appName)

let started = null
let model = null
let closing = null

/** The app module with the capacity model around each instance it creates. */
function modelled (capacity) {
  return {
    async create (options) {
      const instance = await appModule.create({ ...options, ...MODELS[appName].appOptions })
      model = withCapacity(instance.app, { app: appName, capacity })
      return { ...instance, app: model.app }
    }
  }
}

async function counter (registry, name) {
  const m = registry.getSingleMetric(name)
  if (!m) return null
  return (await m.get()).values.reduce((a, v) => a + v.value, 0)
}

async function close () {
  if (!started) return
  // Responses held by the model (their clients may have timed out) would hold close() open.
  if (model) model.close()
  await started.close()
  started = null
}

serveChild({
  async start ({ config }) {
    const { id, appOptions = {}, capacity, controllerUrl, clusterToken, enforceOwnership, logLevel = 'error' } = config
    const logger = pino({ level: logLevel, base: { pid: process.pid, serverId: id } }, pino.destination({ fd: 2, sync: true }))
    const registry = new Registry()
    const useModel = Boolean(capacity && capacity.mode === 'model')
    started = await startApp(useModel ? modelled(capacity) : appModule, {
      id,
      appOptions,
      registry,
      logger,
      controllerUrl,
      clusterToken, // undefined unless the run configured one
      host: '127.0.0.1',
      advertiseHost: '127.0.0.1',
      port: 0,
      controlPort: 0,
      ...(enforceOwnership === undefined ? {} : { enforceOwnership })
    })
    started.registry = registry
    return { id, url: started.url, controlUrl: started.controlUrl, pid: process.pid, modelled: useModel }
  },
  /** Cache counters (kv-cache; null otherwise), the modelled server's figures and the guard's generation. */
  async stats () {
    if (!started) return null
    const hits = await counter(started.registry, 'chopper_kv_cache_hits_total')
    const misses = await counter(started.registry, 'chopper_kv_cache_misses_total')
    return {
      pid: process.pid,
      generation: started.server.guard.generation,
      cache: hits === null ? null : { hits, misses: misses || 0 },
      guard: { ...started.server.guard.stats },
      kv: hits === null ? null : await kvCounters(started.registry),
      capacity: model ? model.stats() : null
    }
  },
  /** Release every held response now (end of run), so closing does not wait for them. */
  flush () {
    if (model) model.close()
    return true
  },
  async close () {
    closing = closing || close()
    await closing
    return true
  }
})

/**
 * kv-cache's invalidations by reason, fenced and not-primary writes, store
 * errors, held reads: for the report. Of the replication timings
 * (chopper_kv_write_phase_seconds by phase, chopper_kv_held_read_wait_seconds)
 * the count, the total in ms and how many took over 10 and over 50 ms, all of
 * which add up over servers: `write_phase_count{"phase":"hold"}`,
 * `write_phase_ms{...}`, `write_phase_over_10ms{...}`, `..._over_50ms{...}`.
 */
async function kvCounters (registry) {
  const out = {}
  const label = (labels) => Object.keys(labels).length ? JSON.stringify(labels) : ''
  for (const name of ['chopper_kv_cache_invalidations_total', 'chopper_kv_fenced_writes_total', 'chopper_kv_not_primary_total', 'chopper_kv_store_errors_total', 'chopper_kv_held_reads_total', 'chopper_kv_writer_asks_total', 'chopper_kv_shared_reads_total', 'chopper_kv_batched_writes_total', 'chopper_kv_cache_hits_total', 'chopper_kv_cache_misses_total']) {
    const m = registry.getSingleMetric(name)
    if (!m) continue
    for (const v of (await m.get()).values) out[`${name.slice('chopper_kv_'.length, -'_total'.length)}${label(v.labels)}`] = v.value
  }
  for (const name of ['chopper_kv_write_phase_seconds', 'chopper_kv_held_read_wait_seconds']) {
    const m = registry.getSingleMetric(name)
    if (!m) continue
    const base = name.slice('chopper_kv_'.length, -'_seconds'.length)
    const series = new Map() // labels (le aside) -> { count, sum, le10, le50 }
    for (const { metricName, labels: { le, ...labels }, value } of (await m.get()).values) {
      const k = label(labels)
      const h = series.get(k) || { count: 0, sum: 0, le10: 0, le50: 0 }
      series.set(k, h)
      if (metricName.endsWith('_count')) h.count = value
      else if (metricName.endsWith('_sum')) h.sum = value
      else if (le === 0.01) h.le10 = value
      else if (le === 0.05) h.le50 = value
    }
    for (const [k, h] of series) {
      out[`${base}_count${k}`] = h.count
      out[`${base}_ms${k}`] = Math.round(h.sum * 1e6) / 1e3
      out[`${base}_over_10ms${k}`] = h.count - h.le10
      out[`${base}_over_50ms${k}`] = h.count - h.le50
    }
  }
  return out
}
