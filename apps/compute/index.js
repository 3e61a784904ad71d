'use strict'

const express = require('express')
const { InvalidArgumentError, MethodNotAllowedError } = require('../../core/errors')

/** Every option of the compute app and its default. */
const defaults = Object.freeze({
  defaultN: 1000, // the paper's N (section 6.1)
  maxN: 20000,
  // false: validate and answer without running the loop (result: null). For
  // a harness that supplies the time itself, such as the experiments'
  // capacity model (bench/lib/capacity.js), so modelled servers do not burn
  // the shared CPU.
  work: true
})

/**
 * The paper's O(N^2) summation (section 6.1), done by looping on purpose:
 * the point is to burn CPU in proportion to N^2.
 */
function quadraticSum (n) {
  let sum = 0
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) sum = (sum + ((i * j) % 7)) % 1000000007
  }
  return sum
}

/**
 * The compute app: GET /compute?key=K&n=N runs quadraticSum(N).
 * @returns {Promise<{ app, cost, close }>} in the app contract appserver-lib hosts
 */
async function create (options = {}) {
  const { defaultN, maxN, work } = { ...defaults, ...withoutUndefined(options) }
  if (!Number.isInteger(defaultN) || defaultN < 0) throw new InvalidArgumentError('invalid defaultN: expected an integer >= 0')
  if (!Number.isInteger(maxN) || maxN < defaultN) throw new InvalidArgumentError('invalid maxN: expected an integer >= defaultN')
  if (typeof work !== 'boolean') throw new InvalidArgumentError(`invalid work: expected a boolean, got ${JSON.stringify(work)}`)
  const router = express.Router()
  router.get('/compute', (req, res, next) => {
    const raw = req.query.n
    const n = raw === undefined ? defaultN : Number(raw)
    if (!Number.isInteger(n) || n < 0 || n > maxN) {
      return next(new InvalidArgumentError(`invalid n: expected an integer in [0, ${maxN}]`))
    }
    const t0 = process.hrtime.bigint()
    const result = work ? quadraticSum(n) : null
    res.json({ key: req.query.key ?? req.headers['x-chopper-key'], n, result, micros: Number(process.hrtime.bigint() - t0) / 1000 })
  })
  router.all('/compute', (req, res, next) => {
    res.setHeader('Allow', 'GET, HEAD')
    next(new MethodNotAllowedError(`method ${req.method} not allowed on /compute; use GET`))
  })
  // CPU-bound: its load is the CPU time of the loop, not wall time (which
  // includes waiting behind other requests on the event loop).
  return { app: router, cost: work ? 'cpu' : undefined, close: async () => {} }
}

function withoutUndefined (o) {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined))
}

module.exports = { create, defaults, quadraticSum }
