'use strict'

const { imbalance, keyChurn, ownedRanges } = require('../core/assignment')
const { spreadMetric, totals } = require('../core/load-metric')
const { hotKeysOf } = require('../core/hot-keys')
const { overlap } = require('../core/ranges')
const { KEYSPACE_SIZE } = require('../core/keyspace')
const { keyspaceColumn } = require('./dashboard/keyspace-view')

/**
 * One balancing period (paper 4.3) over the controller's shared state `c`:
 * collect load reports (I/O), account them to the members, plan the round
 * (pure: planRound), commit its layout, record the history. Installs
 * `runRound` and `schedule` on `c`.
 */
function installRounds (c) {
  c.runRound = async function runRound () {
    if (c.running) return c.running
    c.running = (async () => {
      const t0 = process.hrtime.bigint()
      c.round++
      if (!c.leading() || !c.assignment) return null
      const collected = await c.collector.collect(c.servers)
      const unknown = account(collected)
      if (!c.assignment) return null
      const before = c.layout()
      const plan = planRound({
        before,
        servers: c.servers,
        reports: collected.reports,
        lastEntries: c.lastEntries,
        loadMetric: c.loadMetric,
        strategy: c.strategy,
        strategyOptions: c.strategyOptions,
        handoffInProgress: c.target !== null,
        quietLimit: c.loadMetric === 'cost' && c.opts.quietBelow > 0 ? c.opts.quietBelow * c.opts.periodMs : null,
        unknown,
        inputsFor: c.inputsFor
      })
      c.lastLoads = plan.entries
      if (plan.total > 0) c.pristine = false
      if (plan.quiet) c.m.quietRounds.inc()
      const changed = plan.next ? c.commit(plan.next, `round ${c.round}`) : false
      c.m.rounds.inc()
      c.m.churn.inc(plan.churn)
      c.m.imbalance.set(plan.imbalance)
      const entry = {
        round: c.round,
        at: Date.now(),
        generation: c.assignment ? c.assignment.generation : 0,
        loadMetric: c.loadMetric,
        totalLoad: plan.total,
        perServer: plan.perServerLoad, // in loadMetric
        perServerRequests: plan.perServerRequests,
        perServerCost: plan.perServerCost, // ms
        imbalance: plan.imbalance,
        unknown,
        quiet: plan.quiet,
        changed,
        churn: plan.churn,
        churnFraction: plan.churn / KEYSPACE_SIZE,
        slices: c.assignment ? c.assignment.slices.length : 0,
        durationMs: Number(process.hrtime.bigint() - t0) / 1e6
      }
      c.history.push(entry)
      if (c.history.length > c.opts.historySize) c.history.shift()
      const column = { round: c.round, at: entry.at, generation: entry.generation, ...keyspaceColumn(before, plan.loads, { buckets: c.opts.heatmapBuckets, previous: c.columns[c.columns.length - 1] }) }
      c.columns.push(column)
      if (c.columns.length > c.opts.historySize) c.columns.shift()
      c.events.broadcast('round', () => c.roundEvent(entry, column))
      return entry
    })()
    try {
      return await c.running
    } finally {
      c.running = null
    }
  }

  /** Account a collection to the members: failures (evicting), slow answers, fresh reports. Returns the ids whose load is unknown. */
  function account ({ reports, failed, slow, costless }) {
    for (const id of costless) {
      if (c.loadMetric !== 'cost' || c.costlessWarned.has(id)) continue
      c.costlessWarned.add(id)
      c.log.warn({ server: id }, 'load report without cost (an older appserver-lib?): its load counts as 0 under loadMetric cost')
    }
    const unknown = []
    for (const f of failed) {
      const s = c.servers.get(f.id)
      c.m.collectFailures.inc({ server: f.id })
      if (!s) continue
      s.failures++
      s.loadUnknown = true
      c.failureCounts.set(f.id, s.failures)
      unknown.push(f.id)
      c.log.warn({ err: f.err, server: f.id, failures: s.failures }, 'load collection failed; its load is unknown this round')
      if (s.failures >= c.opts.evictAfterFailures) {
        c.m.evictions.inc()
        c.counts.evictions++
        c.log.error({ server: f.id, failures: s.failures }, 'evicting unreachable app server')
        c.removeServer(f.id, 'evict')
      }
    }
    for (const id of slow) {
      const s = c.servers.get(id)
      if (!s) continue
      c.m.collectSlow.inc({ server: id })
      s.loadUnknown = true
      unknown.push(id)
      c.log.warn({ server: id, waitedMs: c.collector.waitMs }, 'load collection slow: its load is unknown this round; its answer is taken next round')
    }
    for (const [id, entries] of reports) {
      const s = c.servers.get(id)
      if (!s) continue
      s.failures = 0
      s.loadUnknown = false
      c.failureCounts.delete(id)
      c.lastEntries.set(id, entries)
    }
    return unknown
  }

  /**
   * Strategy inputs: servers whose load is unknown (failed collection) never
   * receive slices; `requests`, when given, is how many requests the period's
   * loads were measured over (the loads may be costs), for chopper's noise floor.
   */
  c.inputsFor = function inputsFor (a, except, requests) {
    const unknownServers = []
    for (const [id, s] of c.servers) {
      if (id !== except && s.loadUnknown && Object.hasOwn(a.servers, id)) unknownServers.push(id)
    }
    return requests === undefined ? { unknownServers } : { unknownServers, requests }
  }

  c.schedule = function schedule () {
    c.timer = setTimeout(async () => {
      try {
        await c.runRound()
      } catch (err) {
        c.log.error({ err }, 'balancing round failed')
      }
      if (c.timer && c.active) c.schedule()
    }, c.opts.periodMs)
  }
}

/**
 * The pure part of a round: per-slice loads from the members' reports (a
 * member whose load is unknown keeps its last known report over what it
 * still owns, never zero), per-server figures, whether the round is quiet,
 * and the layout the strategy wants (null when it runs no strategy: no load,
 * a handoff in progress, or quiet).
 */
function planRound ({ before, servers, reports, lastEntries, loadMetric, strategy, strategyOptions, handoffInProgress, quietLimit, unknown, inputsFor }) {
  const entries = []
  // Per server, from its own report: with replicated slices a slice's load is
  // served by several servers, so attributing slices to servers would only
  // guess each one's share.
  const own = {}
  for (const [id, s] of servers) {
    let mine = reports.get(id) || null
    if (!mine && s.loadUnknown && lastEntries.has(id)) {
      // Its last known counts, only over what it still owns (ranges moved
      // off it since are counted by their new owners' fresh reports).
      mine = clip(lastEntries.get(id), ownedRanges(before, id))
    }
    if (mine === null) continue
    for (const x of mine) entries.push(x)
    own[id] = totals(mine)
  }
  const loads = spreadMetric(before, entries, loadMetric)
  const total = loads.reduce((x, y) => x + y, 0)
  const perServerLoad = {}
  const perServerRequests = {}
  const perServerCost = {}
  let requests = 0 // fresh reports only: the strategy divides it among the servers whose load is known
  for (const id of Object.keys(before.servers)) {
    const o = own[id] || { requests: 0, cost: 0 }
    perServerLoad[id] = loadMetric === 'cost' ? o.cost : o.requests
    perServerRequests[id] = o.requests
    perServerCost[id] = o.cost
    if (reports.has(id)) requests += o.requests
  }
  // A round held by a handoff in progress is not quiet: the handoff is what ran no strategy.
  const quiet = total > 0 && !handoffInProgress && isQuiet(before, perServerCost, unknown, quietLimit)
  let next = null
  let churn = 0
  if (total > 0 && !handoffInProgress && !quiet) {
    // each slice's hottest key, for splits that cut it out (core/hot-keys.js)
    const hotKeys = hotKeysOf(before, entries, loads, spreadMetric(before, entries, 'requests'))
    next = strategy.rebalance(before, loads, strategyOptions, { ...inputsFor(before, undefined, requests), hotKeys })
    churn = keyChurn(before, next)
  }
  return { entries, loads, total, perServerLoad, perServerRequests, perServerCost, imbalance: imbalance(perServerLoad), quiet, next, churn }
}

/**
 * Whether this round's load is too light for balance to matter (quietBelow):
 * with loadMetric 'cost' (`limit` is then quietBelow x the period), every
 * server's own reported busy time is below the limit, every server's load is
 * known this round, and every server holds a slice (a server that joined
 * gets its slices at any load).
 */
function isQuiet (a, costs, unknown, limit) {
  if (limit === null || unknown.length > 0) return false
  for (const id of Object.keys(a.servers)) if (!((costs[id] || 0) < limit)) return false
  const holding = new Set()
  for (const s of a.slices) for (const id of s.servers) holding.add(id)
  for (const id of Object.keys(a.servers)) if (!holding.has(id)) return false
  return true
}

/** Load entries restricted to `ranges` (normalized), counts and cost scaled by the overlap. */
function clip (entries, ranges) {
  const out = []
  for (const e of entries) {
    const len = e.end - e.start
    for (const r of ranges) {
      const o = overlap(e, r)
      if (o > 0) {
        const part = { start: Math.max(e.start, r.start), end: Math.min(e.end, r.end), count: e.count * o / len, cost: e.cost * o / len }
        if (e.done !== undefined) part.done = e.done * o / len
        out.push(part)
      }
    }
  }
  return out
}

module.exports = { installRounds, planRound }
