'use strict'

const { execFile } = require('node:child_process')

/** Milliseconds from a wrk duration such as 812.00us, 3.81ms, 1.02s or 1.50m. */
function toMs (text) {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(text)
  if (!m) return null
  return Number(m[1]) * { us: 0.001, ms: 1, s: 1000, m: 60000 }[m[2]]
}

/**
 * The figures of one `wrk --latency` report: req/s, requests, p50 and p99 in
 * ms, non-2xx/3xx answers and socket errors.
 * @param {string} text wrk's stdout
 */
function parseWrk (text) {
  const num = (re) => { const m = re.exec(text); return m ? Number(m[1]) : null }
  const lat = (re) => { const m = re.exec(text); return m ? toMs(m[1]) : null }
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text)
  const out = {
    rps: num(/Requests\/sec:\s+([\d.]+)/),
    requests: num(/(\d+) requests in /),
    p50Ms: lat(/^\s+50%\s+(\S+)/m),
    p99Ms: lat(/^\s+99%\s+(\S+)/m),
    non2xx: num(/Non-2xx or 3xx responses: (\d+)/) ?? 0,
    socketErrors: sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0
  }
  if (out.rps === null || out.p50Ms === null || out.p99Ms === null) throw new Error(`could not read wrk's report: ${text.slice(0, 500)}`)
  return out
}

/**
 * Run wrk against `url` and parse its report. Asynchronous, so the bench can
 * sample CPU and handle signals while it runs.
 * @param {string} url
 * @param {{ threads: number, connections: number, durationS: number, binary?: string, script?: string }} options
 *   script: a wrk Lua script (-s), such as the one bench/forwarding.js writes for --body-bytes
 */
function runWrk (url, { threads, connections, durationS, binary = 'wrk', script }) {
  const args = [`-t${threads}`, `-c${connections}`, `-d${durationS}s`, '--latency', ...(script ? ['-s', script] : []), url]
  return new Promise((resolve, reject) => {
    execFile(binary, args, { timeout: (durationS + 30) * 1000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`wrk ${args.join(' ')} failed: ${stderr || err.message}`))
      try { resolve(parseWrk(stdout)) } catch (e) { reject(e) }
    })
  })
}

module.exports = { runWrk, parseWrk, toMs }
