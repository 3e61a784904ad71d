'use strict'

/* global EventSource */

/*
 * The controller dashboard: one EventSource on /v1/events (a `snapshot`, then
 * a `round` per balancing round and `state` on membership or push changes),
 * drawn with a canvas (the heatmap) and plain SVG and DOM (the rest). No build
 * step and nothing loaded from elsewhere.
 *
 * Test hooks: the heatmap canvas carries data-columns, data-nonzero-cells,
 * data-moved-cells, data-loaded-layouts and data-layout (see drawHeatmap).
 */
;(function () {
  const $ = (sel) => document.querySelector(sel)
  const { el, fmtRate, pct } = window.Chopper.dom // members.js, loaded first
  const members = window.Chopper.members
  const SVG = 'http://www.w3.org/2000/svg'
  // Margins shared by the heatmap and the trend charts, so their rounds line up.
  const M = { l: 76, r: 30, t: 6, b: 20 }
  const BG = '#0b0e14'
  const EMPTY = '#10141b'
  const MOVED = '#5ef1ff'
  const EDGE = 'rgba(255, 255, 255, 0.55)'
  // Inferno, sampled: dark for cold, bright for hot (perceptually ordered, colour-blind safe).
  const INFERNO = [[0, 0, 4], [40, 11, 84], [101, 21, 110], [159, 42, 99], [212, 72, 66], [245, 125, 21], [250, 193, 39], [252, 255, 164]]
  const SERVER_COLOURS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#b07aa1', '#76b7b2', '#edc948', '#ff9da7', '#9c755f', '#bab0ac']

  const model = {
    ready: false,
    keyspaceSize: 2 ** 32,
    buckets: 256,
    historySize: 120,
    state: null,
    rounds: [],
    columns: [],
    mode: 'load'
  }
  const colours = new Map() // server id -> colour, in order of first appearance
  const LUT = buildLut(INFERNO, 256)
  let geometry = null // the last heatmap layout, for the tooltip
  let frame = 0

  // ---- data ----

  function connect () {
    const es = new EventSource('/v1/events')
    const conn = $('#conn')
    const setConn = (state, text) => { conn.dataset.state = state; conn.textContent = text }
    es.onopen = () => setConn('live', 'live')
    // The browser reconnects by itself; the new stream starts with a full snapshot.
    es.onerror = () => setConn('reconnecting', 'reconnecting…')
    es.addEventListener('snapshot', (e) => {
      const d = JSON.parse(e.data)
      model.keyspaceSize = d.keyspaceSize
      model.buckets = d.buckets
      model.historySize = d.historySize
      model.state = d.state
      model.rounds = d.rounds
      model.columns = d.columns
      model.ready = true
      setConn('live', 'live')
      schedule()
    })
    es.addEventListener('round', (e) => {
      if (!model.ready) return
      const d = JSON.parse(e.data)
      const last = model.rounds[model.rounds.length - 1]
      if (last && last.round >= d.round.round) return
      model.rounds.push(d.round)
      model.columns.push(d.column)
      trim(model.rounds)
      trim(model.columns)
      model.state = d.state
      schedule()
    })
    es.addEventListener('state', (e) => {
      if (!model.ready) return
      model.state = JSON.parse(e.data).state
      schedule()
    })
  }

  function trim (list) {
    if (list.length > model.historySize) list.splice(0, list.length - model.historySize)
  }

  /** Draw at most once per animation frame, however many events arrived. */
  function schedule () {
    if (frame) return
    frame = window.requestAnimationFrame(() => {
      frame = 0
      render()
    })
  }

  function render () {
    if (!model.ready) return
    // Small clusters: colours in id order. Summarized ones colour the servers shown, as they appear.
    if (model.state.servers) for (const id of Object.keys(model.state.servers).sort()) colourOf(id)
    renderSummary()
    drawHeatmap()
    renderTrends()
    const view = { state: model.state, last: model.rounds[model.rounds.length - 1], colourOf, perSecond, unit: unit() }
    members.renderServers(view)
    members.renderState(view)
  }

  // ---- helpers ----

  function colourOf (id) {
    if (!colours.has(id)) colours.set(id, SERVER_COLOURS[colours.size % SERVER_COLOURS.length])
    return colours.get(id)
  }

  function buildLut (stops, n) {
    const out = []
    for (let i = 0; i < n; i++) {
      const x = (i / (n - 1)) * (stops.length - 1)
      const k = Math.min(stops.length - 2, Math.floor(x))
      const f = x - k
      const c = stops[k].map((v, j) => Math.round(v + (stops[k + 1][j] - v) * f))
      out.push(`rgb(${c[0]},${c[1]},${c[2]})`)
    }
    return out
  }

  /** Load 0..max onto 0..1, compressed (log) so a hot slice does not flatten the rest. */
  function intensity (v, max) {
    if (!(v > 0) || !(max > 0)) return 0
    return Math.log10(1 + 99 * Math.min(1, v / max)) / 2
  }

  function mix (hex, t) {
    const n = parseInt(hex.slice(1), 16)
    const a = 0.18 + 0.82 * t
    const bg = [16, 20, 27]
    const c = [(n >> 16) & 255, (n >> 8) & 255, n & 255].map((v, i) => Math.round(bg[i] + (v - bg[i]) * a))
    return `rgb(${c[0]},${c[1]},${c[2]})`
  }

  const perSecond = (count) => (count * 1000) / (model.state ? model.state.periodMs : 1000)
  // Loads are in the controller's loadMetric: busy ms (cost) or requests.
  const unit = () => (model.state && model.state.loadMetric === 'cost' ? 'busy ms/s' : 'req/s')
  const hex = (k) => '0x' + Math.min(k, model.keyspaceSize - 1).toString(16).padStart(8, '0')
  /** Owner layout of a column as runs of buckets: "app-1:0-84,app-2:85-170,…". */
  function layoutOf (col) {
    const runs = []
    for (let b = 0; b < col.owner.length; b++) {
      const id = col.servers[col.owner[b]]
      const r = runs[runs.length - 1]
      if (r && r.id === id) r.end = b
      else runs.push({ id, start: b, end: b })
    }
    return runs.map((r) => `${r.id}:${r.start}-${r.end}`).join(',')
  }

  // ---- header ----

  function renderSummary () {
    const s = model.state
    const last = model.rounds[model.rounds.length - 1]
    const count = s.servers ? Object.keys(s.servers).length : s.serverSummary.count
    const draining = s.servers ? Object.values(s.servers).some((m) => m.draining) : s.serverSummary.draining > 0
    $('#sum-strategy').textContent = s.strategy
    $('#sum-generation').textContent = String(s.generation)
    $('#sum-round').textContent = last ? String(last.round) : '–'
    $('#sum-imbalance').textContent = last ? last.imbalance.toFixed(2) : '–'
    $('#sum-load').textContent = last ? `${fmtRate(perSecond(last.totalLoad))} ${unit()}` : '–'
    $('#sum-servers').textContent = `${count}${draining ? ' (draining)' : ''}`
    $('#sum-frontends').textContent = String(s.frontends ? Object.keys(s.frontends).length : s.frontendSummary.count)
    $('#sum-handoff').textContent = s.handoff.inProgress ? 'in progress' : 'idle'
    $('#bucket-count').textContent = String(model.buckets)
  }

  // ---- heatmap ----

  function drawHeatmap () {
    const canvas = $('#heatmap')
    const dpr = window.devicePixelRatio || 1
    const w = canvas.clientWidth
    const h = canvas.clientHeight
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr)
      canvas.height = Math.round(h * dpr)
    }
    const ctx = canvas.getContext('2d')
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0)
    ctx.fillStyle = BG
    ctx.fillRect(0, 0, w, h)
    const pw = w - M.l - M.r
    const ph = h - M.t - M.b
    const B = model.buckets
    const slots = model.historySize
    const cols = model.columns
    const colW = pw / slots
    const xOf = (k) => Math.round(M.l + pw - (cols.length - k) * colW)
    const yOf = (b) => Math.round(M.t + (b * ph) / B)
    geometry = { pw, ph, colW, B, cols }

    ctx.fillStyle = EMPTY
    ctx.fillRect(M.l, M.t, pw, ph)
    let max = 0
    for (const c of cols) for (const v of c.load) if (v > max) max = v

    let nonzero = 0
    let moved = 0
    const layouts = new Set()
    for (let k = 0; k < cols.length; k++) {
      const c = cols[k]
      const xa = xOf(k)
      const xb = Math.max(xa + 1, xOf(k + 1))
      let loaded = false
      for (let b = 0; b < B; b++) {
        const v = c.load[b]
        if (v > 0) { nonzero++; loaded = true }
        const t = intensity(v, max)
        ctx.fillStyle = model.mode === 'owner'
          ? mix(colourOf(c.servers[c.owner[b]]), t)
          : (v > 0 ? LUT[Math.max(1, Math.round(t * 255))] : LUT[0])
        const ya = yOf(b)
        ctx.fillRect(xa, ya, xb - xa, Math.max(1, yOf(b + 1) - ya))
      }
      if (loaded) layouts.add(layoutOf(c))
      // Owner boundaries: where the owner changes along the keyspace.
      ctx.fillStyle = EDGE
      for (let b = 1; b < B; b++) {
        if (c.servers[c.owner[b]] !== c.servers[c.owner[b - 1]]) ctx.fillRect(xa, yOf(b), xb - xa, 1)
      }
      // Owner changes over time: a bright stripe on the left edge of every bucket that changed hands.
      ctx.fillStyle = MOVED
      for (const b of c.moved) {
        moved++
        const ya = yOf(b)
        ctx.fillRect(xa, ya, Math.min(2, xb - xa), Math.max(1, yOf(b + 1) - ya))
      }
    }

    // The newest owners, as a strip right of the plot.
    const newest = cols[cols.length - 1]
    if (newest) {
      for (let b = 0; b < B; b++) {
        ctx.fillStyle = colourOf(newest.servers[newest.owner[b]])
        const ya = yOf(b)
        ctx.fillRect(M.l + pw + 8, ya, 12, Math.max(1, yOf(b + 1) - ya))
      }
    }

    // Axes: keyspace on the left (hex slice keys), rounds along the bottom.
    ctx.fillStyle = '#8b949e'
    ctx.font = '11px ui-monospace, "DejaVu Sans Mono", monospace'
    ctx.textAlign = 'right'
    ctx.textBaseline = 'middle'
    for (let q = 0; q <= 4; q++) {
      const y = M.t + (q * ph) / 4
      ctx.fillText(hex((q * model.keyspaceSize) / 4), M.l - 6, Math.min(h - M.b - 4, Math.max(M.t + 5, y)))
      ctx.fillRect(M.l - 4, Math.round(y), 3, 1)
    }
    ctx.textAlign = 'center'
    ctx.textBaseline = 'top'
    const every = Math.max(1, Math.ceil(slots / 10))
    for (let k = 0; k < cols.length; k++) {
      if (cols[k].round % every !== 0) continue
      const x = xOf(k) + colW / 2
      ctx.fillRect(Math.round(x), h - M.b + 1, 1, 3)
      ctx.fillText(String(cols[k].round), x, h - M.b + 5)
    }
    if (!cols.length) {
      ctx.textAlign = 'center'
      ctx.fillText('waiting for the first balancing round…', M.l + pw / 2, M.t + ph / 2)
    }

    canvas.dataset.columns = String(cols.length)
    canvas.dataset.nonzeroCells = String(nonzero)
    canvas.dataset.movedCells = String(moved)
    canvas.dataset.loadedLayouts = String(layouts.size)
    canvas.dataset.layout = newest ? layoutOf(newest) : ''
    $('#legend-max').textContent = max > 0 ? `${fmtRate(perSecond(max))} ${unit()} per bucket` : 'no load yet'
    const key = $('#owner-key')
    if (newest && newest.servers.length > SERVER_COLOURS.length) {
      // More owners than colours: a key would repeat them; the tooltip names each bucket's owner.
      const of = newest.serverCount ? ` of ${newest.serverCount} servers` : ''
      key.replaceChildren(`owner now: ${newest.servers.length} servers own a bucket${of} (colours repeat; hover for names)`)
    } else {
      key.replaceChildren('owner now: ', ...[...colours].filter(([id]) => newest && newest.servers.includes(id)).map(([id, c]) => {
        const sw = el('i', { class: 'swatch' })
        sw.style.background = c
        return el('span', {}, sw, id + ' ')
      }))
    }
  }

  function onHover (e) {
    const tip = $('#tooltip')
    if (!geometry || !geometry.cols.length) { tip.hidden = true; return }
    const rect = e.target.getBoundingClientRect()
    const x = e.clientX - rect.left
    const y = e.clientY - rect.top
    const { pw, ph, colW, B, cols } = geometry
    const k = Math.floor((x - (M.l + pw - cols.length * colW)) / colW)
    const b = Math.floor(((y - M.t) / ph) * B)
    if (k < 0 || k >= cols.length || b < 0 || b >= B) { tip.hidden = true; return }
    const c = cols[k]
    const lo = Math.floor((b * model.keyspaceSize) / B)
    const hi = Math.floor(((b + 1) * model.keyspaceSize) / B)
    tip.textContent = [
      `round ${c.round}  ${new Date(c.at).toLocaleTimeString()}`,
      `keys  ${hex(lo)} – ${hex(hi - 1)}`,
      `load  ${fmtRate(perSecond(c.load[b]))} ${unit()}`,
      `owner ${c.servers[c.owner[b]]}${c.moved.includes(b) ? '  (changed this round)' : ''}`
    ].join('\n')
    tip.hidden = false
    tip.style.left = `${Math.min(x + 14, rect.width - tip.offsetWidth - 4)}px`
    tip.style.top = `${Math.min(y + 14, rect.height - tip.offsetHeight - 4)}px`
  }

  // ---- trends ----

  function renderTrends () {
    const rounds = model.rounds
    const last = rounds[rounds.length - 1]
    const ratio = model.state.strategyOptions && model.state.strategyOptions.moveRatio
    chart('#trend-imbalance', rounds.map((r) => r.imbalance), { kind: 'line', min: 1, minMax: 2, ref: ratio, fmt: (v) => v.toFixed(2) })
    chart('#trend-churn', rounds.map((r) => r.churnFraction * 100), { kind: 'bars', min: 0, minMax: 1, fmt: (v) => v.toFixed(1) + '%' })
    const g0 = rounds.length ? rounds[0].generation : 0
    chart('#trend-generation', rounds.map((r) => r.generation - g0), { kind: 'step', min: 0, minMax: 1, fmt: (v) => '+' + v.toFixed(0) })
    $('#val-imbalance').textContent = last ? last.imbalance.toFixed(2) : '–'
    $('#val-churn').textContent = last ? pct(last.churnFraction) : '–'
    $('#val-generation').textContent = last ? `+${last.generation - g0}` : '–'
  }

  /** A small chart with the heatmap's x layout: one slot per round kept, newest on the right. */
  function chart (sel, values, { kind, min, minMax, ref, fmt }) {
    const svg = $(sel)
    const w = svg.clientWidth
    const h = svg.clientHeight
    svg.setAttribute('viewBox', `0 0 ${w} ${h}`)
    const top = 4
    const bottom = h - 4
    const pw = w - M.l - M.r
    const colW = pw / model.historySize
    const max = Math.max(minMax, ...values.map((v) => (Number.isFinite(v) ? v : 0)), ref || 0)
    const y = (v) => bottom - ((Math.max(min, v) - min) / (max - min)) * (bottom - top)
    const x = (k) => M.l + pw - (values.length - k) * colW
    const parts = []
    parts.push(line(M.l, bottom, M.l + pw, bottom, 'axis'), line(M.l, top, M.l, bottom, 'axis'))
    parts.push(text(M.l - 6, top + 4, fmt(max)), text(M.l - 6, bottom, fmt(min)))
    if (ref) parts.push(line(M.l, y(ref), M.l + pw, y(ref), 'ref'), text(M.l + pw + 4, y(ref) + 3, fmt(ref), 'start'))
    if (kind === 'bars') {
      values.forEach((v, k) => {
        if (!(v > 0)) return
        const r = document.createElementNS(SVG, 'rect')
        r.setAttribute('class', 'bar')
        r.setAttribute('x', x(k) + colW * 0.15)
        r.setAttribute('width', Math.max(1, colW * 0.7))
        r.setAttribute('y', y(v))
        r.setAttribute('height', Math.max(1, bottom - y(v)))
        parts.push(r)
      })
    } else if (values.length) {
      let d = ''
      values.forEach((v, k) => {
        const cx = x(k) + colW / 2
        if (k === 0) d += `M${cx},${y(v)}`
        else if (kind === 'step') d += `H${cx}V${y(v)}`
        else d += `L${cx},${y(v)}`
      })
      const p = document.createElementNS(SVG, 'path')
      p.setAttribute('class', 'series')
      p.setAttribute('d', d)
      parts.push(p)
    }
    svg.replaceChildren(...parts)
  }

  function line (x1, y1, x2, y2, cls) {
    const l = document.createElementNS(SVG, 'line')
    for (const [k, v] of Object.entries({ x1, y1, x2, y2 })) l.setAttribute(k, v)
    l.setAttribute('class', cls)
    return l
  }

  function text (x, y, s, anchor = 'end') {
    const t = document.createElementNS(SVG, 'text')
    t.setAttribute('x', x)
    t.setAttribute('y', y)
    t.setAttribute('text-anchor', anchor)
    t.textContent = s
    return t
  }

  // ---- wiring ----

  for (const b of document.querySelectorAll('.toggle button')) {
    b.addEventListener('click', () => {
      model.mode = b.dataset.mode
      for (const o of document.querySelectorAll('.toggle button')) o.setAttribute('aria-pressed', String(o === b))
      schedule()
    })
  }
  $('#heatmap').addEventListener('mousemove', onHover)
  $('#heatmap').addEventListener('mouseleave', () => { $('#tooltip').hidden = true })
  window.addEventListener('resize', schedule)
  connect()
})()
