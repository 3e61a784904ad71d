'use strict'

/**
 * HTML reports with inline SVG charts, as plain strings (no dependencies).
 * renderRunReport: one simulation; renderScaleReport: the scale set.
 */

const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf']

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]))
const fmt = (v, d = 3) => (v === null || v === undefined ? '–' : typeof v === 'number' ? String(Number(v.toFixed(d))) : esc(v))

/**
 * A line chart of several series over period indices.
 * @param {{ title: string, yLabel: string, series: { name: string, values: (number|null)[] }[], marks?: number[], hline?: number, logY?: boolean, yMin?: number }} c
 * `marks`: period indices of phase changes (dashed); `hline`: a reference level; `yMin`: axis floor (default 0)
 */
function lineChart ({ title, yLabel, series, marks = [], hline, logY = false, yMin }) {
  const W = 760
  const H = 260
  const L = 56
  const R = 170
  const T = 28
  const B = 36
  const all = series.flatMap((s) => s.values).filter((v) => typeof v === 'number' && Number.isFinite(v) && (!logY || v > 0))
  const n = Math.max(1, ...series.map((s) => s.values.length))
  let lo = logY ? Math.min(...all, hline ?? Infinity) : Math.min(yMin ?? 0, ...all)
  let hi = Math.max(...all, hline ?? -Infinity)
  if (!all.length) { lo = logY ? 0.1 : 0; hi = 1 }
  if (hi <= lo) hi = lo + (logY ? lo : 1)
  const f = logY ? Math.log10 : (v) => v
  const x = (i) => L + ((W - L - R) * i) / Math.max(1, n - 1)
  const y = (v) => T + (H - T - B) * (1 - (f(v) - f(lo)) / (f(hi) - f(lo)))
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`]
  parts.push(`<text x="${L}" y="16" font-size="13" font-weight="bold">${esc(title)}</text>`)
  parts.push(`<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="#999"/><line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="#999"/>`)
  if (!logY) { const step = niceStep((hi - lo) / 5); lo = Math.floor(lo / step) * step; hi = Math.ceil(hi / step) * step }
  const ticks = logY ? logTicks(lo, hi) : linearTicks(lo, hi)
  for (const t of ticks) parts.push(`<line x1="${L - 3}" x2="${W - R}" y1="${y(t)}" y2="${y(t)}" stroke="#eee"/><text x="${L - 5}" y="${y(t) + 4}" text-anchor="end">${fmt(t, 3)}</text>`)
  parts.push(`<text x="12" y="${(T + H - B) / 2}" transform="rotate(-90 12 ${(T + H - B) / 2})" text-anchor="middle">${esc(yLabel)}</text>`)
  parts.push(`<text x="${(L + W - R) / 2}" y="${H - 6}" text-anchor="middle">period</text>`)
  for (let i = 0; i < n; i += Math.max(1, Math.ceil(n / 10))) parts.push(`<text x="${x(i)}" y="${H - B + 14}" text-anchor="middle">${i}</text>`)
  for (const m of marks) parts.push(`<line x1="${x(m)}" x2="${x(m)}" y1="${T}" y2="${H - B}" stroke="#bbb" stroke-dasharray="4 3"/>`)
  if (hline !== undefined && hline >= lo && hline <= hi) parts.push(`<line x1="${L}" x2="${W - R}" y1="${y(hline)}" y2="${y(hline)}" stroke="#555" stroke-dasharray="2 2"/><text x="${W - R + 2}" y="${y(hline) + 4}" fill="#555">${fmt(hline)}</text>`)
  series.forEach((s, k) => {
    const colour = COLOURS[k % COLOURS.length]
    const pts = s.values.map((v, i) => (typeof v === 'number' && Number.isFinite(v) && (!logY || v > 0) ? `${x(i).toFixed(1)},${y(v).toFixed(1)}` : null)).filter(Boolean)
    if (pts.length) parts.push(`<polyline fill="none" stroke="${colour}" stroke-width="1.6" points="${pts.join(' ')}"/>`)
    parts.push(`<rect x="${W - R + 28}" y="${T + 16 * k}" width="10" height="10" fill="${colour}"/><text x="${W - R + 42}" y="${T + 9 + 16 * k}">${esc(s.name)}</text>`)
  })
  parts.push('</svg>')
  return parts.join('')
}

function niceStep (raw) {
  const p = 10 ** Math.floor(Math.log10(raw))
  const m = raw / p
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p
}

function linearTicks (lo, hi) {
  const step = niceStep((hi - lo) / 5)
  const out = []
  for (let v = lo; v <= hi + step / 1e6; v += step) out.push(Number(v.toPrecision(12)))
  return out
}

function logTicks (lo, hi) {
  const out = []
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    const v = 10 ** e
    if (v >= lo && v <= hi) out.push(v)
  }
  return out.length >= 2 ? out : [lo, hi]
}

/** Horizontal bars, one per label (per-server shares). */
function barChart ({ title, bars, reference }) {
  const W = 760
  const rowH = 16
  const L = 80
  const T = 28
  const H = T + rowH * bars.length + 10
  const max = Math.max(...bars.map((b) => b.value), reference ?? 0) || 1
  const x = (v) => L + ((W - L - 60) * v) / max
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`]
  parts.push(`<text x="${L}" y="16" font-size="13" font-weight="bold">${esc(title)}</text>`)
  bars.forEach((b, i) => {
    parts.push(`<text x="${L - 4}" y="${T + rowH * i + 11}" text-anchor="end">${esc(b.label)}</text><rect x="${L}" y="${T + rowH * i + 2}" width="${Math.max(0, x(b.value) - L)}" height="${rowH - 4}" fill="${COLOURS[0]}"/><text x="${x(b.value) + 4}" y="${T + rowH * i + 11}">${fmt(b.value * 100, 1)} %</text>`)
  })
  if (reference !== undefined) parts.push(`<line x1="${x(reference)}" x2="${x(reference)}" y1="${T}" y2="${H - 8}" stroke="#555" stroke-dasharray="3 3"/>`)
  parts.push('</svg>')
  return parts.join('')
}

const page = (title, body) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>body{font-family:sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse;font-size:13px;margin:1em 0}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}code{background:#f4f4f4;padding:1px 3px}.note{color:#555;font-size:13px}</style>
</head><body>
${body}
</body></html>
`

const phaseMarks = (r) => r.phases.slice(1).map((p) => p.firstPeriod).filter((p) => p >= 0)

/**
 * One simulation's report.
 * @param {object} r a result of sim/cluster.js simulate
 * @param {{ command?: string }} [meta]
 */
function renderRunReport (r, { command } = {}) {
  const o = r.options
  const s = r.summary
  const title = `Simulation: ${r.workload ?? 'workload'} — ${o.strategy}, ${o.servers} servers`
  const body = [`<h1>${esc(title)}</h1>`]
  if (command) body.push(`<p>Command: <code>${esc(command)}</code></p>`)
  body.push(`<p class="note">Virtual time, ${o.mode} mode, ${o.arrivals} arrivals, period ${o.periodMs} ms, seed ${o.seed}, handoff modelled as instantaneous. Round time is the wall-clock time of the real strategy call.</p>`)
  body.push('<table><tr><th>figure</th><th>value</th></tr>' + [
    ['requests', s.requests],
    ['steady-state imbalance (mean of each phase\'s second half)', s.steadyImbalance],
    ['periods to recover after each shift (< 1.25 for 2 periods)', s.periodsToRecover.map((v) => (v === null ? 'never' : v)).join(', ') || '–'],
    ['churn per round, mean / max (keyspace fraction)', `${fmt(s.churnPerRound?.mean, 5)} / ${fmt(s.churnPerRound?.max, 5)}`],
    ['round time p50 / max (ms)', `${fmt(s.roundMs.p50)} / ${fmt(s.roundMs.max)}`],
    ['latency p50 / p99 / p99.9 (ms)', s.latencyMs ? `${s.latencyMs.p50} / ${s.latencyMs.p99} / ${s.latencyMs.p999}` : '– (fluid mode)'],
    ['requests at miss cost', s.misses ?? '–']
  ].map(([k, v]) => `<tr><td>${esc(k)}</td><td>${fmt(v)}</td></tr>`).join('') + '</table>')
  body.push('<h2>Phases</h2><table><tr><th>phase</th><th>rate (req/s)</th><th>recovery (periods)</th><th>steady imbalance</th><th>mean churn</th><th>p99 (ms)</th></tr>' +
    r.phases.map((p) => `<tr><td>${esc(p.name)}</td><td>${fmt(p.rate, 0)}</td><td>${p.periodsToRecover === null ? 'never' : p.periodsToRecover}</td><td>${fmt(p.steadyImbalance)}</td><td>${fmt(p.meanChurn, 5)}</td><td>${fmt(p.latencyMs?.p99)}</td></tr>`).join('') + '</table>')
  const marks = phaseMarks(r)
  body.push(lineChart({ title: 'Imbalance per period (max / mean server load)', yLabel: 'imbalance', series: [{ name: o.strategy, values: r.periods.map((p) => p.imbalance) }], marks, hline: 1.25, yMin: 1 }))
  body.push(lineChart({ title: 'Key churn per round', yLabel: 'keyspace fraction', series: [{ name: o.strategy, values: r.periods.map((p) => p.churn) }], marks }))
  if (o.mode === 'requests') body.push(lineChart({ title: 'Latency per period (simulated sojourn)', yLabel: 'ms', series: [{ name: 'p50', values: r.periods.map((p) => p.p50Ms) }, { name: 'p99', values: r.periods.map((p) => p.p99Ms) }], marks, logY: true }))
  if (r.serverShares) body.push(barChart({ title: 'Per-server share of requests', bars: Object.entries(r.serverShares).map(([label, value]) => ({ label, value })), reference: 1 / o.servers }))
  return page(title, body.join('\n'))
}

/**
 * The scale set's report.
 * @param {{ settings: object, runs: object[], generatedBy?: string, notes?: string[] }} data compact runs (see compactRun)
 */
function renderScaleReport (data) {
  const title = 'Chopper simulator: strategies at scale'
  const body = [`<h1>${esc(title)}</h1>`]
  if (data.generatedBy) body.push(`<p>Command: <code>${esc(data.generatedBy)}</code></p>`)
  for (const n of data.notes || []) body.push(`<p class="note">${esc(n)}</p>`)
  body.push('<table><tr><th>strategy</th><th>servers</th><th>slices (end)</th><th>round p50 (ms)</th><th>round max (ms)</th><th>steady imbalance</th><th>recovery per shift (periods)</th><th>churn / round mean</th><th>churn / round max</th><th>sim wall (s)</th></tr>' +
    data.runs.map((r) => `<tr><td>${esc(r.label)}</td><td>${r.servers}</td><td>${r.slices.at(-1)}</td><td>${fmt(r.summary.roundMs.p50, 1)}</td><td>${fmt(r.summary.roundMs.max, 1)}</td><td>${fmt(r.summary.steadyImbalance)}</td><td>${r.summary.periodsToRecover.map((v) => (v === null ? 'never' : v)).join(', ')}</td><td>${fmt(r.summary.churnPerRound?.mean, 5)}</td><td>${fmt(r.summary.churnPerRound?.max, 5)}</td><td>${fmt(r.wallSeconds, 1)}</td></tr>`).join('') + '</table>')
  const sizes = [...new Set(data.runs.map((r) => r.servers))]
  for (const n of sizes) {
    const runs = data.runs.filter((r) => r.servers === n)
    const marks = runs[0].phaseStarts.slice(1)
    body.push(`<h2>${n} servers</h2>`)
    body.push(lineChart({ title: `Imbalance per period, ${n} servers`, yLabel: 'max / mean load', series: runs.map((r) => ({ name: r.label, values: r.imbalance })), marks, hline: 1.25, yMin: 1 }))
    body.push(lineChart({ title: `Key churn per round, ${n} servers`, yLabel: 'keyspace fraction', series: runs.map((r) => ({ name: r.label, values: r.churn })), marks }))
    body.push(lineChart({ title: `Round time (wall clock), ${n} servers`, yLabel: 'ms (log)', series: runs.map((r) => ({ name: r.label, values: r.roundMs })), marks, logY: true }))
  }
  return page(title, body.join('\n'))
}

/** The parts of a scale run the committed report keeps (small JSON). */
function compactRun ({ label, strategy, strategyOptions, servers, wallSeconds, result }) {
  return {
    label: label ?? strategy,
    strategy,
    strategyOptions: strategyOptions ?? {},
    servers,
    wallSeconds,
    summary: result.summary,
    phases: result.phases.map(({ name, firstPeriod, periodsToRecover, steadyImbalance, meanChurn }) => ({ name, firstPeriod, periodsToRecover, steadyImbalance, meanChurn })),
    phaseStarts: result.phases.map((p) => p.firstPeriod),
    imbalance: result.periods.map((p) => p.imbalance),
    churn: result.periods.map((p) => p.churn),
    roundMs: result.periods.map((p) => p.roundMs),
    slices: result.periods.map((p) => p.slices)
  }
}

module.exports = { renderRunReport, renderScaleReport, compactRun, lineChart, barChart }
