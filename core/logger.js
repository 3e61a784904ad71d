'use strict'

const pino = require('pino')

/** Silent logger: the default for every library-level component. */
const silent = pino({ level: 'silent' })

/**
 * A child logger for one component (`{ component: 'controller' }`).
 * @param {string} component
 * @param {import('pino').Logger} [parent] defaults to silent
 */
function componentLogger (component, parent = silent) {
  return parent.child({ component })
}

module.exports = { silent, componentLogger }
