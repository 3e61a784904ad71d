'use strict'

const { pollUntil } = require('../../core/poll')
const { InternalError } = require('../../core/errors')
const { postJson } = require('./http')
const { busiest } = require('./faults')

/**
 * Network faults (docs/network-faults.md), run by index.js as phases on the
 * cluster of bench/chaos/net-cluster.js: each component on a test host of
 * its own, faults as nftables rules (bench/chaos/net-rules.js), a delay
 * proxy (bench/chaos/delay-proxy.js) and an injected clock
 * (bench/chaos/skewed-clock.js). Each is applied under load, held, then
 * healed; `phase.details` records when the system noticed and when it
 * recovered, in ms from the fault.
 */

const ms = (x) => Math.round(x)

/** Apply `faults` (functions returning rule handles) and return one heal for all of them. */
async function applyAll (faults) {
  const handles = []
  for (const f of faults) handles.push(await f())
  return async () => { for (const h of handles) await h.heal() }
}

/**
 * Poll until the controllers' status says `id` is no longer a member, or
 * owns nothing (lease lapsed, slices moved); its time, or null when that did
 * not happen within `timeoutMs` (the member kept its lease).
 */
async function waitDropped (ctx, id, timeoutMs = 20000) {
  const gone = () => {
    const s = ctx.cluster.controller.status().servers[id]
    return !s || s.slices === 0
  }
  try {
    return await pollUntil(() => gone() && ctx.now(), { timeoutMs, intervalMs: 20, what: `the controller to drop ${id}` })
  } catch (err) {
    if (err.code === 'CHOPPER_ERR_TIMEOUT') return null
    throw err
  }
}

/** A member partitioned from the controllers by `cut` (both ways) or `block` (member -> controllers only). */
function memberPartition (kind) {
  return async function run (ctx, phase) {
    const { cluster, opts } = ctx
    const victim = busiest(cluster, phase.keys.keys)
    let heal
    const ev = await phase.event({ what: `${kind} ${victim} from the controllers`, victim }, async () => {
      heal = await applyAll(cluster.controllerHosts.map((c) => () => (kind === 'cut' ? cluster.rules.cut(victim, c) : cluster.rules.block(victim, c))))
    })
    try {
      const dropped = await waitDropped(ctx, victim)
      if (dropped !== null) await phase.event({ what: `${victim} dropped`, victim, keys: ev.keys, at: dropped })
      phase.details.droppedAfterMs = dropped === null ? null : ms(dropped - ev.at)
      await ctx.steady(opts.netHoldMs)
    } finally {
      await heal()
    }
    const healed = ctx.now()
    await cluster.waitRegistered(victim, { timeoutMs: 30000 })
    phase.details.victim = victim
    phase.details.heldMs = ms(healed - ev.at)
    phase.details.registeredAfterHealMs = ms(ctx.now() - healed)
    phase.details.bound = leaseBound(ctx)
    const dropped = phase.details.droppedAfterMs === null ? 'never dropped (it kept its lease)' : `dropped after ${phase.details.droppedAfterMs} ms`
    phase.note(`${victim} ${kind === 'cut' ? 'cut from' : 'could not reach'} the controllers; ${dropped} (lease ${phase.details.bound.leaseMs} + margin ${phase.details.bound.leaseMarginMs} ms), healed after ${phase.details.heldMs} ms, registered again ${phase.details.registeredAfterHealMs} ms later`)
  }
}

function leaseBound (ctx) {
  const s = ctx.cluster.controller.status()
  return { leaseMs: s.leaseMs, leaseMarginMs: ctx.opts.controllerDefaults.leaseMarginMs, periodMs: s.periodMs }
}

/**
 * A front end cut from every controller while slices move: it hears of no
 * new map until the cut heals, and meets the moves as 421s from the app servers.
 */
async function frontendCut (ctx, phase) {
  const { cluster, opts, rng } = ctx
  const fe = cluster.frontendHosts[0]
  let heal
  await phase.event({ what: `cut ${fe} from the controllers`, keys: [] }, async () => {
    heal = await applyAll(cluster.controllerHosts.map((c) => () => cluster.rules.cut(fe, c)))
  })
  const moves = { changed: 0, errors: {} }
  try {
    const until = ctx.now() + opts.netHoldMs
    while (ctx.now() < until && moves.changed < opts.netMoves) {
      const key = phase.keys.keys[rng.int(phase.keys.keys.length)]
      const to = cluster.ids[rng.int(cluster.ids.length)]
      try {
        const res = await postJson(`${cluster.controllerUrl}/v1/move`, { key, to, wait: true }, { timeoutMs: 10000, token: cluster.clusterToken })
        if (res.status === 200 && res.body.changed) moves.changed++
        else if (res.status !== 200) moves.errors[res.status] = (moves.errors[res.status] || 0) + 1
      } catch (err) {
        moves.errors[err.code || err.name] = (moves.errors[err.code || err.name] || 0) + 1
      }
    }
    await ctx.steady(Math.max(0, until - ctx.now()))
  } finally {
    await heal()
  }
  const healed = ctx.now()
  await cluster.waitSettled({ timeoutMs: 30000 })
  phase.details.frontend = fe
  phase.details.moves = moves
  phase.details.caughtUpAfterHealMs = ms(ctx.now() - healed)
  phase.note(`${fe} cut from the controllers for ${opts.netHoldMs} ms while ${moves.changed} slices moved; it held the current map ${phase.details.caughtUpAfterHealMs} ms after the heal`)
}

/** The leader cut from the state store (the DynamoDB emulator); members and front ends still reach it. */
async function leaderStoreCut (ctx, phase) {
  const { cluster, opts } = ctx
  const leader = cluster.leaderHost
  const epoch = cluster.controller.status().epoch
  let heal
  const ev = await phase.event({ what: `cut leader ${leader} from the store`, keys: [] }, async () => {
    heal = await applyAll([() => cluster.rules.cut(leader, 'ddb')])
  })
  let led
  try {
    led = await pollUntil(() => cluster.leaderHost !== leader && cluster.controller.status().epoch > epoch && ctx.now(), { timeoutMs: 30000, intervalMs: 20, what: 'the standby to lead' })
    await ctx.steady(opts.netHoldMs)
  } finally {
    await heal()
  }
  const healed = ctx.now()
  await cluster.waitSettled({ timeoutMs: 30000 })
  const old = cluster.controllers().find((c) => c.host === leader)
  phase.details.leader = leader
  phase.details.takeoverMs = ms(led - ev.at)
  phase.details.newLeader = cluster.leaderHost
  phase.details.epochs = { before: epoch, after: cluster.controller.status().epoch }
  phase.details.oldLeaderRole = old && old.status ? old.status.role : 'unreachable'
  phase.details.settledAfterHealMs = ms(ctx.now() - healed)
  phase.details.electionLeaseMs = opts.controllerDefaults.electionLeaseMs
  phase.note(`${leader} cut from the store: ${phase.details.newLeader} led after ${phase.details.takeoverMs} ms (election lease ${phase.details.electionLeaseMs} ms); the old leader is ${phase.details.oldLeaderRole} after the heal`)
  if (phase.details.oldLeaderRole === 'leader') throw new InternalError(`${leader} still leads beside ${phase.details.newLeader}`)
}

/**
 * Delay (mean ± jitter) and loss on the control plane: every new connection
 * from a front end or an app server to a controller's port goes through a
 * delay proxy on the `proxy` host, and packets between the controllers and
 * everyone else (the proxy included) drop at random.
 */
async function controlDelayLoss (ctx, phase) {
  const { cluster, opts } = ctx
  let proxies = null
  let heal = async () => {}
  await phase.event({ what: `${opts.netDelayMs} ± ${opts.netJitterMs} ms delay, ${opts.netLossPct} % loss on the control plane`, keys: [] }, async () => {
    proxies = await cluster.startDelayProxies({ delayMs: opts.netDelayMs, jitterMs: opts.netJitterMs, seed: opts.seed })
    const others = [...cluster.frontendHosts, ...cluster.ids]
    heal = await applyAll([
      ...others.map((h) => () => cluster.rules.redirect(h, proxies.targets)),
      ...cluster.controllerHosts.map((c) => () => cluster.rules.loss(c, opts.netLossPct, [...others, 'proxy']))
    ])
  })
  try {
    await ctx.steady(opts.netDelayHoldMs)
  } finally {
    await heal()
  }
  const healed = ctx.now()
  const stats = proxies ? await proxies.close() : []
  await cluster.waitSettled({ timeoutMs: 30000 })
  phase.details.proxies = stats
  phase.details.settledAfterHealMs = ms(ctx.now() - healed)
  phase.note(`${ms(opts.netDelayHoldMs / 1000)} s of ${opts.netDelayMs} ± ${opts.netJitterMs} ms delay and ${opts.netLossPct} % loss; ${stats.reduce((n, s) => n + (s.connections || 0), 0)} control connections through the proxies (each chunk late by ${Math.max(0, ...stats.map((s) => s.meanLateMs || 0))} ms on average beyond its delay); settled ${phase.details.settledAfterHealMs} ms after the heal`)
}

/** An app server whose clock runs `rate` times real time, or steps forward by a lease. */
function clockFault (kind) {
  return async function run (ctx, phase) {
    const { cluster, opts } = ctx
    const victim = busiest(cluster, phase.keys.keys)
    const leaseMs = cluster.controller.status().leaseMs
    const spec = kind === 'fast' ? { rate: 1 + opts.netClockFastPct / 100 } : { stepMs: leaseMs }
    await phase.event({ what: `${victim} clock ${kind === 'fast' ? `${opts.netClockFastPct} % fast` : `+${leaseMs} ms`}`, victim }, () => cluster.skewClock(victim, spec))
    await ctx.steady(opts.netHoldMs)
    cluster.skewClock(victim, { rate: 1 }) // true rate again (a step stays: the clock never goes back)
    await cluster.waitSettled({ timeoutMs: 30000 })
    phase.details.victim = victim
    phase.details.clock = spec
    phase.details.bound = leaseBound(ctx)
    phase.note(`${victim}'s clock ${kind === 'fast' ? `ran ${spec.rate}x` : `stepped ${leaseMs} ms forward`} for ${ms(opts.netHoldMs)} ms`)
  }
}

/** Every network fault, in run order. */
const NET_FAULTS = Object.freeze([
  { name: 'net-member-cut', title: 'member cut from the controllers', net: true, run: memberPartition('cut') },
  { name: 'net-member-oneway', title: 'one-way: member cannot reach the controllers', net: true, run: memberPartition('block') },
  { name: 'net-frontend-cut', title: 'front end cut from the controllers', net: true, run: frontendCut },
  { name: 'net-leader-store-cut', title: 'leader cut from the state store', net: true, run: leaderStoreCut },
  { name: 'net-control-delay', title: 'control plane 200±100 ms delay, 5 % loss', net: true, run: controlDelayLoss },
  { name: 'net-clock-fast', title: 'member clock 1 % fast', net: true, run: clockFault('fast') },
  { name: 'net-clock-step', title: 'member clock steps a lease forward', net: true, run: clockFault('step') }
])

module.exports = { NET_FAULTS }
