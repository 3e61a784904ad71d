'use strict'

const { placeJoiners } = require('./join-placement')
const { spreadMetric } = require('../core/load-metric')
const { LastServerError } = require('../core/errors')

/**
 * Membership over the controller's shared state `c` (docs/control-plane.md,
 * "Batched membership"). Joins, leaves, drains, evictions and lapses change
 * the member tables at once, but the layout in batches (flushMembershipIfDue
 * below): each batch is one layout change and one fenced handoff. A member
 * that leaves and comes back within one batch (a lapse, then a rejoin at the
 * same URLs) changes nothing.
 * Installs its functions on `c`.
 */
function installMembership (c) {
  const pending = { joins: new Set(), leaves: new Map(), urls: new Set(), since: 0 }
  let timer = null
  let timerAt = 0 // when the timer fires
  let lastFlush = -Infinity
  const recent = [] // when each change of the last membershipBatchMaxMs came
  let lastCheck = null // when checkLeases last ran
  const lags = [] // { at, late }: how late each lease check ran, over the last largeLeaseMs

  c.batchPending = () => pending.since > 0

  function note () {
    recent.push(c.leases.now())
    if (pending.since === 0) pending.since = c.leases.now()
    c.flushMembershipIfDue()
  }

  /**
   * Lay the pending changes out when no handoff is in progress and the last
   * batch went out at least a window ago: membershipBatchMaxMs for joins,
   * membershipBatchMs for a batch with a leave (its slices must move soon).
   * After a quiet spell a lone change goes out at once; while changes keep
   * coming, at whatever pace, batches go out at most once a window, so a
   * join burst is a handful of handoffs however its registrations trickle in
   * (docs/control-plane.md). A handoff in progress is awaited (maybeGrant
   * calls this at its grant), up to a window, or four in a storm
   * (membershipStormAt changes within a window): superseding it again and
   * again, each time with more losers, grants nothing. At 5,000 members
   * joining at once, the lapses of a busy spell superseded the handoff 106
   * times in 60 s and granted 7.
   */
  c.flushMembershipIfDue = function flushMembershipIfDue () {
    if (pending.since === 0 || !c.active) return
    const now = c.leases.now()
    const windowMs = c.opts.membershipBatchMaxMs
    while (recent.length > 0 && recent[0] < now - windowMs) recent.shift()
    let wait
    if (c.target) {
      const patience = recent.length >= c.opts.membershipStormAt ? 4 * windowMs : windowMs
      wait = pending.since + patience - now
    } else {
      wait = lastFlush + (pending.leaves.size > 0 ? c.opts.membershipBatchMs : windowMs) - now
    }
    if (wait <= 0) return flush()
    // A grant or a leave can bring the batch forward: a later timer is replaced.
    if (timer && timerAt <= now + wait) return
    clearTimeout(timer)
    timerAt = now + wait
    timer = setTimeout(() => { timer = null; c.flushMembershipIfDue() }, Math.ceil(wait))
    timer.unref()
  }

  function flush () {
    const joins = [...pending.joins].filter((id) => c.servers.has(id) && !c.servers.get(id).draining)
    const leaves = [...pending.leaves]
    const urls = [...pending.urls]
    c.clearPending()
    if (joins.length + leaves.length + urls.length === 0) return // what was pending cancelled out
    lastFlush = c.leases.now()
    // A member that comes back (a lapse, then a rejoin) still holds its map: a diff from it, not the whole map.
    for (const id of joins) {
      const s = c.servers.get(id)
      c.pusher.addTarget(`server:${id}`, s.controlUrl, c.pusher.history.has(s.generation) ? s.generation : 0)
    }
    const reason = `membership +${joins.length} -${leaves.length}` + (joins.length + leaves.length <= 3 ? ` (${[...joins.map((id) => '+' + id), ...leaves.map(([id, why]) => `${why} ${id}`)].join(', ')})` : '')
    const members = c.serverMap()
    const ids = Object.keys(members)
    let current = c.layout()
    if (ids.length === 0) {
      if (!current) return
      // Keep numbering above what members hold when servers come back.
      c.generationFloor = Math.max(c.generationFloor, c.assignment ? c.assignment.generation : 0)
      c.commit(null)
      c.log.warn({ reason }, 'last app server left; no assignment')
      return
    }
    c.m.batches.inc()
    c.counts.batches++
    if (!current || (c.pristine && ids.length <= c.opts.pristineRelayUpTo)) {
      // No traffic yet, a small cluster: lay the keyspace out evenly again.
      c.commit(c.strategy.initial(members, c.strategyOptions), reason)
      return
    }
    // Slices of leaving servers are reassigned at once, not at the next round.
    const leaving = leaves.map(([id]) => id).filter((id) => Object.hasOwn(current.servers, id))
    if (leaving.length === 1 || (leaving.length > 1 && !c.strategy.removeServers)) {
      for (const id of leaving) current = c.strategy.removeServer(current, id, lastLoadsFor(current), c.strategyOptions, c.inputsFor(current, id))
    } else if (leaving.length > 1) {
      current = c.strategy.removeServers(current, leaving, lastLoadsFor(current), c.strategyOptions, c.inputsFor(current))
    }
    for (const id of urls) {
      if (Object.hasOwn(current.servers, id) && members[id]) current = { ...current, servers: { ...current.servers, [id]: members[id] } }
    }
    const joined = joins.filter((id) => !Object.hasOwn(current.servers, id))
    if (joined.length === 1 || (joined.length > 1 && !c.strategy.addServers)) {
      for (const id of joined) current = c.strategy.addServer(current, id, members[id].url, lastLoadsFor(current), c.strategyOptions, c.inputsFor(current))
    } else if (joined.length > 1) {
      current = c.strategy.addServers(current, joined.map((id) => ({ id, url: members[id].url })), lastLoadsFor(current), c.strategyOptions, c.inputsFor(current))
    }
    // A joiner holds its first slices within the batch, not after the next
    // rounds; not one whose load collections failed (an evicted server that
    // registered again): the rounds give it slices once it answers.
    const placeable = joined.filter((id) => !(c.failureCounts.get(id) > 0))
    if (placeable.length) current = placeJoiners(current, placeable, { maxSlices: c.effectiveStrategyOptions.maxSlices })
    c.commit(current, reason)
  }

  function lastLoadsFor (a) {
    return c.lastLoads ? spreadMetric(a, c.lastLoads, c.loadMetric) : new Float64Array(a.slices.length)
  }

  c.addServer = function addServer (id, url, controlUrl, generation) {
    const known = c.servers.get(id)
    const same = known && known.url === url // a re-registration, not a new incarnation
    c.servers.set(id, {
      url,
      controlUrl,
      failures: c.failureCounts.get(id) || 0,
      draining: same ? known.draining : false,
      loadUnknown: same ? known.loadUnknown : false,
      generation,
      drainedGeneration: same ? known.drainedGeneration : 0
    })
    c.changed()
    if (!same || known.controlUrl !== controlUrl) c.persist() // membership is part of the saved state
    const layout = c.layout()
    if (same) {
      c.pusher.addTarget(`server:${id}`, controlUrl)
      return
    }
    if (pending.leaves.has(id) && layout && layout.servers[id] && layout.servers[id].url === url) {
      // Left and back within one batch (a lapse, then a rejoin): nothing to lay out.
      pending.leaves.delete(id)
      c.pusher.addTarget(`server:${id}`, controlUrl)
    } else if (pending.leaves.has(id)) {
      pending.joins.add(id) // another process took the id: the old one leaves, this one joins
    } else if (layout && Object.hasOwn(layout.servers, id)) {
      pending.urls.add(id)
      c.pusher.addTarget(`server:${id}`, controlUrl)
    } else {
      pending.joins.add(id) // its pushes start with the batch that places it
    }
    if (pending.joins.size + pending.leaves.size + pending.urls.size > 0) note()
  }

  /** Take `id`'s slices away in the next batch (leave, eviction, lapsed lease, drain). */
  function leave (id, reason) {
    if (pending.joins.delete(id)) {
      if (pending.joins.size + pending.leaves.size + pending.urls.size === 0 && !c.layout()) pending.since = 0
      return
    }
    const layout = c.layout()
    if (!layout || !Object.hasOwn(layout.servers, id)) return
    pending.leaves.set(id, reason)
    note()
  }

  c.removeServer = function removeServer (id, reason) {
    if (!c.servers.has(id)) return false
    c.servers.delete(id)
    leave(id, reason)
    c.pusher.removeTarget(`server:${id}`)
    c.collector.forget(id)
    c.lastEntries.delete(id)
    c.leases.delete(id)
    c.persist()
    c.changed()
    return true
  }

  c.drainServer = function drainServer (id) {
    const s = c.servers.get(id)
    if (s.draining) return
    const layout = c.layout()
    if (layout && Object.hasOwn(layout.servers, id) && Object.keys(c.serverMap()).every((x) => x === id)) {
      throw new LastServerError(`cannot drain ${id}: it is the last app server; its keys would have nowhere to go`)
    }
    s.draining = true
    c.log.info({ server: id }, 'draining: moving its slices to other servers')
    leave(id, 'drain')
    c.persist()
    c.changed()
  }

  /**
   * Periodic: drop members whose lease lapsed; settle revokes whose losers'
   * leases lapsed. A lapse is confirmed after one more turn of the event
   * loop's I/O phase, so a renewal that reached us in time but waited behind
   * other work renews the lease first; and it must be older than the worst
   * lateness of this check over the last lease: a controller that falls
   * behind does not drop members whose renewals wait in its queue.
   */
  c.checkLeases = function checkLeases () {
    if (!c.active) return
    const lapsedHandoffs = c.handoff.expire(c.leases.now())
    if (lapsedHandoffs.length) {
      c.handoffs.leaseLapses += lapsedHandoffs.length
      c.log.warn({ servers: lapsedHandoffs }, 'revoke not acknowledged before the lease lapsed; granting anyway')
      c.maybeGrant('lapsed')
    }
    // How late this check ran: a controller that falls behind (its event loop
    // held up by a batch, or by a queue of calls) reads renewals that late too,
    // so a lapse counts only once it is older than the worst recent lag.
    const now = c.leases.now()
    const late = lastCheck === null ? 0 : Math.max(0, now - lastCheck - c.opts.leaseCheckMs)
    lastCheck = now
    lags.push({ at: now, late })
    while (lags.length > 0 && lags[0].at < now - c.opts.largeLeaseMs) lags.shift()
    let lag = 0
    for (const l of lags) if (l.late > lag) lag = l.late
    c.lag = lag
    if (c.leases.lapsed(now - lag).length === 0) return
    setImmediate(() => {
      if (!c.active) return
      for (const id of c.leases.lapsed(c.leases.now() - lag)) {
        c.leases.delete(id)
        if (!c.servers.has(id)) continue
        c.m.leaseExpiries.inc()
        c.counts.leaseExpiries++
        c.log.error({ server: id }, 'lease lapsed: the server stopped renewing; moving its slices')
        c.removeServer(id, 'lease-lapsed')
      }
    })
  }

  c.addFrontend = function addFrontend (id, controlUrl) {
    const known = c.frontends.get(id)
    c.frontends.set(id, { controlUrl })
    c.pusher.addTarget(`frontend:${id}`, controlUrl)
    if (!known || known.controlUrl !== controlUrl) c.persist()
    c.changed()
  }

  c.removeFrontend = function removeFrontend (id) {
    if (!c.frontends.delete(id)) return false
    c.pusher.removeTarget(`frontend:${id}`)
    c.persist()
    c.changed()
    return true
  }

  /** Forget pending changes and their timer (a batch taken, a step-down, a takeover, a shutdown). */
  c.clearPending = function clearPending () {
    pending.joins.clear()
    pending.leaves.clear()
    pending.urls.clear()
    pending.since = 0
    clearTimeout(timer)
    timer = null
  }
}

module.exports = { installMembership }
