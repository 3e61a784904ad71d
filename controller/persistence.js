'use strict'

const { DeposedError } = require('../core/errors')

/**
 * The controller's state in its store and leadership (docs/controller-ha.md),
 * over the shared state `c`: saves (serialized and coalesced: each writes the
 * newest state, so writes per second stay bounded by the store's latency
 * however fast membership changes), publishing what was saved, and taking
 * over or stepping down. Installs its functions on `c`.
 */
function installPersistence (c) {
  const persistence = { saving: false, dirty: false, saves: 0, failures: 0, lastError: null, lastBytes: 0, lastParts: 0, bytes: 0 }
  c.persistence = persistence

  /** What a successor needs to resume exactly where this controller is. */
  function snapshot () {
    return {
      assignment: c.assignment,
      target: c.target,
      pristine: c.pristine,
      generationFloor: c.generationFloor,
      servers: [...c.servers].map(([id, s]) => ({ id, url: s.url, controlUrl: s.controlUrl, draining: s.draining })),
      frontends: [...c.frontends].map(([id, f]) => ({ id, controlUrl: f.controlUrl }))
    }
  }

  /**
   * Save the state, then publish its assignment. Without a store, publish at
   * once. A failed save is retried and pushes wait for it: members keep the
   * last saved map meanwhile. A refused save means a newer leader: step down.
   */
  c.persist = function persist () {
    if (!c.store) return c.publish(c.assignment)
    if (!c.active) return
    persistence.dirty = true
    if (persistence.saving) return
    persistence.saving = true
    c.saveLoop = (async () => {
      let backoff = 50
      while (persistence.dirty) {
        if (!c.active) break // stepped down meanwhile
        persistence.dirty = false
        const snap = snapshot()
        const mine = c.epoch
        try {
          const out = await c.store.saveState({ epoch: mine, generation: Math.max(snap.assignment ? snap.assignment.generation : 0, snap.generationFloor), state: snap })
          persistence.saves++
          persistence.lastBytes = out.bytes
          persistence.lastParts = out.parts
          persistence.bytes += out.bytes
          persistence.lastError = null
          backoff = 50
        } catch (err) {
          persistence.failures++
          persistence.lastError = err.message
          c.m.saveFailures.inc()
          if (err instanceof DeposedError) {
            if (c.election) await c.election.deposed(err.message)
            break
          }
          c.log.error({ err, retryMs: backoff }, 'could not save the controller state; pushes wait until it is saved')
          persistence.dirty = true
          await new Promise((resolve) => setTimeout(resolve, backoff))
          backoff = Math.min(backoff * 2, 2000)
          continue
        }
        if (c.leading() && c.epoch === mine) c.publish(snap.assignment)
      }
      persistence.saving = false
    })()
  }

  /**
   * Elected: claim the saved state for our epoch (from then on the previous
   * leader cannot save, hence cannot push), resume it exactly, and re-issue
   * the same layout under a new generation and the new epoch. No slice
   * changes hands; members that install it refuse the old leader's pushes
   * and lease grants from then on.
   */
  c.takeOver = async function takeOver (lease) {
    c.epoch = lease.epoch
    await c.store.claimState(c.epoch)
    const saved = await c.store.loadState()
    restore(saved ? saved.state : null)
    c.active = true
    c.m.elections.inc()
    c.log.info({ epoch: c.epoch, resumed: Boolean(c.assignment), servers: c.servers.size, frontends: c.frontends.size, generation: c.assignment ? c.assignment.generation : 0 }, 'leading: state resumed')
    c.schedule()
    if (c.assignment) {
      c.issue({ ...c.assignment, generation: c.nextGeneration() }, 'takeover', c.target ? 'revoke' : 'direct')
      // A handoff was in progress: which servers it waited for is not saved;
      // wait for every one of them (each acknowledges at once, or its lease lapses).
      if (c.target) {
        for (const id of c.servers.keys()) c.handoff.add(id, c.assignment.generation, c.leases.expiresAt(id))
      }
    } else {
      c.persist()
    }
    c.changed()
  }

  /** Forget this process's view and take the saved one (null: a cluster without state yet). */
  function restore (saved) {
    for (const id of c.servers.keys()) {
      c.leases.delete(id)
      c.collector.forget(id)
    }
    c.servers.clear()
    c.frontends.clear()
    c.failureCounts.clear()
    c.lastEntries.clear()
    c.handoff.clear()
    c.clearPending()
    c.resetPusher()
    c.assignment = null
    c.target = null
    c.published = null
    c.lastLoads = null
    c.pristine = true
    if (!saved) {
      c.leaseHorizon = Math.max(c.leaseHorizon, c.leases.now() + c.opts.startupFenceMs)
      return
    }
    for (const s of saved.servers) {
      c.servers.set(s.id, { url: s.url, controlUrl: s.controlUrl, failures: 0, draining: Boolean(s.draining), loadUnknown: false, generation: 0, drainedGeneration: 0 })
      // Each gets a lease from now: a member that died meanwhile is dropped
      // once it lapses, like any silent member.
      c.leases.grant(s.id, 0, { leaseMs: Math.max(c.opts.leaseMs, c.opts.largeLeaseMs), renewMs: c.opts.renewMs })
      c.pusher.addTarget(`server:${s.id}`, s.controlUrl)
    }
    for (const f of saved.frontends) {
      c.frontends.set(f.id, { controlUrl: f.controlUrl })
      c.pusher.addTarget(`frontend:${f.id}`, f.controlUrl)
    }
    c.assignment = saved.assignment
    c.target = saved.target
    c.pristine = saved.pristine
    c.generationFloor = Math.max(c.generationFloor, saved.generationFloor || 0)
    // Members hold leases the previous leader granted on this layout: a
    // first assignment after none waits for them like after a restart.
    c.leaseHorizon = Math.max(c.leaseHorizon, c.leases.now() + Math.max(c.opts.leaseMs, c.opts.largeLeaseMs) + c.opts.leaseMarginMs)
  }

  /** No longer the leader: stop rounds and pushes, forget the layout (the successor owns it). */
  c.stepDown = function stepDown (reason) {
    if (!c.active) return
    c.active = false
    c.m.depositions.inc()
    clearTimeout(c.timer)
    c.timer = null
    clearTimeout(c.deferTimer)
    c.deferTimer = null
    c.clearPending()
    c.resetPusher()
    c.handoff.clear()
    c.assignment = null
    c.target = null
    c.published = null
    c.log.error({ reason, epoch: c.epoch }, 'stepped down: now a standby')
    c.changed()
  }
}

module.exports = { installPersistence }
