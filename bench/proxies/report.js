'use strict'

/** The median of the numbers in `xs` (nulls ignored), or null when there are none. */
function median (xs) {
  const s = xs.filter((x) => typeof x === 'number' && Number.isFinite(x)).sort((a, b) => a - b)
  if (s.length === 0) return null
  const mid = Math.floor(s.length / 2)
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2
}

const round2 = (x) => (x === null ? null : Math.round(x * 100) / 100)

/**
 * One row per contender from its measured rounds: the median of each figure
 * over the rounds that ran, error counts summed, and the ratios to the
 * `reference` row (HAProxy) once all rows are known.
 * @param {Array<{ id, label, reason?: string|null, rounds: object[] }>} contenders
 * @param {string} reference id of the row the ratios divide by
 */
function summarize (contenders, reference = 'haproxy') {
  const rows = contenders.map(({ id, label, reason = null, rounds }) => {
    const ok = rounds.filter((r) => !r.error)
    const failed = rounds.filter((r) => r.error)
    if (reason || ok.length === 0) {
      return { id, label, available: false, reason: reason || (failed[0] ? failed[0].error : 'not measured'), rounds }
    }
    return {
      id,
      label,
      available: true,
      reason: failed.length ? `${failed.length} round(s) failed: ${failed[0].error}` : null,
      rps: Math.round(median(ok.map((r) => r.rps))),
      p50Ms: round2(median(ok.map((r) => r.p50Ms))),
      p99Ms: round2(median(ok.map((r) => r.p99Ms))),
      cpuUsPerReq: round2(median(ok.map((r) => r.cpuUsPerReq))),
      backendCpuPct: round2(median(ok.map((r) => r.backendCpuPct))),
      errors: ok.reduce((a, r) => a + r.non2xx + r.socketErrors, 0),
      rounds
    }
  })
  const ref = rows.find((r) => r.id === reference && r.available)
  for (const r of rows) {
    if (!r.available) continue
    r.rpsRatio = ref ? round2(r.rps / ref.rps) : null
    r.p99Ratio = ref && ref.p99Ms > 0 ? round2(r.p99Ms / ref.p99Ms) : null
  }
  return rows
}

const fmtInt = (x) => (x === null || x === undefined ? '–' : Math.round(x).toLocaleString('en-US'))
const fmt = (x, suffix = '') => (x === null || x === undefined ? '–' : `${x.toFixed(2)}${suffix}`)

/** A Markdown table of one configuration's rows, with notes for the contenders that did not run. */
function renderTable (rows) {
  const lines = [
    '| contender | req/s | p50 ms | p99 ms | req/s ÷ HAProxy | p99 ÷ HAProxy | proxy CPU µs/req | backend CPU % | errors | req/s per round |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---|'
  ]
  const notes = []
  for (const r of rows) {
    if (!r.available) {
      lines.push(`| ${r.label} | not available | | | | | | | | |`)
      notes.push(`- ${r.label}: not available: ${r.reason}`)
      continue
    }
    const per = r.rounds.map((x) => (x.error ? 'failed' : fmtInt(x.rps))).join(', ')
    lines.push(`| ${r.label} | ${fmtInt(r.rps)} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} | ${fmt(r.rpsRatio, '×')} | ${fmt(r.p99Ratio, '×')} | ${r.cpuUsPerReq === null ? '–' : fmt(r.cpuUsPerReq)} | ${r.backendCpuPct === null ? '–' : fmtInt(r.backendCpuPct)} | ${r.errors} | ${per} |`)
    if (r.reason) notes.push(`- ${r.label}: ${r.reason}`)
  }
  return [...lines, ...(notes.length ? ['', ...notes] : [])].join('\n')
}

/** The whole report as Markdown (bench/results/forwarding.md). */
function renderMarkdown (result) {
  const m = result.machine
  const s = result.settings
  const out = [
    '# Chopper forwarding bench: the front end against HAProxy and nginx',
    '',
    `Run ${result.startedAt}, ${Math.round(result.elapsedS)} s, node ${m.node}, ${m.cores} cores (${m.cpuModel}), commit ${m.commit}. ` +
      `Machine load average (1/5/15 min) ${m.loadavgStart.join('/')} at the start, ${m.loadavgEnd.join('/')} at the end.`,
    '',
    '```sh',
    result.command,
    '```',
    '',
    `Each measurement: \`${result.wrk}\`, after a ${s.warmupS} s warm-up per contender. ${s.rounds} round(s); in each round every contender runs once, ` +
      'in an order that rotates from round to round. Figures are medians over the rounds.',
    `Backend: bench/noop-backend.js, ${result.backend.workers === 1 ? 'one process' : `${result.backend.workers} processes (node:cluster)`}, its own process. ` +
      `Tools: ${Object.entries(m.tools).map(([k, v]) => `${k}: ${v || 'not installed'}`).join('; ')}.`,
    ''
  ]
  for (const c of result.configurations) {
    out.push(`## ${c.title} (${c.procs} process${c.procs === 1 ? '' : 'es'} or thread${c.procs === 1 ? '' : 's'} per proxy)`, '', renderTable(c.rows), '')
  }
  out.push(
    '- **req/s ÷ HAProxy**, **p99 ÷ HAProxy**: against the HAProxy row of the same configuration. Issue 12 asks for ≥ 0.5× req/s and ≤ 2× p99.',
    '- **proxy CPU µs/req**: CPU time (user + system) of the proxy\'s processes (nginx master and workers, front-end cluster workers) during the measurement, divided by the requests wrk completed. It is the proxy tax in CPU, less sensitive than req/s to what else the machine runs.',
    '- **backend CPU %**: the backend\'s CPU during the measurement, in % of one core. Behind a proxy it stays well below the 100 % it reaches in the backend-direct row (its own ceiling), so the backend is not what limits the proxies.',
    '- **errors**: non-2xx answers plus socket errors reported by wrk. A row with errors measured something other than forwarding.',
    ''
  )
  return out.join('\n')
}

module.exports = { summarize, renderMarkdown, renderTable, median }
