'use strict'

const { pollUntil } = require('../../core/poll')
const { InternalError } = require('../../core/errors')
const { getText, postJson, putJson } = require('./http')
const { keyChurn, withoutMoving } = require('../../core/assignment')
const { promValue, quantile } = require('./measure')
const { roundWaitMs } = require('../../controller/load-collector')

/**
 * The faults, each run by index.js inside a phase with steady load before and
 * after. A fault gets `ctx` ({ cluster, opts, rng, now, steady }) and `phase`
 * ({ keys, event(), note(), details }); `phase.event()` stamps the fault
 * time, takes the keys the victim owns at that moment and probes them so the
 * time until they are served again is measured from the fault.
 */

/** The server owning the most of `keys` under the current map. */
function busiest (cluster, keys) {
  const counts = new Map(cluster.ids.map((id) => [id, 0]))
  for (const owner of cluster.ownersOf(keys).values()) if (counts.has(owner)) counts.set(owner, counts.get(owner) + 1)
  return [...counts].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0][0]
}

const ms = (x) => Math.round(x)

async function controllerMetrics (cluster) {
  return getText(`${cluster.controllerUrl}/metrics`, { timeoutMs: 5000 })
}

/** Start a new process for `id` and wait until the controller lists it; returns ms taken. */
async function restart (ctx, id) {
  const t = ctx.now()
  const proc = await ctx.cluster.startServer(id)
  await ctx.cluster.waitRegistered(id, { url: proc.url, timeoutMs: 30000 })
  return ms(ctx.now() - t)
}

/** 1. SIGKILL one app server; restart it (same id) once its keys are served elsewhere. */
async function sigkill (ctx, phase) {
  const { cluster } = ctx
  const victim = busiest(cluster, phase.keys.keys)
  const proc = cluster.member(victim).proc
  const ev = await phase.event({ what: `SIGKILL ${victim}`, victim }, () => proc.signal('SIGKILL'))
  await proc.waitExit(5000)
  const dropped = await pollUntil(() => !cluster.controller.status().servers[victim] && ctx.now(), { timeoutMs: 30000, intervalMs: 10, what: `the controller to drop ${victim}` })
  const probes = await ev.probes
  const servedAt = ctx.now()
  if (probes.unserved.length) phase.note(`${probes.unserved.length} of ${ev.keys.length} keys never served again before the restart`)
  const restartMs = await restart(ctx, victim)
  phase.details.victim = victim
  phase.details.droppedAfterMs = ms(dropped - ev.at)
  phase.details.restartedAfterMs = ms(servedAt - ev.at)
  phase.details.restartMs = restartMs
  phase.note(`killed ${victim} (${ev.keys.length} keys); controller dropped it after ${phase.details.droppedAfterMs} ms; new process registered in ${restartMs} ms`)
}

/** 2. Rolling restart: SIGTERM (drain) each server in turn, start a new one with the same id, next. */
async function rollingRestart (ctx, phase) {
  const { cluster } = ctx
  const steps = []
  for (const id of cluster.ids) {
    const proc = cluster.member(id).proc
    const ev = await phase.event({ what: `SIGTERM ${id}`, victim: id }, () => proc.signal('SIGTERM'))
    const exit = await proc.waitExit(30000)
    const drainMs = ms(ctx.now() - ev.at)
    const restartMs = await restart(ctx, id)
    steps.push({ id, keys: ev.keys.length, drainMs, exitCode: exit.code, exitSignal: exit.signal, restartMs })
    if (exit.code !== 0) phase.note(`${id} exited with ${exit.code ?? exit.signal} after SIGTERM`)
  }
  phase.details.steps = steps
  phase.note(`drain+exit ${steps.map((s) => `${s.id} ${s.drainMs} ms`).join(', ')}`)
}

/**
 * 3. Hang one server's control port (accepts, never answers); its data port
 * and lease renewals keep working. Wait for the controller to evict it after
 * failed load collections, hold the hang a little longer, then restore it.
 * A server on a lease stream is not called on that port at all:
 * hungButStreaming checks that the hang costs it nothing instead.
 */
async function hangControl (ctx, phase) {
  const { cluster, opts } = ctx
  const victim = busiest(cluster, phase.keys.keys)
  const proc = cluster.member(victim).proc
  const forVictim = (labels) => labels.includes(`server="${victim}"`)
  const m0 = await controllerMetrics(cluster)
  const evictions0 = promValue(m0, 'chopper_controller_evictions_total')
  const failures0 = promValue(m0, 'chopper_controller_load_collection_failures_total', forVictim)
  const lapses0 = promValue(m0, 'chopper_controller_lease_expiries_total')
  const ev = await phase.event({ what: `hang control port of ${victim}`, victim }, () => proc.call('hang-control'))
  if (cluster.controller.status().servers[victim].leaseStream) return hungButStreaming(ctx, phase, { victim, proc, ev, evictions0, lapses0 })
  let firstFailureAt = null
  let absentAt = null
  const evictedAt = await pollUntil(async () => {
    const text = await controllerMetrics(cluster)
    const t = ctx.now()
    if (firstFailureAt === null && promValue(text, 'chopper_controller_load_collection_failures_total', forVictim) > failures0) firstFailureAt = t
    if (absentAt === null && !cluster.controller.status().servers[victim]) absentAt = t
    return promValue(text, 'chopper_controller_evictions_total') > evictions0 ? t : null
  }, { timeoutMs: 30000, intervalMs: 25, what: `the controller to evict ${victim}` })
  // Its slices move away after the eviction: measure that too, from the victim's keys at the hang.
  const evEvict = await phase.event({ what: `${victim} evicted`, victim, keys: ev.keys, at: evictedAt })
  await ctx.steady(opts.hangHoldMs)
  const m1 = await controllerMetrics(cluster)
  const restoredAt = ctx.now()
  const restored = await proc.call('restore-control')
  const recovered = await pollUntil(() => {
    const s = cluster.controller.status().servers[victim]
    return s && s.collectionFailures === 0 && !s.loadUnknown && ctx.now()
  }, { timeoutMs: 30000, intervalMs: 20, what: `${victim} to answer load collection again` })
  await Promise.all([ev.probes, evEvict.probes])
  const m2 = await controllerMetrics(cluster)
  const evictions = promValue(m1, 'chopper_controller_evictions_total') - evictions0
  const st = cluster.controller.status()
  phase.details.victim = victim
  phase.details.firstCollectionFailureAfterMs = firstFailureAt === null ? null : ms(firstFailureAt - ev.at)
  phase.details.evictedAfterMs = ms(evictedAt - ev.at)
  phase.details.absentFromStatusAfterMs = absentAt === null ? null : ms(absentAt - ev.at)
  phase.details.evictionsWhileHung = evictions
  phase.details.leaseLapsesWhileHung = promValue(m1, 'chopper_controller_lease_expiries_total') - lapses0
  phase.details.evictionsUntilCollectedAgain = promValue(m2, 'chopper_controller_evictions_total') - evictions0
  phase.details.hungMs = ms(restoredAt - ev.at)
  phase.details.hungRequestsCut = restored.cut
  phase.details.collectingAgainAfterRestoreMs = ms(recovered - restoredAt)
  phase.details.settings = { periodMs: st.periodMs, evictAfterFailures: opts.controllerDefaults.evictAfterFailures, collectTimeoutMs: opts.controllerDefaults.requestTimeoutMs, collectWaitMs: Math.min(opts.controllerDefaults.requestTimeoutMs, roundWaitMs(st.periodMs)) }
  phase.note(`${victim} evicted ${phase.details.evictedAfterMs} ms after the hang (${evictions} eviction(s) in ${phase.details.hungMs} ms hung, ${phase.details.evictionsUntilCollectedAgain} until collected again); restored, collected again after ${phase.details.collectingAgainAfterRestoreMs} ms`)
}

/**
 * 3, for a member on a lease stream: the controller collects its load and
 * pushes its maps over the stream, so its control port is not used and its
 * hang must cost nothing: hold it, check that no eviction or lapse came, then
 * restore it.
 */
async function hungButStreaming (ctx, phase, { victim, proc, ev, evictions0, lapses0 }) {
  const { cluster, opts } = ctx
  await ctx.steady(opts.hangHoldMs)
  const m1 = await controllerMetrics(cluster)
  const restoredAt = ctx.now()
  const restored = await proc.call('restore-control')
  await ev.probes
  const s = cluster.controller.status().servers[victim]
  phase.details.victim = victim
  phase.details.leaseStream = true
  phase.details.evictionsWhileHung = promValue(m1, 'chopper_controller_evictions_total') - evictions0
  phase.details.leaseLapsesWhileHung = promValue(m1, 'chopper_controller_lease_expiries_total') - lapses0
  phase.details.collectionFailuresAfter = s ? s.collectionFailures : null
  phase.details.hungMs = ms(restoredAt - ev.at)
  phase.details.hungRequestsCut = restored.cut
  if (phase.details.evictionsWhileHung > 0 || phase.details.leaseLapsesWhileHung > 0 || !s) throw new Error(`${victim}, on a lease stream, was dropped while only its control port hung`)
  phase.note(`${victim} renews, reports load and takes pushes over its lease stream: ${phase.details.hungMs} ms of a hung control port cost it nothing (0 evictions, 0 lapses, ${s.collectionFailures} failed collections)`)
}

/**
 * 4. Slice moves (POST /v1/move, wait: true) of random keys to random servers,
 * one after another under the load, restarting one server's redis-server
 * every `redisEvery` moves (in the background; the moves go on).
 */
async function movesWithRedisRestarts (ctx, phase) {
  const { cluster, opts, rng } = ctx
  const ids = cluster.ids
  const keys = phase.keys.keys
  const latencies = []
  const errors = {}
  let changed = 0
  let unchanged = 0
  let unsettled = 0
  let restarts = 0
  let restarting = Promise.resolve()
  const restartLog = []
  const maxAttempts = opts.moves * 4
  const deadline = ctx.now() + opts.movesTimeoutMs
  let attempts = 0
  for (; changed < opts.moves && attempts < maxAttempts; attempts++) {
    if ((ctx.signal && ctx.signal.aborted) || ctx.now() > deadline) break
    const key = keys[rng.int(keys.length)]
    const to = ids[rng.int(ids.length)]
    const t = ctx.now()
    let res
    try {
      res = await postJson(`${cluster.controllerUrl}/v1/move`, { key, to, wait: true }, { timeoutMs: 20000, token: cluster.clusterToken })
    } catch (err) {
      errors[err.code || err.name] = (errors[err.code || err.name] || 0) + 1
      continue
    }
    latencies.push(ctx.now() - t)
    if (res.status !== 200) {
      const code = (res.body && res.body.error && res.body.error.code) || `HTTP_${res.status}`
      errors[code] = (errors[code] || 0) + 1
      continue
    }
    if (!res.body.changed) {
      unchanged++
      continue
    }
    changed++
    if (!res.body.settled) unsettled++
    if (changed % opts.redisEvery === 0) {
      const id = ids[restarts % ids.length]
      restarts++
      // One restart at a time; the moves do not wait for it.
      restarting = restarting.then(async () => {
        const r0 = ctx.now()
        const ev = await phase.event({ what: `redis restart ${id}`, victim: id }, () => null)
        await cluster.restartRedis(id)
        restartLog.push({ id, afterMoves: changed, restartMs: ms(ctx.now() - r0), keys: ev.keys.length })
      })
    }
  }
  await restarting
  latencies.sort((a, b) => a - b)
  phase.details.moves = {
    requested: attempts,
    changed,
    unchanged,
    unsettled,
    errors,
    latencyMs: { p50: ms(quantile(latencies, 0.5) ?? 0), p99: ms(quantile(latencies, 0.99) ?? 0), max: ms(latencies.at(-1) ?? 0) }
  }
  phase.details.redisRestarts = restartLog
  if (changed < opts.moves) phase.note(`only ${changed} of ${opts.moves} moves changed an owner (${attempts} requests, ${Math.round(opts.movesTimeoutMs / 1000)} s limit)`)
  phase.note(`${changed} moves (p50 ${phase.details.moves.latencyMs.p50} ms, max ${phase.details.moves.latencyMs.max} ms${unsettled ? `, ${unsettled} not settled` : ''}${Object.keys(errors).length ? `, errors ${JSON.stringify(errors)}` : ''}); ${restartLog.length} redis restarts`)
  if (restartLog.length !== restarts) throw new InternalError(`${restarts - restartLog.length} redis restarts did not complete`)
}

/**
 * 5. Kill the leading controller (docs/controller-ha.md) as SIGKILL would: no
 * lease released. The standby must lead within 5 s, move no key, and every
 * member must refuse the dead leader's epoch; then the killed one comes back
 * as a standby. The data plane never needs the controller: the phase's
 * requests show whether anything failed meanwhile.
 */
async function leaderKill (ctx, phase) {
  const { cluster } = ctx
  const before = cluster.controller.published
  let killed
  const ev = await phase.event({ what: 'kill the leader controller', keys: [] }, async () => { killed = await cluster.killLeader() })
  const led = await pollUntil(() => {
    const c = cluster.controllers().find((x) => x.leading)
    return c ? ctx.now() : null
  }, { timeoutMs: 30000, intervalMs: 10, what: 'a standby to lead' })
  await cluster.waitSettled({ timeoutMs: 30000 })
  const settled = ctx.now()
  const after = cluster.controller.published
  const churn = keyChurn(withoutMoving(before), withoutMoving(after))
  // Whatever the dead leader could still push (its epoch, any generation) is refused everywhere.
  const forged = { ...killed.published, generation: after.generation + 1 }
  const answers = await Promise.all(cluster.frontends.map((f) => putJson(`${f.controlUrl}/v1/assignment`, forged, { token: cluster.clusterToken })))
  const refused = answers.filter((a) => a.status === 409 && a.body && a.body.error.code === 'CHOPPER_ERR_STALE_EPOCH').length
  await cluster.restartController(killed.index)
  const standbyAgain = !cluster.controllers()[killed.index].leading
  phase.details.takeoverMs = ms(led - ev.at)
  phase.details.settledMs = ms(settled - ev.at)
  phase.details.churn = churn
  phase.details.epochs = { before: before.epoch, after: after.epoch }
  phase.details.deposedPushes = { sent: answers.length, refused }
  phase.details.restartedAsStandby = standbyAgain
  phase.note(`controller-${killed.index + 1} killed; the standby led after ${phase.details.takeoverMs} ms, members held its map after ${phase.details.settledMs} ms; churn ${churn}; ${refused} of ${answers.length} pushes under the old epoch refused; the killed one came back as a standby`)
  if (churn > 0) throw new InternalError(`the failover moved ${churn} keys`)
  if (refused !== answers.length) throw new InternalError(`${answers.length - refused} pushes under the deposed leader's epoch were accepted`)
  if (!standbyAgain) throw new InternalError('the restarted controller took the lead from a live leader')
}

/** Every fault, in run order. */
const FAULTS = Object.freeze([
  { name: 'sigkill', title: 'SIGKILL + restart', run: sigkill },
  { name: 'rolling-restart', title: 'rolling restart (SIGTERM)', run: rollingRestart },
  { name: 'hang-control', title: 'hung control port', run: hangControl },
  { name: 'moves', title: 'moves + Redis restarts', run: movesWithRedisRestarts },
  { name: 'leader-kill', title: 'leader controller killed', run: leaderKill }
])

module.exports = { FAULTS, busiest }
