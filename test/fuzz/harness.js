'use strict'

const { FuzzClient } = require('../../fuzz/http-client')
const { TARGETS } = require('../../fuzz/targets')
const { SURFACES } = require('../../fuzz/surfaces')
const { runComponent } = require('../../fuzz/runner')
const { loadClusterAuth } = require('../../fuzz/auth')

const TOKEN = 'test-fuzz-cluster-token-0123456789'

/**
 * The short fuzz run `npm test` does for one component: each of its surfaces
 * with `perSurface` calls (npm run fuzz runs the full count), without a
 * cluster token and, when core/cluster-auth.js is there, with one.
 * @returns {Promise<object[]>} runComponent's results, one per mode, with `signed`
 */
async function shortRun (name, { perSurface = 200, signedPerSurface = 80 } = {}) {
  const client = new FuzzClient({ timeoutMs: 10000 })
  const modes = loadClusterAuth() ? [[undefined, perSurface], [TOKEN, signedPerSurface]] : [[undefined, perSurface]]
  const out = []
  try {
    for (const [clusterToken, n] of modes) {
      const result = await runComponent(() => TARGETS[name]({ client, clusterToken }), SURFACES[name], { client, perSurface: n, batchMax: 8 })
      out.push({ signed: clusterToken !== undefined, ...result })
    }
  } finally {
    await client.close()
  }
  return out
}

/** The failures as one readable message (seed and counterexample included). */
function describeFailures (result) {
  return result.failures.map((f) => `${f.component} / ${f.surface} (seed ${f.seed}, path ${f.path}):\n${f.firstFault || f.error}`).join('\n\n')
}

/** What every short run must show: every malformed call refused with a 4xx JSON error, legit calls served. */
function expectClean (results, { minCallsPerMode }) {
  for (const r of results) {
    expect(describeFailures(r)).toBe('')
    expect(r.calls).toBeGreaterThanOrEqual(minCallsPerMode)
    expect(r.status4xx).toBe(r.calls)
    expect(r.status5xx + r.timeouts + r.transport + r.badBody).toBe(0)
    expect(r.legitOk).toBeGreaterThan(0)
    expect(r.legitFailed).toBe(0)
    expect(r.restarts).toBe(0)
  }
}

module.exports = { shortRun, describeFailures, expectClean }
