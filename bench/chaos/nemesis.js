'use strict'

const { InvalidArgumentError } = require('../../core/errors')
const { createRng } = require('../../loadgen/prng')
const { isSuccess } = require('./load')

/**
 * `npm run chaos -- --nemesis`: one long phase on the test-host cluster
 * (bench/chaos/net-cluster.js) in which a seeded random schedule applies the
 * network faults one after another, each held for a while and healed, with a
 * quiet spell between them. One history over the whole run, so one verdict;
 * one table, a row per step.
 */

/** The kinds of fault the schedule draws from. */
const KINDS = Object.freeze(['member-cut', 'member-oneway', 'frontend-cut', 'leader-store-cut', 'control-delay', 'clock-fast', 'clock-step'])

/**
 * The schedule: steps `{ atMs, kind, victim, holdMs }` from `seed`, until
 * `durationMs`. Pure: the same seed and hosts give the same schedule.
 * @param {{ seed: number, durationMs: number, servers: string[], frontends: string[], holdMs?: [number, number], gapMs?: [number, number] }} options
 */
function planSchedule ({ seed, durationMs, servers, frontends, holdMs = [4000, 15000], gapMs = [3000, 8000] }) {
  if (!Number.isInteger(durationMs) || durationMs < 1000) throw new InvalidArgumentError('invalid durationMs: expected an integer >= 1000')
  const rng = createRng(seed)
  const between = ([lo, hi]) => lo + Math.floor(rng.next() * (hi - lo + 1))
  const steps = []
  let at = between(gapMs)
  while (at < durationMs) {
    const kind = KINDS[rng.int(KINDS.length)]
    const victim = kind === 'frontend-cut' ? frontends[rng.int(frontends.length)] : kind.startsWith('member') || kind.startsWith('clock') ? servers[rng.int(servers.length)] : null
    const hold = Math.min(between(holdMs), durationMs - at)
    steps.push({ atMs: at, kind, victim, holdMs: hold })
    at += hold + between(gapMs)
  }
  return steps
}

/** Apply one step's fault on `cluster`; resolves its heal. */
async function apply (cluster, step, opts) {
  const { rules } = cluster
  const each = async (fns) => {
    const handles = []
    for (const f of fns) handles.push(await f())
    return async () => { for (const h of handles) await h.heal() }
  }
  switch (step.kind) {
    case 'member-cut':
      return each(cluster.controllerHosts.map((c) => () => rules.cut(step.victim, c)))
    case 'member-oneway':
      return each(cluster.controllerHosts.map((c) => () => rules.block(step.victim, c)))
    case 'frontend-cut':
      return each(cluster.controllerHosts.map((c) => () => rules.cut(step.victim, c)))
    case 'leader-store-cut':
      step.victim = cluster.leaderHost
      return each([() => rules.cut(step.victim, 'ddb')])
    case 'control-delay': {
      const proxies = await cluster.startDelayProxies({ delayMs: opts.netDelayMs, jitterMs: opts.netJitterMs, seed: step.atMs })
      const others = [...cluster.frontendHosts, ...cluster.ids]
      const heal = await each([
        ...others.map((h) => () => rules.redirect(h, proxies.targets)),
        ...cluster.controllerHosts.map((c) => () => rules.loss(c, opts.netLossPct, [...others, 'proxy']))
      ])
      return async () => {
        await heal()
        await proxies.close()
      }
    }
    case 'clock-fast':
      cluster.skewClock(step.victim, { rate: 1 + opts.netClockFastPct / 100 })
      return async () => cluster.skewClock(step.victim, { rate: 1 })
    case 'clock-step':
      cluster.skewClock(step.victim, { stepMs: cluster.controller.status().leaseMs || 1500 })
      return async () => {}
  }
  throw new InvalidArgumentError(`unknown fault kind ${step.kind}`)
}

/** The fault run as a phase (index.js): the whole schedule under load. */
async function runSchedule (ctx, phase) {
  const { cluster, opts } = ctx
  const steps = planSchedule({ seed: opts.seed, durationMs: opts.nemesisMs, servers: cluster.ids, frontends: cluster.frontendHosts })
  const t0 = ctx.now()
  const done = []
  for (const step of steps) {
    if (ctx.signal && ctx.signal.aborted) break
    await ctx.steady(Math.max(0, t0 + step.atMs - ctx.now()))
    const start = ctx.now()
    const heal = await apply(cluster, step, opts)
    try {
      await ctx.steady(step.holdMs)
    } finally {
      await heal()
    }
    done.push({ ...step, startedAt: start, healedAt: ctx.now() })
  }
  // Back to a settled cluster before the load stops: the last step's recovery counts too.
  await cluster.waitSettled({ timeoutMs: 60000 })
  phase.details.schedule = done.map((s) => ({ kind: s.kind, victim: s.victim, atMs: Math.round(s.startedAt - t0), heldMs: Math.round(s.healedAt - s.startedAt) }))
  phase.details.scheduleMs = Math.round(ctx.now() - t0)
  phase.details.origin = t0
  phase.note(`${done.length} faults in ${Math.round((ctx.now() - t0) / 1000)} s (seed ${opts.seed})`)
}

/**
 * One row per step: requests sent from the fault until the next fault (or
 * the end), how many failed, and the longest run of failed or held requests
 * of one key that started in that span.
 */
function stepRows (records, steps, origin, { heldMs = 1000 } = {}) {
  return steps.map((s, i) => {
    const from = origin + s.atMs
    const to = i + 1 < steps.length ? origin + steps[i + 1].atMs : Infinity
    const mine = records.filter((r) => r.call >= from && r.call < to)
    const byKey = new Map()
    for (const r of mine) {
      if (!byKey.has(r.key)) byKey.set(r.key, [])
      byKey.get(r.key).push(r)
    }
    let worst = 0
    for (const list of byKey.values()) {
      let start = null
      for (const r of list.sort((a, b) => a.call - b.call)) {
        const ret = r.ret === null ? r.call : r.ret
        if (!isSuccess(r) || ret - r.call > heldMs) {
          if (start === null) start = r.call
          worst = Math.max(worst, ret - start)
        } else {
          start = null
        }
      }
    }
    return { kind: s.kind, victim: s.victim, atMs: s.atMs, heldMs: s.heldMs, sent: mine.filter((r) => !r.probe).length, failed: mine.filter((r) => !r.probe && !isSuccess(r)).length, unavailableMs: Math.round(worst) }
  })
}

const NEMESIS = Object.freeze({ name: 'nemesis', title: 'random schedule of network faults', net: true, run: runSchedule })

module.exports = { NEMESIS, KINDS, planSchedule, stepRows }
