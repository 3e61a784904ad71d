'use strict'

const { setTimeout: delay } = require('node:timers/promises')
const { TimeoutError } = require('./errors')

/**
 * Call `fn` until it returns something other than undefined/null/false, or the
 * deadline passes (then throw naming `what`). Used by entry points and tests
 * to wait for a condition by polling against a deadline, never a fixed sleep.
 */
async function pollUntil (fn, { timeoutMs = 10000, intervalMs = 50, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs
  let last
  for (;;) {
    last = await fn()
    if (last !== undefined && last !== null && last !== false) return last
    if (Date.now() >= deadline) {
      throw new TimeoutError(`timed out after ${timeoutMs} ms waiting for ${what}`)
    }
    await delay(intervalMs)
  }
}

module.exports = { pollUntil }
