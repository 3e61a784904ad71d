'use strict'

const crypto = require('node:crypto')
const { performance } = require('node:perf_hooks')
const { silent } = require('../core/logger')

/**
 * Leader election over the state store's lease item (docs/controller-ha.md).
 *
 * The leader renews every `leaseMs / 3`, and believes it leads only until
 * `leaseMs` after it *sent* its last successful renewal (its own monotonic
 * clock). A standby reads the item every `checkMs` and takes it over only
 * after watching its record version stay unchanged for `leaseMs + marginMs`
 * of its own clock: by then the old leader has stopped believing, whatever
 * the two machines' wall clocks say (clock rates may differ by the margin).
 * Each takeover raises the epoch, which fences the old leader's writes to the
 * state and, through members, its pushes and lease grants.
 */
class LeaderElection {
  /**
   * @param {object} options
   * @param {import('./state-store').DynamoStateStore} options.store
   * @param {string} options.id this controller's name (the holder is the name plus a per-process nonce)
   * @param {string} options.url where members reach this controller
   * @param {number} options.leaseMs
   * @param {number} options.checkMs how often a standby reads the lease
   * @param {number} options.marginMs added to what a standby waits, for clock-rate drift
   * @param {(lease) => Promise<void>|void} options.onElected
   * @param {(reason: string) => void} options.onDeposed
   */
  constructor ({ store, id, url, leaseMs, checkMs, marginMs, onElected, onDeposed, now = () => performance.now(), logger = silent }) {
    Object.assign(this, { store, id, url, leaseMs, checkMs, marginMs, onElected, onDeposed, now, logger })
    this.holder = `${id}/${crypto.randomBytes(4).toString('hex')}`
    this.lease = null // ours, while leading
    this.validUntil = -Infinity
    this.observed = null // standby: the last lease item read, and since when it has not changed
    this.observedSince = 0
    this.leader = null // { holder, url, epoch } as last seen
    this.timer = null
    this.stopped = true
    this.stats = { elections: 0, renewals: 0, renewalFailures: 0, depositions: 0, storeFailures: 0 }
  }

  get leading () {
    return this.lease !== null && this.now() < this.validUntil
  }

  get epoch () {
    return this.lease ? this.lease.epoch : 0
  }

  start () {
    this.stopped = false
    this.#schedule(0)
  }

  #schedule (ms) {
    if (this.stopped) return
    clearTimeout(this.timer)
    this.timer = setTimeout(() => this.#tick().catch((err) => this.logger.error({ err }, 'leader election step failed')), ms)
  }

  async #tick () {
    if (this.lease) await this.#renew()
    else await this.#watch()
    if (this.lease) this.#schedule(Math.max(1, Math.floor(this.leaseMs / 3)))
    else this.#schedule(this.checkMs)
  }

  async #watch () {
    let item
    try {
      item = await this.store.readLease()
    } catch (err) {
      this.stats.storeFailures++
      this.logger.warn({ err }, 'cannot read the leader lease')
      return
    }
    if (this.stopped) return
    const now = this.now()
    if (item) this.leader = { holder: item.holder, url: item.url, epoch: item.epoch }
    let take = item === null || item.released
    if (!take) {
      if (!this.observed || this.observed.rvn !== item.rvn) {
        this.observed = item
        this.observedSince = now
      } else if (now - this.observedSince >= this.leaseMs + this.marginMs) {
        take = true
      }
    }
    if (!take) return
    const sentAt = this.now()
    let lease
    try {
      lease = await this.store.acquireLease({ holder: this.holder, url: this.url, leaseMs: this.leaseMs, observed: item })
    } catch (err) {
      this.stats.storeFailures++
      this.logger.warn({ err }, 'cannot take the leader lease')
      return
    }
    this.observed = null
    if (!lease || this.stopped) return
    this.lease = lease
    this.validUntil = sentAt + this.leaseMs
    this.leader = { holder: lease.holder, url: lease.url, epoch: lease.epoch }
    this.stats.elections++
    this.logger.info({ epoch: lease.epoch, previous: item ? item.holder : null }, 'elected leader')
    try {
      await this.onElected(lease)
    } catch (err) {
      this.logger.error({ err }, 'taking over as leader failed; stepping down')
      await this.#depose('takeover failed')
    }
  }

  async #renew () {
    const sentAt = this.now()
    if (sentAt >= this.validUntil) return this.#depose('lease lapsed before it could be renewed')
    let next
    try {
      next = await this.store.renewLease(this.lease, this.leaseMs)
    } catch (err) {
      this.stats.renewalFailures++
      this.logger.warn({ err, leftMs: Math.round(this.validUntil - this.now()) }, 'leader lease renewal failed')
      if (this.now() >= this.validUntil) await this.#depose('lease lapsed: the state store did not answer')
      return
    }
    if (!this.lease) return // deposed meanwhile
    if (!next) return this.#depose('another controller holds the lease')
    this.stats.renewals++
    this.lease = next
    this.validUntil = sentAt + this.leaseMs
  }

  /** Stop leading (the lease is lost or the takeover failed). */
  async #depose (reason) {
    if (!this.lease) return
    this.lease = null
    this.validUntil = -Infinity
    this.stats.depositions++
    this.logger.error({ reason }, 'no longer the leader')
    this.onDeposed(reason)
  }

  /** The state store refused our epoch: someone newer leads. */
  deposed (reason) {
    return this.#depose(reason)
  }

  /** Stop; a leader releases its lease so a standby takes over at once. */
  async stop () {
    this.stopped = true
    clearTimeout(this.timer)
    const lease = this.lease
    this.lease = null
    this.validUntil = -Infinity
    if (!lease) return
    try {
      await this.store.releaseLease(lease)
    } catch (err) {
      this.logger.warn({ err }, 'could not release the leader lease; a standby takes over once it lapses')
    }
  }

  /** Stop without releasing anything: a crash, for tests and chaos. */
  abandon () {
    this.stopped = true
    clearTimeout(this.timer)
    this.lease = null
    this.validUntil = -Infinity
  }
}

module.exports = { LeaderElection }
