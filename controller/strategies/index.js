'use strict'

const { InvalidArgumentError } = require('../../core/errors')
const chopper = require('./chopper')
const consistentHash = require('./consistent-hash')
const boundedConsistentHash = require('./bounded-consistent-hash')
const neighbourOffload = require('./neighbour-offload')
const slicerWeighted = require('./slicer-weighted')

/**
 * Balancing strategies by name. Each is a set of pure functions:
 * initial, rebalance, addServer, removeServer, and their batch forms
 * addServers, removeServers (./batch.js), plus `name` and `defaults`.
 */
const strategies = Object.freeze({
  [chopper.name]: chopper,
  [consistentHash.name]: consistentHash,
  [boundedConsistentHash.name]: boundedConsistentHash,
  [neighbourOffload.name]: neighbourOffload,
  [slicerWeighted.name]: slicerWeighted
})

/**
 * @param {string} name e.g. 'chopper' or 'consistent-hash'
 * @returns {object} the strategy module
 */
function getStrategy (name) {
  if (typeof name !== 'string' || !Object.hasOwn(strategies, name)) {
    throw new InvalidArgumentError(`unknown strategy ${JSON.stringify(name)} (valid strategies: ${Object.keys(strategies).join(', ')})`)
  }
  return strategies[name]
}

module.exports = { strategies, getStrategy }
