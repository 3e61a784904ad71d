'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

/**
 * A Markdown table (also readable on a terminal: columns are padded).
 * @param {string[]} headers
 * @param {Array<Array<string|number>>} rows
 * @param {string} [align] one letter per column, 'l' or 'r' (default: first left, rest right)
 */
function markdownTable (headers, rows, align) {
  const al = align || headers.map((_, i) => (i === 0 ? 'l' : 'r')).join('')
  const cells = [headers, ...rows].map((r) => r.map((c) => String(c)))
  const width = headers.map((_, i) => Math.max(3, ...cells.map((r) => r[i].length)))
  const pad = (s, i) => (al[i] === 'r' ? s.padStart(width[i]) : s.padEnd(width[i]))
  const line = (r) => `| ${r.map(pad).join(' | ')} |`
  const rule = `|${width.map((w, i) => (al[i] === 'r' ? `${'-'.repeat(w + 1)}:` : `:${'-'.repeat(w + 1)}`)).join('|')}|`
  return [line(cells[0]), rule, ...cells.slice(1).map(line)].join('\n')
}

/** What the figures were measured on. */
function environment () {
  const cpus = os.cpus()
  return {
    date: new Date().toISOString(),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    cpus: cpus.length,
    cpuModel: cpus[0] ? cpus[0].model : 'unknown',
    totalMemMB: Math.round(os.totalmem() / 2 ** 20),
    loadavg: os.loadavg().map((x) => Number(x.toFixed(2)))
  }
}

/** Write `<outDir>/<name>.json` and `<outDir>/<name>.md`; returns both paths. */
function writeResults (outDir, name, json, markdown) {
  fs.mkdirSync(outDir, { recursive: true })
  const jsonPath = path.join(outDir, `${name}.json`)
  const mdPath = path.join(outDir, `${name}.md`)
  fs.writeFileSync(jsonPath, JSON.stringify(json, null, 2) + '\n')
  fs.writeFileSync(mdPath, markdown.endsWith('\n') ? markdown : markdown + '\n')
  return { jsonPath, mdPath }
}

const fmt = {
  int: (x) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : 'n/a'),
  fixed: (x, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a'),
  mb: (bytes) => (Number.isFinite(bytes) ? (bytes / 2 ** 20).toFixed(1) : 'n/a'),
  signedMb: (bytes) => (Number.isFinite(bytes) ? `${bytes >= 0 ? '+' : ''}${(bytes / 2 ** 20).toFixed(1)}` : 'n/a')
}

module.exports = { markdownTable, environment, writeResults, fmt }
