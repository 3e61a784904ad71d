'use strict'

const { clientChecks } = require('../../bench/experiments/client-checks')

/** A contender as the report reads it. */
const c = (name, p99, { hitRate, stale } = {}) => ({
  name,
  ok: true,
  latencyMs: { p99 },
  cache: hitRate === undefined ? null : { hitRate },
  staleReads: stale === undefined ? null : { stale, checked: 100 }
})

/** Scenarios 1 (KV) and 5 (compute) with the client at `client` ms p99 and `stale` stale reads. */
function doc ({ client = 40, stale = 0, hitRate = 0.9 } = {}) {
  return {
    scenarios: [
      { scenario: '1-kv-hot-keys', contenders: [c('chopper-client', client, { hitRate, stale }), c('haproxy-bounded', 50, { hitRate: 0.88, stale: 7846 }), c('haproxy-random2', 60, { hitRate: 0.5, stale: 9000 })] },
      { scenario: '5-compute-hot-keys', contenders: [c('chopper-client', client), c('haproxy-bounded', 50), c('haproxy-random2', 60)] }
    ]
  }
}

describe('issue 39 checks for the chopper-client contender', () => {
  test('every check passes on data that meets every goal, and each is marked done-when for issue 39', () => {
    const checks = clientChecks(doc())
    expect(checks.map((h) => h.id)).toEqual(['1-kv-hot-keys-client-p99-vs-bounded', '5-compute-hot-keys-client-p99-vs-bounded', '1-kv-hot-keys-client-hit-rate-vs-bounded', 'client-no-stale-reads', 'client-p99-vs-random2'])
    for (const h of checks) expect(h).toMatchObject({ doneWhen: true, issue: 39, met: true })
  })

  test('each check fails when its own figure misses', () => {
    const failing = (d) => clientChecks(d).filter((h) => !h.met).map((h) => h.id)
    expect(failing(doc({ client: 55 }))).toEqual(['1-kv-hot-keys-client-p99-vs-bounded', '5-compute-hot-keys-client-p99-vs-bounded'])
    expect(failing(doc({ client: 70 }))).toContain('client-p99-vs-random2')
    expect(failing(doc({ hitRate: 0.8 }))).toEqual(['1-kv-hot-keys-client-hit-rate-vs-bounded'])
    expect(failing(doc({ stale: 1 }))).toEqual(['client-no-stale-reads'])
  })

  test('without the client in the run there is no check', () => {
    const d = doc()
    for (const s of d.scenarios) s.contenders = s.contenders.filter((x) => x.name !== 'chopper-client')
    expect(clientChecks(d)).toEqual([])
  })
})
