'use strict'

const { spawnSync } = require('node:child_process')

/**
 * The external programs the proxy benchmark drives, how to ask each for its
 * version, and the line that installs it (Debian/Ubuntu, as .ci/run does).
 */
const TOOLS = Object.freeze({
  wrk: { args: ['--version'], install: 'apt-get install -y wrk' },
  haproxy: { args: ['-v'], install: 'apt-get install -y haproxy' },
  nginx: { args: ['-v'], install: 'apt-get install -y nginx' }
})

/**
 * The first line a tool prints about its version, or null when the binary is
 * absent. wrk exits 1 and nginx writes to stderr, so both streams are read and
 * the exit code is ignored.
 * @param {keyof TOOLS} name
 * @param {string} [binary] the program to run (defaults to `name`)
 */
function toolVersion (name, binary = name) {
  const r = spawnSync(binary, TOOLS[name].args, { encoding: 'utf8', timeout: 5000 })
  if (r.error) return null
  const line = `${r.stdout || ''}\n${r.stderr || ''}`.split('\n').map((l) => l.trim()).find(Boolean)
  // Drop the copyright and web address that wrk and HAProxy append.
  return line ? line.replace(/\s+(Copyright|- https?:).*$/, '') : null
}

/** Why a tool cannot be used (with the install line), or null when it can. */
function missingReason (name, binary = name) {
  return toolVersion(name, binary) ? null : `${binary} is not installed (${TOOLS[name].install})`
}

module.exports = { TOOLS, toolVersion, missingReason }
