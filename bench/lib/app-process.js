'use strict'

const path = require('node:path')
const { forkChild } = require('./child')
const { InvalidArgumentError } = require('../../core/errors')
const { APPS } = require('../../apps')

const CHILD = path.join(__dirname, 'app-child.js')

/**
 * Fork an app server process (app-child.js) for `app`. The process loads the
 * app's modules at once; `start` then listens on ports 0 and, with a
 * controllerUrl, registers. Splitting the two lets a caller fork every server
 * in parallel and still register them one by one, in id order.
 * @param {string} app a key of apps/index.js APPS
 * @returns {{ pid: number, start: (config) => Promise<AppProcess>, kill: () => Promise<void> }}
 */
function forkAppProcess (app) {
  if (!Object.hasOwn(APPS, app)) throw new InvalidArgumentError(`invalid app: expected one of ${Object.keys(APPS).join(', ')}, got ${JSON.stringify(app)}`)
  const child = forkChild(CHILD, { args: [app], callTimeoutMs: 30000 })
  return {
    pid: child.pid,
    /**
     * @param {{ id: string, appOptions?: object, capacity?: object, controllerUrl?: string, clusterToken?: string, enforceOwnership?: boolean, logLevel?: string }} config
     *   appOptions must survive IPC (plain data: no registry, no logger)
     */
    async start (config) {
      const ready = await child.start({ config })
      return {
        ...ready,
        pid: child.pid,
        stats: () => child.call('stats', {}, 10000),
        flush: () => child.call('flush', {}, 10000),
        // a child that does not answer is killed; the run's figures are already taken
        close: () => child.shutdown(15000)
      }
    },
    kill: () => child.close(1000)
  }
}

/**
 * Start `ids.length` app servers, one process each: forked in parallel,
 * started in id order (so a controller sees them register in that order).
 * @param {string} app
 * @param {string[]} ids
 * @param {object} config shared start config (see forkAppProcess().start)
 * @returns {Promise<object[]>} the started processes, in `ids` order
 */
async function startAppProcesses (app, ids, config) {
  const forked = ids.map(() => forkAppProcess(app))
  const started = []
  try {
    for (let i = 0; i < ids.length; i++) started.push(await forked[i].start({ ...config, id: ids[i] }))
    return started
  } catch (err) {
    await Promise.all(forked.map((f) => f.kill()))
    throw err
  }
}

module.exports = { forkAppProcess, startAppProcesses }
