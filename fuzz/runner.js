'use strict'

const fc = require('fast-check')
const { performance } = require('node:perf_hooks')
const { answerFault, isParserRejection, describeRequest } = require('./check')

/** Every option of runTarget and its default. */
const defaults = Object.freeze({
  calls: 1000, // malformed calls to send to the component, shared by its surfaces by weight
  perSurface: undefined, // or: this many calls per surface (times its weight)
  batchMax: 16, // requests sent at once per property run (1 to batchMax)
  seed: undefined, // fast-check seed; random when undefined (it is reported)
  shrink: true, // shrink a failing batch to a small counterexample
  runTimeMs: 60000, // one property run (a batch and its checks) may take this long
  log: () => {}
})

/**
 * Counters for one component (and, the same shape, per surface).
 */
function newStats () {
  return { calls: 0, status4xx: 0, status5xx: 0, statusOther: 0, timeouts: 0, transport: 0, parserRejected: 0, clientRefused: 0, badBody: 0, byStatus: {}, byCode: {}, legitOk: 0, legitFailed: 0, batches: 0 }
}

function count (stats, req, res) {
  if (res.error === 'client') {
    stats.clientRefused++
    return
  }
  stats.calls++
  if (res.error === 'timeout') stats.timeouts++
  else if (res.error) stats.transport++
  if (res.status === undefined) return
  stats.byStatus[res.status] = (stats.byStatus[res.status] || 0) + 1
  if (res.status >= 400 && res.status < 500) stats.status4xx++
  else if (res.status >= 500) stats.status5xx++
  else stats.statusOther++
  if (res.text) {
    try {
      const code = JSON.parse(res.text).error.code
      if (typeof code === 'string') stats.byCode[code] = (stats.byCode[code] || 0) + 1
    } catch {}
  }
}

/**
 * Fuzz one component: start it (`start()` resolves a target, fuzz/targets.js),
 * then for each of its surfaces (`surfacesFor(target.ctx)`, fuzz/surfaces/)
 * `fc.check(fc.asyncProperty(batch, …))`, where a batch is 1 to batchMax
 * malformed requests sent at once together with the target's legit
 * requests. The property holds when every malformed request gets a 4xx JSON
 * error, every legit one succeeds, and afterwards the component still
 * answers its health checks and its installed map is what it was. Crashes
 * (uncaught exceptions and unhandled rejections while the batch ran,
 * collected in `crashes.list` by the caller) fail it too.
 *
 * A surface whose failure left the component changed or unhealthy is not
 * allowed to spoil the next ones: the component is restarted (counted).
 * Heap (after a forced GC when `global.gc` exists) and RSS are sampled once
 * the component is up and again at the end.
 *
 * @param {() => Promise<object>} start
 * @param {(ctx) => { name, request, weight? }[]} surfacesFor
 * @param {object} options see `defaults`; plus client (FuzzClient) and crashes ({ list: Error[] })
 * @returns {Promise<object>} figures and failures
 */
async function runComponent (start, surfacesFor, options) {
  const opts = { ...defaults, ...options }
  const { client, crashes } = opts
  const t0 = performance.now()
  let target = await start()
  try {
    let baseline = await target.snapshot()
    // The state each batch starts from: the previous batch's end. Compared per
    // batch, so that shrinking keeps the batch that changed it (a later batch,
    // innocent, starts from the changed state and passes).
    const seen = { state: baseline }
    const memoryBefore = memory()
    const total = { ...newStats(), restarts: 0 }
    const failures = []
    const perSurface = []
    const surfaces = surfacesFor(target.ctx)
    const totalWeight = surfaces.reduce((w, s) => w + (s.weight ?? 1), 0)

    for (const surface of surfaces) {
      const stats = newStats()
      const weight = surface.weight ?? 1
      const budget = Math.max(1, Math.round(opts.perSurface !== undefined ? opts.perSurface * weight : opts.calls * weight / totalWeight))
      const s0 = performance.now()
      let firstFault = null
      const property = fc.asyncProperty(fc.array(surface.request, { minLength: 1, maxLength: opts.batchMax }), async (batch) => {
        const faults = await runBatch(target, seen, batch, { client, crashes, stats, total })
        if (faults.length) {
          if (firstFault === null) firstFault = faults.join('\n  ')
          throw new Error(faults.join('\n  '))
        }
      })
      let out = null
      let round = 0
      // Top up until the surface's budget of calls is reached (batches vary in size).
      while (stats.calls + stats.clientRefused < budget && (out === null || !out.failed)) {
        const numRuns = Math.max(1, Math.ceil((budget - stats.calls - stats.clientRefused) / ((1 + opts.batchMax) / 2)))
        out = await fc.check(property, {
          numRuns,
          seed: opts.seed === undefined ? undefined : opts.seed + round++,
          endOnFailure: !opts.shrink,
          timeout: opts.runTimeMs,
          markInterruptAsFailure: true
        })
      }
      const failed = Boolean(out && out.failed)
      const entry = { surface: surface.name, wallMs: Math.round(performance.now() - s0), ...stats, failed }
      if (failed) {
        const failure = {
          component: target.name,
          surface: surface.name,
          seed: out.seed,
          path: out.counterexamplePath,
          firstFault,
          shrunk: out.counterexample ? out.counterexample[0].map(describeRequest) : null,
          error: out.errorInstance ? String(out.errorInstance.message).slice(0, 4000) : String(out.error).slice(0, 4000)
        }
        failures.push(failure)
        entry.failure = failure
        opts.log(`  ${target.name} / ${surface.name}: FAILED (seed ${out.seed}, path ${out.counterexamplePath})\n    ${(firstFault || failure.error).split('\n').slice(0, 10).join('\n    ')}`)
        if (!await intact(client, target, baseline)) {
          await target.close()
          target = await start()
          baseline = await target.snapshot()
          seen.state = baseline
          total.restarts++
        }
      }
      perSurface.push(entry)
      opts.log(`  ${target.name} / ${surface.name}: ${stats.calls} calls, 4xx ${stats.status4xx}, 5xx ${stats.status5xx}, other ${stats.statusOther}, timeouts ${stats.timeouts}, transport ${stats.transport}, ${entry.wallMs} ms${failed ? '  FAILED' : ''}`)
    }
    const memoryAfter = memory()
    return { component: target.name, wallMs: Math.round(performance.now() - t0), ...total, memory: { before: memoryBefore, after: memoryAfter, gc: typeof global.gc === 'function' }, failures, surfaces: perSurface }
  } finally {
    await target.close()
  }
}

/**
 * Send one batch with the legit requests, then check health and that the
 * state is still `seen.state` (then updated). Resolves the faults found.
 */
async function runBatch (target, seen, batch, { client, crashes, stats, total }) {
  const crashesBefore = crashes ? crashes.list.length : 0
  const legit = target.legit()
  // What goes on the wire: signed, or with a spoiled signature; a replay is
  // two requests, sent one after the other.
  const groups = batch.map((req) => (target.prepare ? target.prepare(req) : [req]))
  const [answerGroups, legitFaults] = await Promise.all([
    Promise.all(groups.map(async (group) => {
      const out = []
      for (const req of group) out.push([req, await client.send(target.origins[req.origin], req)])
      return out
    })),
    Promise.all(legit.map((l) => sendLegit(client, target, l)))
  ])
  stats.batches++
  total.batches++
  const faults = []
  answerGroups.flat().forEach(([req, res]) => {
    count(stats, req, res)
    count(total, req, res)
    if (res.error === 'client') return
    if (res.status !== undefined && isParserRejection(res)) {
      stats.parserRejected++
      total.parserRejected++
      return
    }
    const fault = answerFault(req, res)
    if (fault === null) return
    if (res.status >= 400 && res.status < 500) { // a 4xx, but not our JSON error
      stats.badBody++
      total.badBody++
    }
    faults.push(`${fault}\n    request: ${describeRequest(req)}`)
  })
  for (const f of legitFaults) {
    if (f === null) {
      stats.legitOk++
      total.legitOk++
    } else {
      stats.legitFailed++
      total.legitFailed++
      faults.push(`legit request failed: ${f}`)
    }
  }
  faults.push(...await healthFaults(client, target))
  const now = await target.snapshot()
  if (now !== seen.state) faults.push(`installed state changed:\n    before: ${seen.state.slice(0, 600)}\n    after:  ${now.slice(0, 600)}`)
  seen.state = now
  if (crashes && crashes.list.length > crashesBefore) {
    for (const err of crashes.list.slice(crashesBefore)) faults.push(`crash: ${err && err.stack ? err.stack.split('\n').slice(0, 6).join('\n      ') : String(err)}`)
  }
  return faults
}

async function healthFaults (client, target) {
  const faults = []
  for (const h of target.health) {
    const res = await client.send(target.origins[h.origin], { method: 'GET', path: h.path })
    if (res.status !== 200) faults.push(`health ${h.origin} ${h.path}: ${res.status ?? res.error} ${res.text ? res.text.slice(0, 200) : res.code}`)
  }
  return faults
}

/** Healthy, with the state it started with. */
async function intact (client, target, baseline) {
  return (await healthFaults(client, target)).length === 0 && (await target.snapshot()) === baseline
}

/** Heap after a forced GC (when exposed) and RSS, in bytes. */
function memory () {
  if (typeof global.gc === 'function') {
    global.gc()
    global.gc()
  }
  const m = process.memoryUsage()
  return { heapUsed: m.heapUsed, rss: m.rss }
}

/** Send a legit request (and its follow-up); resolves null or what went wrong. */
async function sendLegit (client, target, l) {
  const req = { origin: l.origin, ...l.req }
  const res = await client.send(target.origins[l.origin], target.prepare ? target.prepare(req)[0] : req)
  if (res.error) return `${describeRequest({ origin: l.origin, ...l.req })}: ${res.error} ${res.code}`
  const fault = l.check(res)
  if (fault) return `${describeRequest({ origin: l.origin, ...l.req })}: ${fault}`
  return l.then ? sendLegit(client, target, l.then) : null
}

module.exports = { runComponent, defaults, newStats, memory }
