'use strict'

const COLUMNS = [
  ['phase', (p) => p.name, 'left'],
  ['target/s', (p) => fixed(p.targetRate, 1)],
  ['achieved/s', (p) => fixed(p.achievedRate, 1)],
  ['p50 ms', (p) => ms(p.latencyMs.p50)],
  ['p90 ms', (p) => ms(p.latencyMs.p90)],
  ['p99 ms', (p) => ms(p.latencyMs.p99)],
  ['p99.9 ms', (p) => ms(p.latencyMs['p99.9'])],
  ['max ms', (p) => ms(p.latencyMs.max)],
  ['errors', (p) => String(p.errorCount)],
  // Mean of the per-window imbalances; a phase shorter than a window has none, so show its whole-phase figure, starred.
  ['imbalance', (p) => (p.meanImbalance !== null && p.meanImbalance !== undefined ? fixed(p.meanImbalance, 2) : p.imbalance !== null && p.imbalance !== undefined ? fixed(p.imbalance, 2) + '*' : '-')]
]

/**
 * The end-of-run table: per phase, target vs achieved rate, latency
 * percentiles, errors and mean imbalance, then an "all" row, the error
 * breakdown and any warning that the client could not hold the rate.
 * @param {object} result from run()
 * @returns {string}
 */
function formatSummary (result) {
  const rows = result.phases.map((p) => COLUMNS.map(([, f]) => f(p)))
  rows.push(COLUMNS.map(([, f]) => f({ ...result.totals, name: 'all' })))
  const header = COLUMNS.map(([h]) => h)
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)))
  const fmt = (cells) => cells.map((c, i) => (COLUMNS[i][2] === 'left' ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ')

  const lines = []
  const how = result.mode === 'open'
    ? 'open loop, latency from intended send time (coordinated omission corrected)'
    : 'CLOSED loop, latency from actual send time (NOT corrected for coordinated omission)'
  lines.push(`chopper-loadgen: ${how}`)
  lines.push(`targets ${result.targets.join(', ')}; servers ${result.servers.length ? result.servers.join(', ') : '(no X-Served-By seen)'}; ${(result.wallMs / 1000).toFixed(1)} s${result.aborted ? ' (ABORTED)' : ''}`)
  lines.push('')
  lines.push(fmt(header))
  rows.forEach((r, i) => {
    if (i === rows.length - 1) lines.push(widths.map((w) => '-'.repeat(w)).join('  '))
    lines.push(fmt(r))
  })

  if (result.phases.some((p) => p.meanImbalance === null && p.imbalance !== null)) {
    lines.push('')
    lines.push('* no whole window inside the phase: imbalance over the phase\'s total per-server counts')
  }

  const errorLines = result.phases
    .filter((p) => p.errorCount > 0)
    .map((p) => `  ${p.name}: ${Object.entries(p.errors).filter(([, n]) => n > 0).map(([k, n]) => `${k} ${n}`).join(', ')}`)
  if (errorLines.length) {
    lines.push('')
    lines.push('errors by class:')
    lines.push(...errorLines)
  }
  const unattributed = result.phases.reduce((n, p) => n + p.unattributed, 0)
  if (unattributed > 0) {
    lines.push('')
    lines.push(`note: ${unattributed} responses had no X-Served-By header; they are left out of imbalance.`)
  }
  const st = result.staleReads
  if (st) {
    lines.push('')
    lines.push(`stale reads: ${st.stale} of ${st.checked} GETs checked${st.checked ? ` (${(100 * st.share).toFixed(2)} %)` : ''}${st.unchecked ? `; ${st.unchecked} answers without a tag not checked` : ''}`)
    for (const x of st.examples.slice(0, 3)) lines.push(`  ${x.key}: a GET sent at ${x.sentAtMs} ms returned ${x.returned}, after ${x.overwrittenBy}`)
  }
  if (!result.client.heldRate) {
    lines.push('')
    for (const problem of result.client.problems) lines.push(`WARNING ${problem}`)
  }
  return lines.join('\n')
}

/**
 * What a spec will do, phase by phase, with the most likely keys and their
 * exact probabilities (printed by `loadgen validate`).
 * @param {import('./workload').Workload} workload
 * @param {{ top?: number }} [options]
 * @returns {string}
 */
function formatPlan (workload, { top = 5 } = {}) {
  const s = workload.spec
  const lines = [`${s.name ? s.name + ': ' : ''}${workload.phases.length} phases, ${(workload.durationMs / 1000).toFixed(1)} s, ${workload.totalRequests} requests, seed ${JSON.stringify(s.seed)}`]
  workload.phases.forEach((p, i) => {
    const sp = s.phases[i]
    const d = sp.distribution
    const params = Object.entries(d).filter(([k]) => k !== 'type' && k !== 'weights' && k !== 'pmf').map(([k, v]) => `${k}=${v}`).join(' ')
    const mix = Object.entries(p.mix).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${Math.round(v * 1000) / 10}%`).join(', ')
    lines.push('')
    lines.push(`phase ${i + 1} ${p.name}: ${(p.durationMs / 1000)} s at ${p.rate} req/s = ${p.requests} requests, starts at ${(p.startMs / 1000)} s`)
    lines.push(`  keys ${p.keyCount}, ${d.type}${params ? ' ' + params : ''}${sp.hot ? `, hot keys ${sp.hot.keys.join(', ')} take ${sp.hot.share * 100}%` : ''}`)
    lines.push(`  mix ${mix}; values ${p.value.min}-${p.value.max} B; path ${p.path}`)
    const pmf = workload.pmf(i)
    const shown = topIndices(pmf, top).map((k) => `${workload.keyName(i, k)} ${(pmf[k] * 100).toFixed(2)}%`)
    lines.push(`  top keys: ${shown.join(', ')}`)
  })
  return lines.join('\n')
}

// The n most likely key indices, without sorting millions of keys.
function topIndices (pmf, n) {
  const best = []
  for (let k = 0; k < pmf.length; k++) {
    if (best.length < n || pmf[k] > pmf[best[best.length - 1]]) {
      best.push(k)
      best.sort((a, b) => pmf[b] - pmf[a] || a - b)
      if (best.length > n) best.pop()
    }
  }
  return best
}

function fixed (x, digits) {
  return x === null || x === undefined ? '-' : x.toFixed(digits)
}

function ms (x) {
  if (x === null || x === undefined) return '-'
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2)
}

module.exports = { formatSummary, formatPlan }
