'use strict'

/**
 * A progress bar on a TTY stream (stderr), redrawn in place with \r; a no-op
 * when the stream is not a TTY, so logs and CI output stay clean.
 * @param {NodeJS.WriteStream} stream
 * @param {string} label
 * @returns {{ update: (done: number, total: number) => void, end: () => void }}
 */
function createProgress (stream, label) {
  if (!stream || !stream.isTTY) return { update () {}, end () {} }
  const started = Date.now()
  let last = 0
  return {
    update (done, total) {
      const now = Date.now()
      if (done < total && now - last < 100) return
      last = now
      const frac = total ? done / total : 1
      const width = 24
      const filled = Math.round(frac * width)
      const secs = ((now - started) / 1000).toFixed(1)
      stream.write(`\r${label} [${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${String(Math.floor(frac * 100)).padStart(3)}% ${done}/${total} periods ${secs}s`)
    },
    end () { stream.write('\n') }
  }
}

module.exports = { createProgress }
