'use strict'

/**
 * The chopper strategy with `minReplicas: 1` unless a test says otherwise:
 * the tests written for single-owner slices and for hot-slice replication
 * (which replicates only what is hot) predate the default of 2 (a standby
 * replica for every slice), which test/strategies/replication.test.js covers
 * on its own.
 */
const chopper = require('../../controller/strategies/chopper')

// (anything but an options object goes through untouched, so validation tests still see it)
const one = (opts) => (opts === undefined || opts === null ? { minReplicas: 1 } : typeof opts === 'object' && !Array.isArray(opts) ? { minReplicas: 1, ...opts } : opts)

module.exports = {
  ...chopper,
  initial: (servers, opts) => chopper.initial(servers, one(opts)),
  rebalance: (a, loads, opts, inputs) => chopper.rebalance(a, loads, one(opts), inputs),
  chopperRound: (a, loads, opts, inputs) => chopper.chopperRound(a, loads, one(opts), inputs),
  addServer: (a, id, url, loads, opts, inputs) => chopper.addServer(a, id, url, loads, one(opts), inputs),
  removeServer: (a, id, loads, opts, inputs) => chopper.removeServer(a, id, loads, one(opts), inputs)
}
