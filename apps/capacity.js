'use strict'

// TEMPORARY shim (issue 10): the capacity model moved to bench/lib/capacity.js
// and wraps an app from outside (withCapacity). This keeps apps/kv-cache's old
// built-in wiring loading until its own change removes it. Delete this file
// once nothing requires 'apps/capacity'.
const capacity = require('../bench/lib/capacity')

function createCapacity (options) {
  const o = capacity.resolveCapacityOptions(options)
  if (o.mode === 'cpu') return { options: o, modelled: false, server: null, serve: async () => {}, close () {} }
  const server = new capacity.FifoServer({ maxQueue: o.maxQueue })
  return { options: o, modelled: true, server, serve: (ms) => server.serve(ms), close: () => server.flush() }
}

module.exports = { ...capacity, createCapacity }
