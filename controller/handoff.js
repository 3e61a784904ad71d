'use strict'

const { planHandoff } = require('./handoff-plan')
const { sameLayout, withoutMoving, checkPlausible } = require('../core/assignment')
const { pollUntil } = require('../core/poll')
const { leaseTerms } = require('./lease-terms')

/**
 * Layouts, generations and fenced handoff (docs/ownership.md) over the
 * controller's shared state `c`: every change of layout goes through
 * `commit`, which issues a revoke map and grants the target once every loser
 * drained or its lease lapsed. Installs its functions on `c`.
 */
function installHandoff (c) {
  /** Registered app servers that may hold slices (not draining), as the assignment lists them. */
  c.serverMap = function serverMap () {
    const out = {}
    for (const [id, s] of c.servers) if (!s.draining) out[id] = { url: s.url }
    return out
  }

  /** The layout strategies work from: the target of a handoff in progress, else the current map. */
  c.layout = function layout () {
    return c.target || (c.assignment && withoutMoving(c.assignment))
  }

  c.nextGeneration = function nextGeneration () {
    return Math.max(c.assignment ? c.assignment.generation : 0, c.generationFloor) + 1
  }

  c.issue = function issue (a, reason, phase) {
    c.counts.generations[phase] = (c.counts.generations[phase] || 0) + 1
    c.assignment = a
    c.log.info({ generation: a.generation, reason, phase, slices: a.slices.length }, 'new assignment')
    c.persist()
    c.changed()
  }

  /** Hand `a` (the newest saved assignment, or null) to the pusher. */
  c.publish = function publish (a) {
    if (!a) {
      c.published = null
      return
    }
    if (c.published && c.published.generation >= a.generation) return
    c.published = c.store ? { ...a, epoch: c.epoch } : a
    // The losers of a handoff in progress first: the grant waits for them.
    c.pusher.publish(c.published, c.handoff.idle ? undefined : new Set([...c.handoff.ids()].map((id) => `server:${id}`)))
  }

  /**
   * Make `next` the layout. Fenced: when some server that may admit a range
   * now does not own it in `next`, first issue the revoke map (moving slices,
   * nobody admits them), and grant `next` once every such loser has drained
   * it or its lease has lapsed. Otherwise, and with handoff 'none', issue
   * `next` at once. Returns whether anything changed.
   */
  c.commit = function commit (next, reason) {
    const current = c.layout()
    if (current && next && sameLayout(next, current)) return false
    if (!next) {
      c.assignment = null
      c.target = null
      c.handoff.clear()
      c.persist()
      c.changed()
      return true
    }
    if (!c.assignment && c.fenced && c.leases.now() < c.leaseHorizon) {
      // Members may still hold leases on maps this controller never saw
      // (a restart, or every server just left): issue nothing until they lapsed.
      deferFirstAssignment(reason)
      return true
    }
    if (!c.fenced || !c.assignment) {
      c.issue({ ...next, generation: c.nextGeneration() }, reason, 'direct')
      return true
    }
    const plan = planHandoff(c.assignment, next)
    const revokeGeneration = c.nextGeneration()
    const now = c.leases.now()
    for (const id of plan.losers) {
      // A loser whose lease already lapsed admits nothing: no need to wait for it.
      const deadline = c.leases.expiresAt(id)
      if (deadline > now) c.handoff.add(id, revokeGeneration, deadline)
    }
    if (c.handoff.idle) {
      c.target = null
      c.handoffs.direct++
      c.issue({ ...next, generation: revokeGeneration }, reason, 'direct')
      return true
    }
    c.target = next
    c.handoffs.revokes++
    c.issue({ ...plan.revoke, generation: revokeGeneration }, reason, 'revoke')
    return true
  }

  function deferFirstAssignment (reason) {
    if (c.deferTimer) return
    const wait = Math.ceil(c.leaseHorizon - c.leases.now())
    c.log.warn({ waitMs: wait, reason }, 'members may hold leases from before: the first assignment waits until they lapsed')
    c.deferTimer = setTimeout(() => {
      c.deferTimer = null
      if (!c.assignment && c.servers.size > 0 && Object.keys(c.serverMap()).length > 0) c.commit(c.strategy.initial(c.serverMap(), c.strategyOptions), `${reason} (after the lease horizon)`)
    }, wait)
  }

  /** Record a lease grant; it is returned to the member only while an assignment exists. */
  c.grantLease = function grantLease (id) {
    // It must hold the last generation that changed its slices, not every one (docs/control-plane.md).
    const lease = c.leases.grant(id, c.published ? c.pusher.needs(id) : 0, leaseTerms(c.servers.size, c.opts))
    if (!c.published) return undefined
    c.leaseHorizon = Math.max(c.leaseHorizon, c.leases.expiresAt(id))
    return c.store ? { ...lease, epoch: c.epoch } : lease
  }

  /** Every loser is done: grant the target layout, then lay out membership changes that waited for it. */
  c.maybeGrant = function maybeGrant (outcome) {
    if (!c.target || !c.handoff.idle) return
    const next = c.target
    c.target = null
    c.handoffs.grants++
    c.m.handoffs.inc({ outcome })
    c.issue({ ...next, generation: c.nextGeneration() }, 'grant', 'grant')
    c.flushMembershipIfDue()
  }

  /** A member reported the generation it has drained (push answer or lease renewal). */
  c.noteDrained = function noteDrained (id, drainedGeneration) {
    if (!Number.isSafeInteger(drainedGeneration)) return
    const s = c.servers.get(id)
    if (s && drainedGeneration > s.drainedGeneration) s.drainedGeneration = drainedGeneration
    if (c.handoff.ack(id, drainedGeneration)) c.maybeGrant('acked')
  }

  c.onPushAck = function onPushAck (key, body) {
    if (!key.startsWith('server:') || !body) return
    const id = key.slice('server:'.length)
    const s = c.servers.get(id)
    if (s && Number.isSafeInteger(body.generation)) s.generation = body.generation
    c.changed()
    if (Number.isSafeInteger(body.drainedGeneration) && Number.isSafeInteger(body.generation)) {
      c.noteDrained(id, Math.min(body.drainedGeneration, body.generation, c.assignment ? c.assignment.generation : 0))
    }
  }

  /**
   * Note a member's generation; re-issue the current layout above it when it
   * is one this controller never issued (strictly above our current one: the
   * generations we issued are all at or below it, and members report them back).
   */
  c.noteGeneration = function noteGeneration (generation) {
    if (!Number.isSafeInteger(generation)) return
    // A member claiming a generation from the far future would make us number
    // above it, and every member would then refuse our pushes as implausible.
    checkPlausible(generation, Math.max(c.generationFloor, c.assignment ? c.assignment.generation : 0), 'generation')
    if (generation <= c.generationFloor) return
    c.generationFloor = generation
    if (c.assignment && c.assignment.generation < c.generationFloor) {
      c.assignment = { ...c.assignment, generation: c.generationFloor + 1 }
      c.persist()
      c.changed()
      c.log.info({ generation: c.assignment.generation }, 'members hold newer generations (controller restart?): re-issued the assignment above them')
    }
  }

  /** Resolves true when no handoff (nor membership batch) is in progress, false after `timeoutMs`. */
  c.settled = function settled (timeoutMs) {
    // Granted means published too: with a state store, saved and handed to the pusher.
    const done = () => c.target === null && !c.batchPending() && (c.assignment === null || (c.published !== null && c.published.generation === c.assignment.generation))
    return pollUntil(done, { timeoutMs, intervalMs: 2, what: 'the handoff to be granted' }).then(() => true, () => false)
  }
}

module.exports = { installHandoff }
