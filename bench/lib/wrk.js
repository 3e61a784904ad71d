'use strict'

const { execFile, spawnSync } = require('node:child_process')
const { promisify } = require('node:util')

const MS_PER = { us: 1e-3, ms: 1, s: 1000, m: 60000 }

/** wrk's latency notation ("412.00us", "1.23ms", "2.01s") in milliseconds; NaN when unreadable. */
function toMs (text) {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(String(text).trim())
  return m ? Number(m[1]) * MS_PER[m[2]] : NaN
}

/**
 * The figures of one `wrk --latency` run.
 * @returns {{ rps, requests, p50Ms, p75Ms, p90Ms, p99Ms, non2xx, socketErrors }}
 */
function parseWrk (out) {
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out)
  if (!rps) throw new Error(`unreadable wrk output:\n${out}`)
  const pct = (p) => {
    const m = new RegExp(`^\\s+${p}%\\s+(\\S+)`, 'm').exec(out)
    return m ? toMs(m[1]) : NaN
  }
  const requests = /(\d+) requests in/.exec(out)
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out)
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  return {
    rps: Number(rps[1]),
    requests: requests ? Number(requests[1]) : NaN,
    p50Ms: pct(50),
    p75Ms: pct(75),
    p90Ms: pct(90),
    p99Ms: pct(99),
    non2xx: non2xx ? Number(non2xx[1]) : 0,
    socketErrors: sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0
  }
}

/**
 * Run wrk against `url` (asynchronously: the caller's event loop keeps turning).
 * @param {string} url
 * @param {{ threads?: number, connections?: number, durationS?: number }} [options]
 */
async function runWrk (url, { threads = 1, connections = 32, durationS = 5 } = {}) {
  const args = [`-t${threads}`, `-c${connections}`, `-d${durationS}s`, '--latency', url]
  // wrk stops itself after durationS; the timeout only catches a hung wrk.
  const { stdout } = await promisify(execFile)('wrk', args, { timeout: (durationS + 30) * 1000 })
  return { command: `wrk ${args.join(' ')}`, ...parseWrk(stdout) }
}

/** Whether `wrk` is on PATH. */
function hasWrk () {
  return spawnSync('wrk', ['-v']).error?.code !== 'ENOENT'
}

module.exports = { runWrk, parseWrk, toMs, hasWrk }
