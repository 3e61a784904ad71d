'use strict'

const express = require('express')
const { InvalidArgumentError, MethodNotAllowedError } = require('../../core/errors')
const { createCapacity, computeServiceMs } = require('../capacity')

/** Every option of the compute app and its default. */
const defaults = Object.freeze({
  defaultN: 1000, // the paper's N (section 6.1)
  maxN: 20000,
  capacity: undefined // apps/capacity.js options; undefined = { mode: 'cpu' }, the real loop
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
 * With `capacity: { mode: 'model' }` the loop is not run: the request occupies
 * this server's modelled FIFO queue for the loop's modelled time instead.
 * @returns {Promise<{ app, capacity, close }>} in the app contract appserver-lib hosts
 */
async function create (options = {}) {
  const { defaultN, maxN, capacity: capacityOptions } = { ...defaults, ...options }
  if (!Number.isInteger(defaultN) || defaultN < 0) throw new InvalidArgumentError('invalid defaultN: expected an integer >= 0')
  if (!Number.isInteger(maxN) || maxN < defaultN) throw new InvalidArgumentError('invalid maxN: expected an integer >= defaultN')
  const capacity = createCapacity(capacityOptions)
  const router = express.Router()
  router.get('/compute', async (req, res, next) => {
    const raw = req.query.n
    const n = raw === undefined ? defaultN : Number(raw)
    if (!Number.isInteger(n) || n < 0 || n > maxN) {
      return next(new InvalidArgumentError(`invalid n: expected an integer in [0, ${maxN}]`))
    }
    const t0 = process.hrtime.bigint()
    if (capacity.modelled) {
      // The modelled server is busy for the loop's time; the shared CPU is not.
      await capacity.serve(computeServiceMs(n, capacity.options))
      return res.json({ key: req.query.key ?? req.headers['x-chopper-key'], n, result: null, modelled: true, micros: Number(process.hrtime.bigint() - t0) / 1000 })
    }
    const result = quadraticSum(n)
    res.json({ key: req.query.key ?? req.headers['x-chopper-key'], n, result, micros: Number(process.hrtime.bigint() - t0) / 1000 })
  })
  router.all('/compute', (req, res, next) => {
    res.setHeader('Allow', 'GET, HEAD')
    next(new MethodNotAllowedError(`method ${req.method} not allowed on /compute; use GET`))
  })
  return { app: router, capacity, close: async () => capacity.close() }
}

module.exports = { create, defaults, quadraticSum }
