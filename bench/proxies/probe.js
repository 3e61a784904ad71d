'use strict'

const http = require('node:http')
const { pollUntil } = require('../../core/poll')

/**
 * One GET on a fresh connection; resolves with the status code, or null when
 * the request fails. A fresh connection each time so that, behind a port
 * shared by several processes, repeated probes reach different ones.
 */
function probe (url, timeoutMs = 2000) {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, timeout: timeoutMs }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
      res.on('error', () => resolve(null))
    })
    req.on('timeout', () => req.destroy())
    req.on('error', () => resolve(null))
  })
}

/**
 * Wait until `url` answers 200 `times` times in a row, or `gaveUp()` says to
 * stop (the child exited), or the deadline passes.
 * @returns {Promise<boolean>} false when gaveUp() ended the wait
 */
async function waitServing (url, { times = 1, timeoutMs = 10000, gaveUp = () => false, what = url } = {}) {
  let streak = 0
  return pollUntil(async () => {
    if (gaveUp()) return 'gave-up'
    streak = (await probe(url)) === 200 ? streak + 1 : 0
    return streak >= times
  }, { timeoutMs, intervalMs: 20, what: `${what} to answer 200` }).then((r) => r !== 'gave-up')
}

module.exports = { probe, waitServing }
