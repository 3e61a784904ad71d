'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')

const BIN = path.join(__dirname, '../../../loadgen/bin/loadgen.js')

/**
 * Run the driver in its own process through the CLI and return the result
 * file. Timing tests use this because jest's --detectOpenHandles hooks slow
 * every async step in the test process, enough to starve a few-hundred req/s
 * schedule on a loaded 2-core machine.
 * @param {object} spec
 * @param {string} target
 * @param {string[]} [args] extra CLI flags
 */
async function runInChild (spec, target, args = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loadgen-child-'))
  try {
    fs.writeFileSync(path.join(dir, 'spec.json'), JSON.stringify(spec))
    await promisify(execFile)(process.execPath, [BIN, 'run', path.join(dir, 'spec.json'), '--target', target, '-o', path.join(dir, 'result.json'), '--quiet', ...args], { timeout: 60000 })
    return JSON.parse(fs.readFileSync(path.join(dir, 'result.json'), 'utf8'))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

module.exports = { runInChild }
