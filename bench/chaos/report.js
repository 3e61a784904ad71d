'use strict'

const fs = require('node:fs')
const path = require('node:path')

/** The table's columns: header and how to print a row's cell. */
const COLUMNS = [
  ['fault', (r) => r.title],
  ['sent', (r) => String(r.sent)],
  ['failed', (r) => String(r.failed)],
  ['failed %', (r) => r.failedPct.toFixed(2)],
  ['misrouted', (r) => String(r.misrouted)],
  ['served again after (ms)', (r) => (r.servedAgainMs === null ? 'n/a' : String(Math.round(r.servedAgainMs)))],
  ['unavailable max (ms)', (r) => (r.unavailableMs == null ? '0' : String(r.unavailableMs))],
  ['history verdict', (r) => r.verdict],
  ['notes', (r) => r.notes.join('; ')]
]

/** The result table as aligned plain text. */
function formatTable (rows) {
  const cells = [COLUMNS.map(([h]) => h), ...rows.map((r) => COLUMNS.map(([, f]) => f(r)))]
  const widths = COLUMNS.map((_, i) => Math.max(...cells.map((c) => c[i].length)))
  const line = (c) => c.map((x, i) => (i === c.length - 1 ? x : x.padEnd(widths[i]))).join(' | ').trimEnd()
  return [line(cells[0]), widths.map((w, i) => (i === widths.length - 1 ? '-'.repeat(Math.min(w, 40)) : '-'.repeat(w))).join('-|-'), ...cells.slice(1).map(line)].join('\n')
}

/** The nemesis schedule's table (a row per step), as aligned plain text. */
function formatSteps (steps) {
  const head = ['at (s)', 'fault', 'victim', 'held (ms)', 'sent', 'failed', 'unavailable max (ms)']
  const cells = [head, ...steps.map((s) => [String(Math.round(s.atMs / 1000)), s.kind, s.victim || '-', String(s.heldMs), String(s.sent), String(s.failed), String(s.unavailableMs)])]
  const widths = head.map((_, i) => Math.max(...cells.map((c) => c[i].length)))
  return cells.map((c) => c.map((x, i) => x.padEnd(widths[i])).join(' | ').trimEnd()).join('\n')
}

const mdCell = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ')

function mdTable (header, rows) {
  return [`| ${header.map(mdCell).join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.map(mdCell).join(' | ')} |`)].join('\n')
}

/** The whole result as Markdown: command, settings, table, then each fault's details. */
function toMarkdown (result) {
  const out = []
  out.push('# Chopper chaos bench', '')
  out.push(`Run ${result.startedAt}, ${Math.round(result.durationMs / 1000)} s, node ${result.node}, ${result.cpus} CPUs${result.commit ? `, commit ${result.commit}` : ''}.` +
    (result.loadAverage ? ` Machine load average (1/5/15 min) ${result.loadAverage.before.join('/')} at the start, ${result.loadAverage.after.join('/')} at the end.` : ''), '')
  out.push('```sh', result.command, '```', '')
  out.push('## Results', '')
  out.push(mdTable(COLUMNS.map(([h]) => h), result.rows.map((r) => COLUMNS.map(([, f]) => f(r)))), '')
  out.push('- **sent / failed**: load requests only (probes not counted). Failed = no answer within the client timeout, or any non-2xx answer except a 404 to a GET.')
  out.push('- **misrouted**: 421 answers the front ends received from app servers during the phase (the delta of `chopper_frontend_misdirected_total` on both front ends\' `/metrics`); the front end retries them, so most never reach the client.')
  out.push('- **served again after**: for each fault event, the keys the victim owned at that moment (under the controller\'s map) are probed with GETs from the fault on; per key, the time from the fault to the first served answer (2xx, or 404 for a GET) of any request sent after the fault; max over keys, then over the phase\'s events.')
  out.push('- **unavailable max**: per key, the longest run of its requests (load and probes, in send order) that failed or took over 1 s, from the first one\'s send to the last one\'s answer; the worst key. 0: no key had such a run.')
  out.push('- **history verdict**: the phase\'s whole client history (load and probes) checked for linearizability (history/, one register per key; each phase has its own keys). A failed or timed-out request is indeterminate; a PUT answered 421 `CHOPPER_ERR_FENCED_WRITE` certainly did not apply.', '')
  if (result.skipped && result.skipped.length) out.push(`Not run: ${result.skipped.map((x) => `\`${x.fault}\``).join(', ')} (${result.skipped[0].reason}).`, '')
  out.push('## Settings', '')
  out.push(mdTable(['setting', 'value'], Object.entries(flatten(result.settings)).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])), '')
  if (result.netSettings) {
    out.push('Network faults ran on test hosts in network namespaces, each component a process on its own host:', '')
    out.push(mdTable(['setting', 'value'], Object.entries(flatten(result.netSettings)).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])), '')
  }
  for (const p of result.phases) {
    out.push(`## ${p.title} (\`${p.fault}\`)`, '')
    if (p.error) out.push(`**The fault did not complete:** ${p.error}`, '')
    out.push(`Load: ${p.requests.sent} requests (${p.requests.gets} GET, ${p.requests.puts} PUT) in ${Math.round(p.durationMs / 1000)} s, ${p.load.skipped} skipped by the client; latency p50 ${p.requests.latencyMs.p50} ms, p99 ${p.requests.latencyMs.p99} ms, max ${p.requests.latencyMs.max} ms. Probes: ${p.probes.sent} sent, ${p.probes.failed} failed.`, '')
    if (p.events.length) {
      out.push(mdTable(['event', 'at (ms into phase)', 'victim keys', 'served again p50 / max (ms)', 'unresolved'], p.events.map((e) => [e.what, e.atMs, e.keys, `${e.servedAgain.p50Ms ?? 'n/a'} / ${e.servedAgain.maxMs ?? 'n/a'}`, e.servedAgain.unresolved.length])), '')
    }
    if (p.requests.failed > 0) {
      out.push(`Failures by status: \`${JSON.stringify(p.requests.failures.byStatus)}\`, by error code: \`${JSON.stringify(p.requests.failures.byCode)}\`, client errors: \`${JSON.stringify(p.requests.failures.byError)}\`, by op: \`${JSON.stringify(p.requests.failures.byOp)}\`.`, '')
      out.push(`Failures over time (ms into phase, per 500 ms): ${p.failureTimeline.map((b) => `${b.fromMs}: ${b.failed}`).join(', ')}`, '')
    }
    out.push(`Front ends: misdirected ${p.frontends.misdirected}, retries \`${JSON.stringify(p.frontends.retries)}\`, errors answered \`${JSON.stringify(p.frontends.errors)}\`, upstream errors \`${JSON.stringify(p.frontends.upstreamErrors)}\`.`, '')
    if (p.unavailability) out.push(`Unavailability: ${p.unavailability.keys} key(s) had a run of failed or held requests; worst ${p.unavailability.maxMs ?? 0} ms (key \`${p.unavailability.key}\`), median ${p.unavailability.p50Ms ?? 0} ms.`, '')
    out.push(`History: ${p.history.verdict} (${p.history.ops} operations on ${p.history.keys} keys, checked in ${p.history.checkMs} ms).`, '')
    for (const v of p.history.violations) {
      out.push(`- violation on key \`${v.key}\`: ${v.message}`)
    }
    if (p.history.violations.length) out.push('')
    if (p.details.table) {
      out.push(mdTable(['at (s)', 'fault', 'victim', 'held (ms)', 'sent', 'failed', 'unavailable max (ms)'], p.details.table.map((s) => [Math.round(s.atMs / 1000), s.kind, s.victim || '-', s.heldMs, s.sent, s.failed, s.unavailableMs])), '')
    }
    out.push('Details: `' + JSON.stringify(p.details) + '`', '')
    if (p.requestsFile) out.push(`Every request of the phase: \`${p.requestsFile}\`.`, '')
  }
  if (result.logs) {
    out.push('## Warnings and errors in the logs', '')
    out.push(`Logs: \`${result.logDir}\`.`, '')
    const rows = []
    for (const [file, msgs] of Object.entries(result.logs)) for (const [msg, n] of Object.entries(msgs)) rows.push([file, msg, n])
    out.push(rows.length ? mdTable(['file', 'level: message', 'count'], rows) : 'none', '')
  }
  return out.join('\n')
}

/** { a: { b: 1 } } → { 'a.b': 1 } (arrays and leaves kept). */
function flatten (o, prefix = '', out = {}) {
  for (const [k, v] of Object.entries(o)) {
    const name = prefix ? `${prefix}.${k}` : k
    if (v && typeof v === 'object' && !Array.isArray(v)) flatten(v, name, out)
    else out[name] = v
  }
  return out
}

/** Current size of each log file in `dir`, to summarise only what was logged before a point. */
function logSizes (dir) {
  const out = {}
  try {
    for (const f of fs.readdirSync(dir)) if (f.endsWith('.log')) out[f] = fs.readFileSync(path.join(dir, f), 'utf8').length
  } catch {}
  return out
}

/** Write `<outDir>/chaos.json` and `<outDir>/chaos.md`; returns their paths. */
function writeReports (result, outDir) {
  fs.mkdirSync(outDir, { recursive: true })
  const json = path.join(outDir, 'chaos.json')
  const md = path.join(outDir, 'chaos.md')
  fs.writeFileSync(json, JSON.stringify(result, null, 2) + '\n')
  fs.writeFileSync(md, toMarkdown(result) + '\n')
  return { json, md }
}

/**
 * Warn-and-above lines of each pino log file in `dir`, counted by
 * level and message (plus Node warnings and other stderr lines).
 * @param {string} dir
 * @param {Record<string, number>} [upTo] per file, only the first that many characters (e.g. before teardown)
 * @returns {Record<string, Record<string, number>>}
 */
function summariseLogs (dir, upTo) {
  const names = { 40: 'warn', 50: 'error', 60: 'fatal' }
  const out = {}
  let files = []
  try { files = fs.readdirSync(dir).filter((f) => f.endsWith('.log')) } catch { return out }
  for (const f of files) {
    const counts = {}
    const inc = (k) => { counts[k] = (counts[k] || 0) + 1 }
    let text = fs.readFileSync(path.join(dir, f), 'utf8')
    if (upTo && Number.isInteger(upTo[f])) text = text.slice(0, upTo[f])
    let continuation = false // lines after a Node warning belong to it
    for (const line of text.split('\n')) {
      if (!line.startsWith('{')) {
        const warning = /^\(node:\d+\) (.*)/.exec(line)
        if (warning) {
          inc(`stderr: ${warning[1].slice(0, 120)}`)
          continuation = true
        } else if (line.trim() && !continuation) inc(`stderr: ${line.slice(0, 120)}`)
        continue
      }
      continuation = false
      let o
      try { o = JSON.parse(line) } catch { continue }
      if (!(o.level >= 40)) continue
      inc(`${names[o.level] || o.level}: ${o.msg}`)
    }
    if (Object.keys(counts).length) out[f] = counts
  }
  return out
}

module.exports = { formatTable, formatSteps, toMarkdown, writeReports, summariseLogs, logSizes, COLUMNS }
