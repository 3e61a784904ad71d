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

/**
 * A heatmap: one cell per (row, column), coloured from white (best) to red
 * (worst) on the cell's value, the value printed in it. null cells are grey
 * and print `nullText`.
 * @param {{ title: string, rowLabel: string, colLabel: string, rows: (string|number)[], cols: (string|number)[], values: (number|null)[][], digits?: number, lowIsGood?: boolean, nullText?: string }} h
 */
function heatmap ({ title, rowLabel, colLabel, rows, cols, values, digits = 3, lowIsGood = true, nullText = 'never' }) {
  const cw = 86
  const ch = 30
  const L = 96
  const T = 48
  const W = L + cw * cols.length + 20
  const H = T + ch * rows.length + 40
  const all = values.flat().filter((v) => typeof v === 'number' && Number.isFinite(v))
  const lo = all.length ? Math.min(...all) : 0
  const hi = all.length ? Math.max(...all) : 1
  const colour = (v) => {
    if (typeof v !== 'number' || !Number.isFinite(v)) return '#ccc'
    let f = hi > lo ? (v - lo) / (hi - lo) : 0
    if (!lowIsGood) f = 1 - f
    // white -> red
    const g = Math.round(255 - 170 * f)
    return `rgb(255,${g},${Math.round(255 - 200 * f)})`
  }
  const parts = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`]
  parts.push(`<text x="8" y="16" font-size="13" font-weight="bold">${esc(title)}</text>`)
  parts.push(`<text x="${L + (cw * cols.length) / 2}" y="${T - 22}" text-anchor="middle">${esc(colLabel)}</text>`)
  cols.forEach((c, j) => parts.push(`<text x="${L + cw * j + cw / 2}" y="${T - 6}" text-anchor="middle">${esc(c)}</text>`))
  parts.push(`<text x="14" y="${T + (ch * rows.length) / 2}" transform="rotate(-90 14 ${T + (ch * rows.length) / 2})" text-anchor="middle">${esc(rowLabel)}</text>`)
  rows.forEach((r, i) => {
    parts.push(`<text x="${L - 8}" y="${T + ch * i + ch / 2 + 4}" text-anchor="end">${esc(r)}</text>`)
    cols.forEach((_, j) => {
      const v = values[i][j]
      parts.push(`<rect x="${L + cw * j}" y="${T + ch * i}" width="${cw}" height="${ch}" fill="${colour(v)}" stroke="#fff"/><text x="${L + cw * j + cw / 2}" y="${T + ch * i + ch / 2 + 4}" text-anchor="middle">${typeof v === 'number' ? fmt(v, digits) : esc(nullText)}</text>`)
    })
  })
  parts.push(`<text x="${L}" y="${H - 12}" fill="#555">${lowIsGood ? 'white: lowest (best), red: highest' : 'white: highest (best), red: lowest'}; range ${fmt(lo, digits)} – ${fmt(hi, digits)}</text>`)
  parts.push('</svg>')
  return parts.join('')
}

/**
 * Seed 001's N x T sensitivity analysis (sim/sensitivity.js): three heatmaps
 * and the notes that read them.
 * @param {{ settings: object, workload: string, cells: object[] }} sens
 */
function renderSensitivity (sens) {
  const N = [...new Set(sens.cells.map((c) => c.buckets))]
  const Tp = [...new Set(sens.cells.map((c) => c.offloadPercent))]
  const cell = (n, t) => sens.cells.find((c) => c.buckets === n && c.offloadPercent === t)
  const grid = (f) => N.map((n) => Tp.map((t) => f(cell(n, t))))
  const common = { rowLabel: 'N (buckets per server)', colLabel: 'T (offload %, at most, per round)', rows: N, cols: Tp.map((t) => `${t} %`) }
  const s = sens.settings
  const out = ['<h2 id="neighbour-offload">Neighbour offload: N × T sensitivity (seed 001)</h2>']
  out.push(`<p class="note">The real <code>neighbour-offload</code> strategy on the scale set's skewed, shifting workload (<code>${esc(sens.workload)}</code>): ${s.servers} servers, ${s.phases} phases of ${s.periodsPerPhase} periods of ${s.periodMs} ms, fluid mode, seed ${s.seed}. The seed measured throughput (ops/s) of a 3-client laptop run for N ∈ {3, 6, 9}, T ∈ {10, 25, 45} %; here each cell reports what issue 14 asks of every strategy. Steady state = mean imbalance over each phase's second half, averaged over phases. Settle = periods from a shift until the imbalance is within ${Math.round(s.settleTolerance * 100)} % of that phase's steady state for ${s.recovery.hold} periods (mean over the shifts; 0 also means it did not move). Recovery to < ${s.recovery.target} (the scale table's figure) is shown as "never" where it did not happen within the phase.</p>`)
  out.push(heatmap({ ...common, title: 'Steady-state imbalance (max / mean server load)', values: grid((c) => c.steadyImbalance) }))
  out.push(heatmap({ ...common, title: 'Periods to settle after a shift (mean of the shifts)', values: grid((c) => c.meanPeriodsToSettle), digits: 1 }))
  out.push(heatmap({ ...common, title: 'Churn per round (mean keyspace fraction)', values: grid((c) => c.churnPerRound), digits: 4 }))
  out.push(heatmap({ ...common, title: `Periods to recover to < ${s.recovery.target} after a shift (mean of the shifts)`, values: grid((c) => c.meanPeriodsToRecover), digits: 1 }))
  return out.join('\n')
}

/**
 * Seed 004's LC* study (sim/dispatch.js): the slowdown tables next to the
 * paper's Table 1 and Table 2, and the ratios.
 * @param {object} d runDispatch's result, optionally with `sweep` (runDispatchSweep)
 */
function renderDispatch (d) {
  const o = d.options
  const t = d.trace
  const levels = o.levels.map((l) => l.name)
  const out = ['<h2 id="lc-star">Dispatch policies: JSQ, LC and LC* (seed 004)</h2>']
  if (d.command) out.push(`<p>Command: <code>${esc(d.command)}</code></p>`)
  out.push(`<p class="note">A front-end dispatcher in front of ${o.servers} back-end servers; every job is placed by <code>core/replica-choice.js</code> (<code>choose</code> over a <code>ReplicaLoad</code>, as the front end calls it). Trace of our own: ${t.jobs.toLocaleString('en')} jobs, sizes a spliced Pareto with α = ${o.alpha} (cutoff 1; short jobs from ${t.shortMin} to 1, long ones from 1 to ${t.maxSize}); ${fmt(t.longJobShare * 100, 2)} % of the jobs are long (≥ the cutoff) and carry ${fmt(t.longWorkShare * 100, 1)} % of the work (the paper: &lt; 3 % and &gt; 50 %). Poisson arrivals, ${o.jobsPerLevel.toLocaleString('en')} jobs per level, levels in order ${t.levels.map((l) => `${l.name} ${l.utilisation} (realised ${l.realisedUtilisation})`).join(', ')}. With preemption = processor sharing (the limit of the paper's round robin); without = FIFO. Metric: mean slowdown (response time / size), by the level a job arrived in. Seed ${o.seed}. <code>jsq</code> is the front end's JSQ (sizes of its unfinished jobs); <code>jsq-residual</code> is the paper's (true residual work, an oracle view passed to the same <code>choose</code>).</p>`)
  for (const disc of o.disciplines) {
    out.push(`<h3>${disc === 'ps' ? 'With preemption (processor sharing)' : 'Without preemption (FIFO)'}</h3>`)
    const paperCol = (p, l) => {
      if (disc === 'ps' && (p === 'lc' || p === 'lcstar')) return PAPER_T2(d.paper, p, l)
      if (l === 'overall' && (p === 'jsq' || p === 'lc')) return d.paper.table1[p][disc]
      return null
    }
    out.push('<table><tr><th>policy</th>' + levels.map((l) => `<th>${esc(l)}</th>`).join('') + '<th>overall</th><th>paper (overall)</th><th>deferred</th></tr>' +
      d.runs.filter((r) => r.discipline === disc).map((r) => `<tr><td>${esc(r.policy)}</td>${[...levels, 'overall'].map((l) => `<td>${fmt(r.meanSlowdown[l])}</td>`).join('')}<td>${fmt(paperCol(r.policy, 'overall'))}</td><td>${r.deferred}</td></tr>`).join('') + '</table>')
  }
  out.push('<h3>Ratios next to the paper\'s</h3><table><tr><th>comparison (slowdown ratio; &gt; 1: the second wins)</th><th>measured (jsq)</th><th>measured (jsq-residual)</th><th>paper (Tables 1, 2)</th><th>the paper says</th></tr>' +
    d.ratios.map((r) => `<tr><td>${esc(r.label)}</td><td>${fmt(r.measured, 2)}</td><td>${fmt(r.measuredResidual, 2)}</td><td>${fmt(r.paper, 2)}</td><td>${esc(r.paperSays)}</td></tr>`).join('') + '</table>')
  if (d.sweep) {
    out.push(`<h3>Sensitivity to the heavy level's utilisation (mean ratio over seeds ${d.sweep.rows[0]?.seeds.join(', ')})</h3><table><tr><th>heavy utilisation</th><th>JSQ / LC*, preemption</th><th>JSQ FIFO / LC* preemption</th><th>JSQ / LC*, both FIFO</th><th>LC / LC*, heavy, preemption</th><th>LC* beats LC (heavy) every seed</th><th>LC* beats JSQ (FIFO) every seed</th></tr>` +
      d.sweep.rows.map((r) => `<tr><td>${r.heavyUtilisation}</td><td>${fmt(r.jsqOverLcstarPs, 2)}</td><td>${fmt(r.jsqFifoOverLcstarPs, 2)}</td><td>${fmt(r.jsqOverLcstarFifo, 2)}</td><td>${fmt(r.lcOverLcstarHeavyPs, 2)}</td><td>${r.lcstarBeatsLcHeavyEverySeed ? 'yes' : 'no'}</td><td>${r.lcstarBeatsJsqFifoEverySeed ? 'yes' : 'no'}</td></tr>`).join('') + '</table>')
  }
  for (const n of d.notes || []) out.push(`<p class="note">${esc(n)}</p>`)
  return out.join('\n')
}

const PAPER_T2 = (paper, p, l) => paper.table2[p]?.[l] ?? null

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
  if (data.sensitivity) body.push(renderSensitivity(data.sensitivity))
  if (data.dispatch) body.push(renderDispatch(data.dispatch))
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

module.exports = { renderRunReport, renderScaleReport, renderSensitivity, renderDispatch, compactRun, lineChart, barChart, heatmap }
