'use strict'

const path = require('node:path')
const { forkChild } = require('./child')

const CHILD = path.join(__dirname, 'dynalite-child.js')

/**
 * Start dynalite in a process of its own, as DynamoDB is a service of its
 * own: in-process, its work (request parsing, signatures, the in-memory
 * store) would share an event loop with whatever else runs there, such as
 * the Chopper contenders' front ends, and delay their forwarding but not
 * HAProxy's.
 * @param {{ latencyMs?: number }} [options] latencyMs: each request waits this long first (dynalite-child.js)
 * @returns {Promise<{ endpoint: string, pid: number, close: () => Promise<void> }>}
 */
async function startDynaliteProcess ({ latencyMs = 0 } = {}) {
  const child = forkChild(CHILD, { callTimeoutMs: 30000 })
  const ready = await child.start({ latencyMs })
  return {
    endpoint: ready.endpoint,
    pid: child.pid,
    close: () => child.shutdown(10000)
  }
}

module.exports = { startDynaliteProcess }
