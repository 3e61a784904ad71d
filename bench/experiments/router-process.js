'use strict'

const path = require('node:path')
const { forkChild } = require('../lib/child')

const CHILD = path.join(__dirname, 'router-child.js')

/**
 * Start a Chopper controller or front end in a process of its own
 * (router-child.js). `options` are createController's or createFrontend's,
 * plain data (they cross IPC; no logger: `logLevel` makes the child log to
 * stderr at that level).
 * @param {'controller'|'frontend'} role
 * @param {object} options
 * @param {{ logLevel?: string }} [extra]
 * @returns {Promise<{ pid: number, url: string, controlUrl?: string, id?: string,
 *   status: () => Promise<object|null>, close: () => Promise<void> }>}
 */
async function startRouterProcess (role, options, { logLevel } = {}) {
  const child = forkChild(CHILD, { args: [role], callTimeoutMs: 30000 })
  const ready = await child.start({ options, logLevel })
  return {
    ...ready,
    pid: child.pid,
    status: () => child.call('status', {}, 10000),
    close: async () => { await child.shutdown(15000) }
  }
}

module.exports = { startRouterProcess }
