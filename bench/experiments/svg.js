'use strict'

/** Colours per contender, fixed so every plot in a report agrees. */
const COLORS = Object.freeze({
  chopper: '#d62728',
  'chopper-client': '#bcbd22',
  'chopper-lc': '#8c564b',
  'chopper-single': '#ff7f0e',
  'chopper-hot-only': '#e377c2',
  'consistent-hash': '#1f77b4',
  'haproxy-ch': '#9467bd',
  'haproxy-bounded': '#2ca02c',
  'haproxy-random2': '#7f7f7f'
})

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c])
const fmt = (v) => (Math.abs(v) >= 100 || Number.isInteger(v) ? String(Math.round(v)) : String(+v.toPrecision(2)))

/**
 * A self-contained SVG line plot (no scripts, no external styles).
 * @param {object} o
 * @param {{ name: string, color?: string, points: [number, number][], dash?: string }[]} o.series
 * @param {string} o.xLabel
 * @param {string} o.yLabel
 * @param {boolean} [o.logY] log10 y axis (values <= 0 are dropped)
 * @param {{ at: number, label: string }[]} [o.xTicks] explicit x ticks (default: 6 linear ticks)
 * @param {{ x: number, label?: string }[]} [o.vlines] dashed vertical markers (phase changes)
 * @param {{ y: number, label?: string }[]} [o.hlines] dotted horizontal references
 * @param {[number, number]} [o.yRange]
 * @returns {string} `<svg>` markup
 */
function linePlot ({ series, xLabel, yLabel, logY = false, xTicks, vlines = [], hlines = [], yRange, width = 720, height = 300, title }) {
  const m = { l: 60, r: 200, t: title ? 26 : 10, b: 40 }
  const W = width - m.l - m.r
  const H = height - m.t - m.b
  const ty = (v) => (logY ? Math.log10(v) : v)
  const pts = series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!logY || y > 0))
  if (pts.length === 0) return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="40"><text x="10" y="25" font-size="12">no data</text></svg>`
  let [x0, x1] = [Math.min(...pts.map((p) => p[0])), Math.max(...pts.map((p) => p[0]))]
  if (x0 === x1) x1 = x0 + 1
  let [y0, y1] = yRange || [Math.min(...pts.map((p) => ty(p[1]))), Math.max(...pts.map((p) => ty(p[1])))]
  for (const h of hlines) { y0 = Math.min(y0, ty(h.y)); y1 = Math.max(y1, ty(h.y)) }
  if (logY) { y0 = Math.floor(y0); y1 = Math.ceil(y1) } else { y0 = Math.min(y0, 0) === 0 && !yRange ? 0 : y0; y1 = y1 * (yRange ? 1 : 1.05) }
  if (y0 === y1) y1 = y0 + 1
  const X = (x) => m.l + ((x - x0) / (x1 - x0)) * W
  const Y = (y) => m.t + H - ((ty(y) - y0) / (y1 - y0)) * H
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="11">`]
  if (title) out.push(`<text x="${m.l}" y="16" font-size="13" font-weight="bold">${esc(title)}</text>`)
  out.push(`<rect x="${m.l}" y="${m.t}" width="${W}" height="${H}" fill="none" stroke="#999"/>`)
  const yt = []
  if (logY) for (let e = y0; e <= y1; e++) yt.push(10 ** e)
  else for (let i = 0; i <= 5; i++) yt.push(y0 + ((y1 - y0) * i) / 5)
  for (const v of yt) {
    const y = Y(v)
    out.push(`<line x1="${m.l}" x2="${m.l + W}" y1="${y}" y2="${y}" stroke="#eee"/><text x="${m.l - 4}" y="${y + 4}" text-anchor="end">${esc(fmt(v))}</text>`)
  }
  const xt = xTicks || niceTicks(x0, x1).map((at) => ({ at, label: fmt(at) }))
  for (const t of xt) {
    if (t.at < x0 || t.at > x1) continue
    const x = X(t.at)
    out.push(`<line x1="${x}" x2="${x}" y1="${m.t + H}" y2="${m.t + H + 4}" stroke="#999"/><text x="${x}" y="${m.t + H + 16}" text-anchor="middle">${esc(t.label)}</text>`)
  }
  for (const v of vlines) {
    if (v.x < x0 || v.x > x1) continue
    const x = X(v.x)
    out.push(`<line x1="${x}" x2="${x}" y1="${m.t}" y2="${m.t + H}" stroke="#444" stroke-dasharray="4 3"/>`)
    if (v.label) out.push(`<text x="${x + 3}" y="${m.t + 11}" fill="#444">${esc(v.label)}</text>`)
  }
  for (const h of hlines) {
    const y = Y(h.y)
    out.push(`<line x1="${m.l}" x2="${m.l + W}" y1="${y}" y2="${y}" stroke="#000" stroke-dasharray="1 3"/>`)
    if (h.label) out.push(`<text x="${m.l + W - 3}" y="${y - 3}" text-anchor="end">${esc(h.label)}</text>`)
  }
  series.forEach((s, i) => {
    const p = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!logY || y > 0))
    const color = s.color || COLORS[s.name] || '#000'
    if (p.length) {
      out.push(`<polyline fill="none" stroke="${color}" stroke-width="1.8"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''} points="${p.map(([x, y]) => `${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(' ')}"/>`)
      if (p.length <= 16) for (const [x, y] of p) out.push(`<circle cx="${X(x).toFixed(1)}" cy="${Y(y).toFixed(1)}" r="2.5" fill="${color}"/>`)
    }
    const ly = m.t + 12 + i * 16
    out.push(`<line x1="${m.l + W + 10}" x2="${m.l + W + 30}" y1="${ly - 4}" y2="${ly - 4}" stroke="${color}" stroke-width="2"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/><text x="${m.l + W + 34}" y="${ly}">${esc(s.label || s.name)}</text>`)
  })
  out.push(`<text x="${m.l + W / 2}" y="${height - 6}" text-anchor="middle">${esc(xLabel)}</text>`)
  out.push(`<text transform="translate(14 ${m.t + H / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`)
  out.push('</svg>')
  return out.join('')
}

/** Round-numbered ticks (steps of 1, 2 or 5 × 10^k), about five across [lo, hi]. */
function niceTicks (lo, hi) {
  const raw = (hi - lo) / 5
  const mag = 10 ** Math.floor(Math.log10(raw))
  const step = [1, 2, 5, 10].map((f) => f * mag).find((s) => (hi - lo) / s <= 7)
  const out = []
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) out.push(Math.round(v / step) * step)
  return out
}

module.exports = { linePlot, niceTicks, COLORS, esc }
