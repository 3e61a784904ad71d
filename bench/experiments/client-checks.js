'use strict'

/**
 * The done-when checks of issue 39 for the `chopper-client` contender (the
 * load generator routes through @chopper/client, no front end), computed
 * from an experiments document: in scenarios 1 and 5 its p99 <= HAProxy
 * bounded loads'; in scenario 1 its cache hit rate >= theirs; 0 stale reads
 * on every KV scenario; on every scenario its p99 <= HAProxy random(2)'s.
 * A check whose scenario or contenders are not in the run is left out.
 * @returns {{ id, label, value, goal, met: boolean, text, doneWhen: true, issue: 39 }[]}
 */
function clientChecks (doc) {
  const out = []
  const check = (item) => out.push({ doneWhen: true, issue: 39, ...item })
  const get = (name) => doc.scenarios.find((s) => s.scenario === name)
  const contender = (s, name) => s && s.contenders.find((c) => c.name === name && c.ok)
  const ms = (v) => (v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v >= 10 ? v.toFixed(0) : v.toFixed(1)} ms`)
  const pct = (v) => `${(v * 100).toFixed(1)} %`
  const ratio = (a, b) => Math.round((a / b) * 100) / 100

  for (const name of ['1-kv-hot-keys', '5-compute-hot-keys']) {
    const ours = contender(get(name), 'chopper-client')
    const them = contender(get(name), 'haproxy-bounded')
    if (!ours || !them) continue
    check({
      id: `${name}-client-p99-vs-bounded`,
      label: `${name}: Chopper client p99 <= HAProxy bounded-load p99`,
      value: [ours.latencyMs.p99, them.latencyMs.p99],
      goal: '<= HAProxy bounded-load p99',
      met: ours.latencyMs.p99 <= them.latencyMs.p99,
      text: `${ms(ours.latencyMs.p99)} vs ${ms(them.latencyMs.p99)}`
    })
  }
  {
    const ours = contender(get('1-kv-hot-keys'), 'chopper-client')
    const them = contender(get('1-kv-hot-keys'), 'haproxy-bounded')
    if (ours && them && ours.cache && them.cache) {
      check({
        id: '1-kv-hot-keys-client-hit-rate-vs-bounded',
        label: '1-kv-hot-keys: Chopper client cache hit rate >= HAProxy bounded-load hit rate',
        value: [ours.cache.hitRate, them.cache.hitRate],
        goal: '>= HAProxy bounded-load hit rate',
        met: ours.cache.hitRate >= them.cache.hitRate,
        text: `${pct(ours.cache.hitRate)} vs ${pct(them.cache.hitRate)}`
      })
    }
  }
  {
    const kv = doc.scenarios.map((s) => ({ s, c: contender(s, 'chopper-client') })).filter((x) => x.c && x.c.staleReads)
    if (kv.length) {
      const stale = kv.map((x) => x.c.staleReads.stale)
      check({
        id: 'client-no-stale-reads',
        label: `every KV scenario (${kv.length}): Chopper client serves 0 stale reads`,
        value: stale,
        goal: '0 each',
        met: stale.every((n) => n === 0),
        text: kv.map((x) => `${x.s.scenario.split('-')[0]}: ${x.c.staleReads.stale} of ${x.c.staleReads.checked}`).join(', ')
      })
    }
  }
  {
    const rows = doc.scenarios.map((s) => ({ s, ours: contender(s, 'chopper-client'), them: contender(s, 'haproxy-random2') })).filter((x) => x.ours && x.them)
    if (rows.length) {
      const bad = rows.filter((x) => !(x.ours.latencyMs.p99 <= x.them.latencyMs.p99))
      check({
        id: 'client-p99-vs-random2',
        label: `every scenario (${rows.length}): Chopper client p99 <= HAProxy random(2) p99`,
        value: rows.map((x) => ratio(x.ours.latencyMs.p99, x.them.latencyMs.p99)),
        goal: '<= 1 each',
        met: bad.length === 0,
        text: rows.map((x) => `${x.s.scenario.split('-')[0]}: ${ratio(x.ours.latencyMs.p99, x.them.latencyMs.p99)}×`).join(', ') + (bad.length ? `; missed in ${bad.map((x) => x.s.scenario).join(', ')}` : '')
      })
    }
  }
  return out
}

module.exports = { clientChecks }
