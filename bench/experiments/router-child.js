'use strict'

/**
 * A Chopper controller or front end in a process of its own (router-process.js
 * forks it), as they are deployed: the controller's rounds (strategy, state
 * save, pushes) then do not stall the front ends' event loop, and each front
 * end has its own, as the paper's front-end machines did. argv[2] says which.
 */
const pino = require('pino')
const { serveChild } = require('../lib/child')

const role = process.argv[2]
let component = null
let closing = null

function loggerOf (level) {
  return level ? pino({ level }, pino.destination({ fd: 2, sync: true })) : undefined
}

async function close () {
  if (!component) return
  await component.close()
  component = null
}

const handlers = {
  async start ({ options, logLevel }) {
    const logger = loggerOf(logLevel)
    if (role === 'controller') {
      const { createController } = require('../../controller')
      component = createController({ ...options, ...(logger ? { logger } : {}) })
      const { url } = await component.start()
      return { url }
    }
    const { createFrontend } = require('../../frontend')
    component = createFrontend({ ...options, ...(logger ? { logger } : {}) })
    const urls = await component.start()
    return { id: component.id, ...urls }
  },
  /** The controller's status (controller.status()); a front end's: the generation it routes with. */
  status () {
    if (!component) return null
    return role === 'controller' ? component.status() : { generation: component.table.generation }
  },
  async close () {
    closing = closing || close()
    await closing
  }
}

if (role !== 'controller' && role !== 'frontend') {
  process.stderr.write(`router-child: argv[2] must be controller or frontend, got ${JSON.stringify(role)}\n`)
  process.exit(2)
}
serveChild(handlers)
