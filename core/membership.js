'use strict'

const { pollUntil } = require('./poll')
const { silent } = require('./logger')

/**
 * A member's life with the controller, shared by app servers and front ends:
 * register (retrying with backoff until a deadline, since the controller may
 * start after us), re-register periodically when `needed` (idempotent; a
 * restarted controller relearns its members), and deregister on close.
 */
class Membership {
  /**
   * @param {object} options
   * @param {() => Promise<object>} options.register one registration call; resolves the controller's answer
   * @param {() => Promise<void>} options.deregister
   * @param {(body: object) => void} options.install applies the controller's answer (its assignment)
   * @param {number} options.registerTimeoutMs deadline for the first registration
   * @param {number} options.reregisterMs period of re-registration; 0 disables
   * @param {string} options.what names the member in errors
   * @param {() => boolean} [options.needed] whether a periodic re-registration is worth making now
   *   (app servers: only while renewals fail, since a renewal answered proves the controller knows us)
   */
  constructor ({ register, deregister, install, registerTimeoutMs, reregisterMs, what, needed = () => true, logger = silent }) {
    Object.assign(this, { register, deregister, install, registerTimeoutMs, reregisterMs, what, needed, logger })
    this.registered = false
    this.timer = null
    this.inflight = null
  }

  async start () {
    // Retries back off (250 ms doubling to 5 s, with jitter): thousands of
    // members retrying a busy controller in step would keep it busy.
    let backoff = 250
    const body = await pollUntil(async () => {
      try {
        return await this.register()
      } catch (err) {
        this.logger.warn({ err, retryInMs: backoff }, 'registration with the controller failed; retrying')
        await new Promise((resolve) => setTimeout(resolve, backoff * (0.5 + Math.random() / 2)).unref())
        backoff = Math.min(backoff * 2, 5000)
        return undefined
      }
    }, { timeoutMs: this.registerTimeoutMs, intervalMs: 1, what: `registration of ${this.what}` })
    this.registered = true
    this.install(body)
    if (this.reregisterMs > 0) {
      this.timer = setInterval(() => { if (this.needed()) this.reregister() }, this.reregisterMs)
      this.timer.unref()
    }
  }

  /** Register again now (idempotent; concurrent calls share one request). */
  reregister () {
    if (!this.registered) return Promise.resolve()
    if (this.inflight) return this.inflight
    this.inflight = (async () => {
      try {
        this.install(await this.register())
      } catch (err) {
        this.logger.warn({ err }, 're-registration with the controller failed')
      } finally {
        this.inflight = null
      }
    })()
    return this.inflight
  }

  async stop () {
    clearInterval(this.timer)
    if (!this.registered) return
    this.registered = false
    if (this.inflight) await this.inflight
    try {
      await this.deregister()
    } catch (err) {
      this.logger.warn({ err }, 'deregistration failed; the controller evicts members that stop answering')
    }
  }
}

module.exports = { Membership }
