'use strict'

const fs = require('node:fs')
const { execFileSync } = require('node:child_process')

/** This process's open-files limit, `{ soft, hard }` (Infinity for unlimited); null without /proc. */
function fdLimit () {
  try {
    const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'))
    const n = (s) => (s === 'unlimited' ? Infinity : Number(s))
    return m ? { soft: n(m[1]), hard: n(m[2]) } : null
  } catch {
    return null
  }
}

function prlimit (soft, hard) {
  try {
    execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${soft}:${hard}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/**
 * Make sure this process (and every child forked after this call, which
 * inherits the limit) may open `need` descriptors. Raises the soft limit up
 * to the hard one, which needs no privilege; above the hard one it tries
 * `prlimit` to `target` (needs CAP_SYS_RESOURCE, e.g. root outside a
 * container that drops it). Throws when `need` cannot be met.
 * @returns {{ before, after, raised: boolean }}
 */
function ensureFdLimit (need, target = 65536) {
  const before = fdLimit()
  if (!before || before.soft >= need) return { before, after: before, raised: false }
  if (before.hard < need) prlimit(Math.max(need, target), Math.max(need, target))
  let after = fdLimit()
  if (after.soft < need && after.hard > after.soft) {
    prlimit(after.hard === Infinity ? Math.max(need, target) : after.hard, after.hard === Infinity ? 'unlimited' : after.hard)
    after = fdLimit()
  }
  if (after.soft < need) {
    throw new Error(`need ${need} open files per process but the limit is ${after.soft} (hard ${after.hard}) and it cannot be raised here; run as root with CAP_SYS_RESOURCE, raise it with \`ulimit -n\`, or ask for fewer connections`)
  }
  return { before, after, raised: true }
}

module.exports = { fdLimit, ensureFdLimit }
