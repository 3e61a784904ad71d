'use strict'

const { silent } = require('../core/logger')

/**
 * Renews this server's lease with the controller every `renewMs`
 * (docs/ownership.md). Each renewal reports the installed and drained
 * generations (the drained one acknowledges revokes the push could not), and
 * its answer carries the lease and, when this server is behind, the current
 * assignment, which is installed before the lease is extended: a server that
 * misses pushes still learns what it lost.
 *
 * The renewals double as the controller's failure detector: a killed server
 * stops renewing and its slices move once its lease has run out.
 */
class LeaseKeeper {
  /**
   * @param {object} options
   * @param {import('./shard-guard').ShardGuard} options.guard
   * @param {(report: {generation, drainedGeneration}) => Promise<object>} options.renew one renewal call
   * @param {(assignment) => void} options.install installs an assignment from the controller
   * @param {() => void} options.onUnknown the controller does not know us (evicted, restarted): re-register
   * @param {number} [options.renewMs] fixed period; undefined follows the controller's lease grants
   */
  constructor ({ guard, renew, install, onUnknown, renewMs, logger = silent }) {
    // renewMs undefined: the period the controller's lease grants name (renewMs, chosen by cluster size), 250 ms until one arrives.
    Object.assign(this, { guard, renew, install, onUnknown, logger })
    this.fixedRenewMs = renewMs
    this.renewMs = renewMs === undefined ? 250 : renewMs
    this.timer = null
    this.stopped = true
    this.failures = 0
    this.warned = false
    this.stats = { renewals: 0, failures: 0 }
  }

  start () {
    this.stopped = false
    this.#schedule(0)
  }

  /** Apply a registration answer's lease; `sentAt` is when the registration left. */
  apply (body, sentAt) {
    // A full map, or a diff from the generation the call reported (core/map-diff.js).
    if (body && body.assignment) this.install(body.assignment)
    if (body && body.diff) this.install(body.diff)
    if (body && body.lease) {
      const asked = body.lease.renewMs
      if (this.fixedRenewMs === undefined && Number.isInteger(asked) && asked >= 10 && asked <= 60000) this.renewMs = asked
      // A period of our own under three renewals a lease is a misconfiguration; the controller's own
      // choice for large clusters (2.5 renewals, docs/control-plane.md) is deliberate.
      if (!this.warned && this.fixedRenewMs !== undefined && body.lease.leaseMs < 3 * this.renewMs) {
        this.warned = true
        this.logger.warn({ leaseMs: body.lease.leaseMs, renewMs: this.renewMs }, 'the controller\'s lease is under three renewals: one slow renewal will stop this server admitting')
      }
      this.guard.applyLease(body.lease, sentAt)
    }
  }

  #schedule (ms) {
    if (this.stopped) return
    this.timer = setTimeout(() => this.#tick(), ms)
    this.timer.unref()
  }

  async #tick () {
    const sentAt = this.guard.now()
    try {
      const body = await this.renew({ generation: this.guard.generation, drainedGeneration: this.guard.drainedGeneration })
      this.stats.renewals++
      if (this.failures > 0) this.logger.info({ failures: this.failures }, 'lease renewed again')
      this.failures = 0
      this.apply(body, sentAt)
    } catch (err) {
      this.stats.failures++
      this.failures++
      const status = err.response && err.response.status
      if (status === 404) {
        this.logger.warn('the controller does not know this server (evicted or restarted): re-registering')
        this.onUnknown()
      } else if (this.failures === 1 || this.failures % 20 === 0) {
        this.logger.warn({ failures: this.failures, status, err }, 'lease renewal failed')
      }
    }
    // The period runs from when this renewal left, not from its answer: a
    // controller slow to answer (a join storm) must not stretch the gap
    // between renewals past the lease.
    this.#schedule(Math.max(0, this.renewMs - (this.guard.now() - sentAt)))
  }

  stop () {
    this.stopped = true
    clearTimeout(this.timer)
  }
}

module.exports = { LeaseKeeper }
