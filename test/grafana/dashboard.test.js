'use strict'

const { Registry } = require('prom-client')
const { createController } = require('../../controller')
const { createFrontend } = require('../../frontend')
const { loadApp, startApp } = require('../../apps')
const { createMetrics: createKvCacheMetrics } = require('../../apps/kv-cache/metrics')
const { pollUntil } = require('../../core/poll')
const { call } = require('../helpers/http')
const { analyse, metricNames, tokenize, AGGREGATIONS } = require('./promql')

const GROUPING = ['by', 'without']
const dashboard = require('../../grafana/chopper.json')

// Labels Prometheus itself puts on every series it scrapes.
const TARGET_LABELS = ['instance', 'job']
// Series a histogram or summary family is exported as.
const SUFFIXES = { histogram: ['_bucket', '_sum', '_count'], summary: ['_sum', '_count'] }

function panels (d) {
  return d.panels.flatMap((p) => [p, ...(p.panels || [])]).filter((p) => p.type !== 'row')
}

function queries (d) {
  return panels(d).flatMap((p) => (p.targets || []).map((t) => ({ panel: p.title, expr: t.expr })))
}

/**
 * Families in Prometheus text exposition: `# TYPE` lines, and each sample with
 * its label names, under the family it belongs to (x_bucket under x).
 */
function parseExposition (text, families = new Map()) {
  const family = (name) => {
    if (!families.has(name)) families.set(name, { name, type: 'untyped', labels: new Set(), samples: 0 })
    return families.get(name)
  }
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line)
    if (type) family(type[1]).type = type[2]
    if (line === '' || line.startsWith('#')) continue
    const sample = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? \S+$/.exec(line)
    if (!sample) throw new Error(`not a sample line: ${line}`)
    const [, name, labels = ''] = sample
    const base = Object.values(SUFFIXES).flat().map((s) => name.endsWith(s) && name.slice(0, -s.length)).find((b) => b && families.has(b) && SUFFIXES[families.get(b).type])
    const f = family(base || name)
    f.samples++
    for (const [, label] of labels.matchAll(/([a-zA-Z_]\w*)="(?:[^"\\]|\\.)*"/g)) if (label !== 'le' && label !== 'quantile') f.labels.add(label)
  }
  return families
}

/** The series a query names, resolved to an exported family, or null. */
function resolve (name, inventory) {
  const f = inventory.get(name)
  if (f && !SUFFIXES[f.type]) return { family: f, labels: [...f.labels, ...TARGET_LABELS] }
  for (const [type, suffixes] of Object.entries(SUFFIXES)) {
    for (const suffix of suffixes) {
      const base = name.endsWith(suffix) && inventory.get(name.slice(0, -suffix.length))
      if (base && base.type === type) return { family: base, suffix, labels: [...base.labels, ...TARGET_LABELS, ...(suffix === '_bucket' ? ['le'] : [])] }
    }
  }
  return null
}

/** Everything wrong with `qs` against what the components export; [] when nothing is. */
function problems (qs, inventory) {
  const out = []
  for (const { panel, expr } of qs) {
    const where = `${panel}: ${expr}\n  `
    let parsed
    try {
      parsed = analyse(expr)
    } catch (err) {
      out.push(where + err.message)
      continue
    }
    const { selectors, groupings, calls, tokens } = parsed
    if (selectors.length === 0) out.push(where + 'reads no metric')
    const resolved = new Map()
    for (const s of selectors) {
      const r = resolve(s.name, inventory)
      if (!r) {
        out.push(where + `${s.name} is exported by no component`)
        continue
      }
      resolved.set(s, r)
      if (r.family.labels.size === 0 && r.family.samples === 0) out.push(where + `${s.name} is declared but has no sample`)
      for (const label of s.labels) if (!r.labels.includes(label)) out.push(where + `${s.name} has no label ${label}`)
    }
    for (const g of groupings) {
      const inScope = [...resolved].filter(([s]) => s.index > g.from && s.index < g.to).map(([, r]) => r)
      for (const label of g.labels) {
        if (!inScope.some((r) => r.labels.includes(label))) out.push(where + `${g.keyword} (${label}): no metric it aggregates has that label`)
      }
    }
    for (const c of calls.filter((x) => x.name === 'histogram_quantile')) {
      const q = c.args[0]
      if (!q || q.type !== 'number' || Number(q.value) < 0 || Number(q.value) > 1 || c.args[1].value !== ',') out.push(where + 'histogram_quantile needs a quantile from 0 to 1 first')
      const buckets = [...resolved].filter(([s, r]) => s.index > c.from && s.index < c.to && r.suffix === '_bucket')
      if (buckets.length === 0) out.push(where + 'histogram_quantile over no histogram _bucket series')
      // Every aggregation under it must keep `le`: by (..., le), or without (...) not naming it.
      const keepsLe = calls.filter((a) => AGGREGATIONS.has(a.name) && a.from > c.from && a.to < c.to).every((a) => {
        const g = groupings.find((x) => GROUPING.includes(x.keyword) && x.from === a.from && x.to === a.to)
        return g && (g.keyword === 'by' ? g.labels.includes('le') : !g.labels.includes('le'))
      })
      if (!keepsLe) out.push(where + 'histogram_quantile over an aggregation that drops le')
    }
    if (tokens.some((t) => t.type === 'variable' && !['$__rate_interval', '$__interval', '$__range'].includes(t.value))) out.push(where + 'uses a dashboard variable the dashboard does not define')
  }
  return out
}

describe('grafana/chopper.json', () => {
  test('imports cleanly: one Prometheus datasource input, used by every panel and query', () => {
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(39)
    expect(dashboard.uid).toBe('chopper')
    expect(dashboard.id).toBeNull()
    expect(dashboard.__inputs).toEqual([expect.objectContaining({ name: 'DS_PROMETHEUS', type: 'datasource', pluginId: 'prometheus' })])
    const all = panels(dashboard)
    expect(all.length).toBeGreaterThan(20)
    const ids = dashboard.panels.flatMap((p) => [p, ...(p.panels || [])]).map((p) => p.id)
    expect(new Set(ids).size).toBe(ids.length)
    for (const p of all) {
      expect([p.title, p.datasource]).toEqual([p.title, { type: 'prometheus', uid: '${DS_PROMETHEUS}' }]) // eslint-disable-line no-template-curly-in-string
      expect(p.gridPos.x + p.gridPos.w).toBeLessThanOrEqual(24)
      expect(p.targets.length).toBeGreaterThan(0)
      for (const t of p.targets) {
        expect(t.datasource).toEqual(p.datasource)
        expect(typeof t.expr).toBe('string')
      }
    }
  })

  test('the PromQL reader finds metric names, matchers and groupings', () => {
    expect(tokenize('rate(x_total{a="b"}[5m]) * 60').map((t) => t.type)).toEqual(['ident', 'punct', 'ident', 'punct', 'ident', 'punct', 'string', 'punct', 'punct', 'number', 'punct', 'punct', 'punct', 'number'])
    expect(metricNames('histogram_quantile(0.9, sum by (le) (rate(a_seconds_bucket{job=~"x|y", code!="500"}[$__rate_interval])))')).toEqual(['a_seconds_bucket'])
    expect(metricNames('scalar(max(gen)) - other_gen')).toEqual(['gen', 'other_gen'])
    expect(metricNames('sum(rate(a_total[1m])) by (code) / on (code) group_left sum(b_total) > bool 0 or vector(0)')).toEqual(['a_total', 'b_total'])
    const { selectors, groupings } = analyse('sum without (instance) (rate(a_total{code="200"}[1m])) + sum(c) by (x)')
    expect(selectors.map((s) => [s.name, s.labels])).toEqual([['a_total', ['code']], ['c', []]])
    expect(groupings.map((g) => [g.keyword, g.labels])).toEqual([['without', ['instance']], ['by', ['x']]])
    expect(() => analyse('sum(rte(a_total[1m]))')).toThrow(/unknown function rte/)
    expect(() => analyse('sum(rate(a_total[1m])')).toThrow(/unclosed \(/)
  })

  describe('against real components', () => {
    const closers = []
    afterEach(async () => {
      while (closers.length) await closers.pop()()
    })

    /**
     * A controller, one compute app server and a front end on port 0, a few
     * requests through the front end, then every /metrics scraped; kv-cache's
     * metrics (which live in its app server's registry) from a fresh registry.
     */
    async function scrape (url) {
      const r = await call(url)
      expect([url, r.status, r.headers['content-type']]).toEqual([url, 200, expect.stringMatching(/^text\/plain/)])
      return r.body
    }

    async function scrapeEverything () {
      const controller = createController({ periodMs: 100, startupFenceMs: 0 })
      const { url: controllerUrl } = await controller.start()
      closers.push(() => controller.close())
      const app = await startApp(loadApp('compute'), { id: 'app-1', registry: new Registry(), controllerUrl })
      closers.push(() => app.close())
      const fe = createFrontend({ id: 'fe-1', controllerUrl, pullIntervalMs: 0 })
      const { url } = await fe.start()
      closers.push(() => fe.close())
      await pollUntil(() => {
        const a = controller.assignment
        return a && fe.table.generation === a.generation && app.server.guard.generation === a.generation
      }, { what: 'the front end and the app server to hold the assignment' })
      for (let i = 0; i < 5; i++) expect((await call(`${url}/compute?key=k${i}&n=10`)).status).toBe(200)
      await pollUntil(() => controller.status().rounds.length > 0, { what: 'a balancing round' })

      const kvRegistry = new Registry()
      createKvCacheMetrics(kvRegistry)
      // Where Prometheus scrapes each one (grafana/README.md): a single-process
      // front end serves /metrics on its data port only.
      const texts = {
        controller: await scrape(`${controllerUrl}/metrics`),
        'front end': await scrape(`${url}/metrics`),
        'app server': await scrape(`${app.controlUrl}/metrics`),
        'kv-cache': await kvRegistry.metrics()
      }
      const inventory = new Map()
      for (const text of Object.values(texts)) parseExposition(text, inventory)
      // Label names of families with no sample yet (nothing has been retried,
      // fenced, ...), from the registries that serve them.
      for (const registry of [controller.registry, fe.metrics.registry, app.server.registry, kvRegistry]) {
        for (const m of registry.getMetricsAsArray()) {
          if (inventory.has(m.name)) for (const l of m.labelNames) inventory.get(m.name).labels.add(l)
        }
      }
      return { inventory, texts }
    }

    test('every metric, label and histogram the dashboard queries is exported by some component', async () => {
      const { inventory, texts } = await scrapeEverything()
      for (const [name, text] of Object.entries(texts)) expect([name, text]).toEqual([name, expect.stringMatching(/^# HELP chopper_/m)])
      // The requests just sent are there, by status code, in the latency histogram too.
      expect(texts['front end']).toMatch(/^chopper_frontend_requests_total\{code="200"\} 5$/m)
      expect(texts['front end']).toMatch(/^chopper_frontend_request_duration_seconds_count 5$/m)
      expect(texts['app server']).toMatch(/^chopper_appserver_requests_admitted 5$/m)

      const qs = queries(dashboard)
      expect(problems(qs, inventory)).toEqual([])

      // Each component the dashboard has a section for is queried.
      const queried = new Set(qs.flatMap(({ expr }) => metricNames(expr)).map((n) => resolve(n, inventory).family.name))
      for (const prefix of ['chopper_frontend_', 'chopper_controller_', 'chopper_appserver_', 'chopper_kv_']) {
        expect([prefix, [...queried].some((n) => n.startsWith(prefix))]).toEqual([prefix, true])
      }
      expect([...queried]).toEqual(expect.arrayContaining([
        'chopper_frontend_requests_total', 'chopper_frontend_request_duration_seconds', 'chopper_frontend_misdirected_total',
        'chopper_frontend_retries_total', 'chopper_frontend_upstream_errors_total', 'chopper_controller_imbalance',
        'chopper_controller_key_churn_total', 'chopper_controller_generation', 'chopper_controller_rounds_total',
        'chopper_controller_evictions_total', 'chopper_controller_lease_expiries_total', 'chopper_controller_handoffs_total',
        'chopper_controller_push_failures', 'chopper_controller_servers', 'chopper_appserver_requests_admitted',
        'chopper_appserver_requests_misdirected', 'chopper_appserver_requests_held', 'chopper_appserver_requests_lease_refused',
        'chopper_appserver_lease_valid', 'chopper_appserver_generation', 'chopper_kv_cache_hits_total',
        'chopper_kv_cache_misses_total', 'chopper_kv_fenced_writes_total', 'chopper_kv_cache_degraded'
      ]))

      // And the check itself catches what it is for.
      const broken = [
        'rate(chopper_frontend_request_total[5m])', // misspelt
        'sum by (status) (rate(chopper_frontend_requests_total[5m]))', // the label is "code"
        'rate(chopper_frontend_request_duration_seconds[5m])', // a histogram has no bare series
        'rate(chopper_controller_imbalance_bucket[5m])', // a gauge has no buckets
        'histogram_quantile(0.99, sum(rate(chopper_frontend_request_duration_seconds_bucket[5m])))', // le dropped
        'histogram_quantile(99, sum by (le) (rate(chopper_frontend_request_duration_seconds_bucket[5m])))',
        'chopper_appserver_generation{serverId="app-1"}', // no such label
        'rate(chopper_kv_cache_hits_total[$window])' // undefined variable
      ]
      const found = problems(broken.map((expr) => ({ panel: 'broken', expr })), inventory)
      for (const expr of broken) expect([expr, found.some((p) => p.includes(expr))]).toEqual([expr, true])
    })
  })
})
