'use strict'

/*
 * The dashboard's member panels (Servers, Cluster state) and the DOM helpers
 * app.js shares. Two forms of the same state (controller/dashboard/state-summary.js):
 *   - rows: `state.servers` and `state.frontends`, one entry per member (small clusters);
 *   - summary: `state.serverSummary` and `state.frontendSummary` in their place
 *     (past 50 members): counts, load and slice histograms, the hottest and
 *     coolest servers, and only the members that need attention.
 * Exposed as window.Chopper.members and window.Chopper.dom; loaded before app.js.
 *
 * Test hooks: #servers carries data-view ("rows" or "summary"); rows are
 * .server[data-server][data-load]; the summary's tables are .top.hot and
 * .top.cool with tr[data-server][data-load], its histograms
 * .histogram[data-histogram] with .bin[data-count], its counts [data-count-of].
 */
;(function () {
  const $ = (sel) => document.querySelector(sel)
  const fmtRate = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2))
  // Two significant digits below 0.1% (a 5,000-server cluster's shares), so they do not all read 0.0%.
  const pct = (f) => (f > 0 && f < 0.001 ? (f * 100).toPrecision(2) : (f * 100).toFixed(f < 0.1 ? 1 : 0)) + '%'

  function el (tag, attrs = {}, ...children) {
    const e = document.createElement(tag)
    for (const [k, v] of Object.entries(attrs)) {
      if (k === 'class') e.className = v
      else if (k === 'text') e.textContent = v
      else if (k.startsWith('data-')) e.setAttribute(k, v)
      else e[k] = v
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c)
    return e
  }

  function badge (text, kind) {
    return el('span', { class: `badge ${kind}`, text })
  }

  function swatch (colour) {
    const sw = el('span', { class: 'swatch' })
    sw.style.background = colour
    return sw
  }

  function facts (sel, obj) {
    const out = []
    for (const [k, v] of Object.entries(obj)) out.push(el('dt', { text: k }), el('dd', { text: String(v) }))
    $(sel).replaceChildren(...out)
  }

  /** `shown` ids, then "and N more" when `total` says some were left out. */
  function listOf (shown, total) {
    if (!shown.length) return null
    const more = total > shown.length ? ` and ${total - shown.length} more` : ''
    return shown.join(', ') + more
  }

  // ---- servers panel ----

  /**
   * @param {{state: object, last: object|undefined, colourOf: (id: string) => string, perSecond: (load: number) => number, unit: string}} view
   *   `last` the newest round; `perSecond` turns a load per period into a rate in `unit`
   */
  function renderServers (view) {
    const box = $('#servers')
    const number = (v) => fmtRate(view.perSecond(v))
    const v = { ...view, number, rate: (x) => `${number(x)} ${view.unit}` }
    if (view.state.serverSummary) {
      box.dataset.view = 'summary'
      $('#servers-hint').textContent = 'too many for a row each: how load and slices spread, the hottest and the coolest'
      box.replaceChildren(...serverSummary(v))
    } else {
      box.dataset.view = 'rows'
      $('#servers-hint').textContent = 'load last round; keyspace share, slices, replicas'
      box.replaceChildren(...serverRows(v))
    }
  }

  function serverRows ({ state: s, last, colourOf, rate }) {
    const ids = Object.keys(s.servers).sort()
    const load = (id) => (last && last.perServer && last.perServer[id] !== undefined ? last.perServer[id] : 0)
    const max = Math.max(1e-9, ...ids.map(load))
    const mean = ids.length ? ids.reduce((a, id) => a + load(id), 0) / ids.length : 0
    const rows = ids.map((id) => {
      const m = s.servers[id]
      const colour = colourOf(id)
      const fill = el('div', { class: 'fill' })
      fill.style.width = `${(100 * load(id)) / max}%`
      fill.style.background = colour
      const meanMark = el('div', { class: 'mean', title: 'mean load' })
      meanMark.style.left = `${(100 * mean) / max}%`
      const shareFill = el('div', { class: 'share-fill' })
      shareFill.style.width = `${100 * m.keyspaceShare}%`
      shareFill.style.background = colour
      return el('div', { class: 'server', 'data-server': id, 'data-load': String(load(id)) },
        el('div', { class: 'name' }, swatch(colour), id),
        el('div', { class: 'track' }, fill, meanMark),
        el('div', {}),
        el('div', { class: 'share-track', title: 'keyspace share' }, shareFill),
        el('div', { class: 'meta' },
          el('span', {}, el('b', { text: m.loadUnknown ? 'unknown' : rate(load(id)) })),
          el('span', {}, 'share ', el('b', { text: pct(m.keyspaceShare) })),
          el('span', {}, el('b', { text: String(m.slices) }), ' slices'),
          el('span', {}, el('b', { text: String(m.replicas || 0) }), ' replicas'),
          m.draining ? badge('draining', 'warn') : null,
          m.loadUnknown ? badge(`load unknown (${m.collectionFailures} failed)`, 'bad') : null
        )
      )
    })
    return rows.length ? rows : [el('p', { class: 'hint', text: 'no app server registered' })]
  }

  function serverSummary ({ state: s, colourOf, rate, number, unit }) {
    const sum = s.serverSummary
    const count = (key, n, label, kind) => el('span', { class: `count${n && kind ? ' ' + kind : ''}`, 'data-count-of': key }, el('b', { text: String(n) }), ` ${label}`)
    const counts = el('div', { class: 'counts' },
      count('count', sum.count, 'servers'),
      count('draining', sum.draining, 'draining', 'warn'),
      count('lagging', sum.lagging, 'lagging pushes', 'warn'),
      count('loadUnknown', sum.loadUnknown, 'load unknown', 'bad'),
      count('slices', sum.slices, 'slices'),
      el('span', { class: 'count' }, 'mean ', el('b', { text: sum.meanLoad === null ? '–' : rate(sum.meanLoad) })))
    const hists = el('div', { class: 'histograms' },
      histogram('load', `servers by load (${unit})`, sum.loadHistogram, number, false),
      histogram('slices', 'servers by slice count', sum.sliceHistogram, String, true))
    const max = sum.hottest.length ? sum.hottest[0].load : 0
    return [
      counts,
      hists,
      topTable('hot', `hottest ${sum.hottest.length}`, sum.hottest, max, colourOf, rate),
      topTable('cool', `coolest ${sum.coolest.length}`, sum.coolest, max, colourOf, rate)
    ]
  }

  /**
   * Horizontal bars, one per bin (state-summary.js histogram): `fmt` formats
   * an edge; `integer` bins hold edges[i] to edges[i + 1] - 1.
   */
  function histogram (key, title, h, fmt, integer) {
    const fig = el('figure', { class: 'histogram', 'data-histogram': key }, el('figcaption', { text: title }))
    if (!h.counts.length) {
      fig.append(el('p', { class: 'hint', text: 'no data yet' }))
      return fig
    }
    const most = Math.max(1, ...h.counts)
    h.counts.forEach((n, i) => {
      const lo = h.edges[i]
      const hi = integer ? h.edges[i + 1] - 1 : h.edges[i + 1]
      const bar = el('span', { class: 'bar' })
      bar.style.width = `${(100 * n) / most}%`
      fig.append(el('div', { class: 'bin', 'data-count': String(n) },
        el('span', { class: 'range', text: hi > lo ? `${fmt(lo)}–${fmt(hi)}` : fmt(lo) }),
        el('span', { class: 'bar-track' }, bar),
        el('b', { text: String(n) })))
    })
    return fig
  }

  function topTable (kind, title, rows, max, colourOf, rate) {
    const body = rows.map((r) => {
      const fill = el('span', { class: 'fill' })
      fill.style.width = `${max > 0 ? (100 * r.load) / max : 0}%`
      fill.style.background = colourOf(r.id)
      return el('tr', { 'data-server': r.id, 'data-load': String(r.load) },
        el('td', {}, swatch(colourOf(r.id)), r.id, r.draining ? badge('draining', 'warn') : null),
        el('td', { class: 'load' }, el('span', { class: 'mini-track' }, fill), rate(r.load)),
        el('td', { text: pct(r.keyspaceShare) }),
        el('td', { text: String(r.slices) }),
        el('td', { text: r.push && r.push.lagging ? `${r.push.acked} (behind)` : String(r.generation) }))
    })
    return el('div', { class: 'top-box' },
      el('h3', { text: title }),
      el('table', { class: `top ${kind}` },
        el('thead', {}, el('tr', {}, ...['server', 'load', 'share', 'slices', 'generation'].map((t) => el('th', { text: t })))),
        el('tbody', {}, ...(body.length ? body : [el('tr', {}, el('td', { colSpan: 5, class: 'hint', text: 'no load reported yet' }))]))))
  }

  // ---- cluster state panel ----

  function renderState ({ state: s, colourOf }) {
    const behind = (g) => (g >= s.generation ? 'current' : `${s.generation - g} behind`)
    const pushCell = (p) => {
      if (!p) return el('td', { text: '–' })
      if (!p.lagging) return el('td', {}, badge('acked', 'ok'))
      // Behind without a failure: the push is in flight (retries follow failures only).
      if (!p.failures) return el('td', {}, badge('pushing', 'warn'), el('small', { text: ` acked ${behind(p.acked)}` }))
      return el('td', {}, badge(`retrying · ${p.failures} failed`, 'bad'), el('small', { text: ` acked ${behind(p.acked)}` }))
    }
    const serverRow = (id, m) => {
      const health = m.draining
        ? badge('draining', 'warn')
        : m.loadUnknown
          ? badge(`load unknown · ${m.collectionFailures} failed`, 'bad')
          : badge('healthy', 'ok')
      const lease = m.leaseRemainingMs > 0 ? `${m.leaseRemainingMs} ms` : 'lapsed'
      const held = m.drainedGeneration === undefined ? `holds ${m.generation}` : `holds ${m.generation}, drained ${m.drainedGeneration}`
      return el('tr', { 'data-member': id },
        el('td', {}, swatch(colourOf(id)), id, el('small', { text: ' app server' })),
        el('td', {}, health),
        el('td', { text: lease }),
        el('td', { text: behind(m.generation), title: held }),
        pushCell(m.push))
    }
    const frontendRow = (id, f) => el('tr', { 'data-member': id },
      el('td', {}, id, el('small', { text: ' front end' })),
      el('td', {}, badge('subscribed', 'ok')),
      el('td', { text: '–' }),
      el('td', { text: f.push && !f.push.lagging ? 'current' : '–' }),
      pushCell(f.push))

    const rows = []
    const notes = []
    if (s.serverSummary) {
      const sum = s.serverSummary
      for (const m of sum.flagged) rows.push(serverRow(m.id, m))
      notes.push(`${sum.count} app servers: ${attention(sum.flagged.length, sum.draining + sum.lagging + sum.loadUnknown)}`)
    } else {
      for (const id of Object.keys(s.servers).sort()) rows.push(serverRow(id, s.servers[id]))
    }
    if (s.frontendSummary) {
      const fs = s.frontendSummary
      for (const f of fs.behind) rows.push(frontendRow(f.id, f))
      notes.push(`${fs.count} front ends: ${attention(fs.behind.length, fs.lagging)}`)
    } else {
      for (const id of Object.keys(s.frontends).sort()) rows.push(frontendRow(id, s.frontends[id]))
    }
    if (notes.length) rows.push(el('tr', { class: 'more' }, el('td', { colSpan: 5, text: notes.join('; ') })))
    $('#members tbody').replaceChildren(...rows)

    const h = s.handoff
    const waiting = Object.keys(h.waitingFor)
    facts('#handoff', {
      mode: h.mode,
      'in progress': !h.inProgress ? 'no' : waiting.length === 0 && h.batchPending ? 'yes, a membership batch waits for its window' : `yes, waiting for ${listOf(waiting, h.waitingForCount ?? waiting.length) || 'nobody'}`,
      revokes: h.revokes,
      grants: h.grants,
      direct: h.direct,
      'lease lapses': h.leaseLapses
    })
    facts('#strategy-options', { strategy: s.strategy, period: `${s.periodMs} ms`, lease: `${s.leaseMs} ms`, ...s.strategyOptions })
    const lagging = s.pushes.lagging.map((l) => l.target.replace(/^(server|frontend):/, ''))
    facts('#pushes', {
      generation: s.generation,
      pushes: s.pushes.pushes,
      failures: s.pushes.failures,
      'refused stale': s.pushes.rejected,
      behind: listOf(lagging, s.pushes.laggingCount ?? lagging.length) || 'none'
    })
  }

  // `flags` counts flags, not members (a member may be draining and lagging): say "shown", not a total.
  function attention (shown, flags) {
    if (!flags) return 'all healthy, none listed'
    return `${shown} needing attention listed above (draining, load unknown or behind)`
  }

  window.Chopper = Object.assign(window.Chopper || {}, {
    dom: { el, badge, swatch, fmtRate, pct },
    members: { renderServers, renderState }
  })
})()
