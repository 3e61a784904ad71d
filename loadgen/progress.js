'use strict'

/**
 * One-line progress display for a TTY, redrawn in place with \r. Only the
 * CLI turns it on (progress: 'auto' means "when the stream is a TTY"), so
 * logs and CI output never fill with partial lines.
 * @param {object} s status from the driver
 * @param {number} s.elapsedMs
 * @param {number} s.totalMs
 * @param {{ index: number, name: string, rate: number } | null} s.phase
 * @param {number} s.phases
 * @param {number} s.sent
 * @param {number} s.inFlight
 * @param {object|null} s.lastWindow latest closed window summary
 * @param {number|null} s.lastWindowRate target rate of that window's phase
 * @param {number} [width]
 */
function formatProgressLine (s, width = 100) {
  const frac = Math.min(1, s.elapsedMs / s.totalMs)
  const barWidth = 20
  const filled = Math.round(frac * barWidth)
  const bar = '[' + '#'.repeat(filled) + '-'.repeat(barWidth - filled) + ']'
  const parts = [
    bar,
    `${String(Math.floor(frac * 100)).padStart(3)}%`,
    `${(s.elapsedMs / 1000).toFixed(1)}/${(s.totalMs / 1000).toFixed(1)}s`,
    s.phase ? `phase ${s.phase.index + 1}/${s.phases} ${s.phase.name}` : 'draining',
    `sent ${s.sent}`
  ]
  const w = s.lastWindow
  if (w) {
    // Per-second responses against the target of the phase that window belonged to.
    parts.push(`resp/s ${w.responses}${s.lastWindowRate ? '/' + s.lastWindowRate : ''}`)
    if (w.latencyMs.p99 !== null) parts.push(`p99 ${w.latencyMs.p99}ms`)
    const errs = Object.values(w.errors).reduce((a, b) => a + b, 0)
    parts.push(`err ${errs}`)
    if (w.imbalance !== null) parts.push(`imb ${w.imbalance.toFixed(2)}`)
  }
  parts.push(`in-flight ${s.inFlight}`)
  const line = parts.join('  ')
  return line.length > width - 1 ? line.slice(0, width - 1) : line.padEnd(width - 1)
}

/**
 * @param {import('node:stream').Writable & { columns?: number }} stream
 * @returns {{ render: (status: object) => void, done: () => void }}
 */
function createProgress (stream) {
  let drawn = false
  return {
    render (status) {
      stream.write('\r' + formatProgressLine(status, stream.columns || 100))
      drawn = true
    },
    done () {
      if (drawn) stream.write('\n')
      drawn = false
    }
  }
}

module.exports = { formatProgressLine, createProgress }
