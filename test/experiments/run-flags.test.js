'use strict'

const path = require('node:path')
const { spawnSync } = require('node:child_process')

const RUN = path.join(__dirname, '..', '..', 'bench', 'experiments', 'run.js')

// Flags are checked before anything starts: a bad one is a usage error (exit 2), not a half-run.
describe('bench/experiments/run.js flags', () => {
  test.each([
    ['--frontend-options', '{bad', /--frontend-options: expected a JSON object, got "\{bad"/],
    ['--frontend-options', '[1]', /--frontend-options: expected a JSON object/],
    ['--app-options', '"x"', /--app-options: expected a JSON object/],
    ['--strategy-options', 'null', /--strategy-options: expected a JSON object/],
    ['--load-metric', 'bytes', /--load-metric: expected cost or requests/],
    ['--rate-scale', '2', /--rate-scale: expected a number > 0 and <= 1, got "2"/],
    ['--rate-scale', '0', /--rate-scale: expected a number > 0 and <= 1/],
    ['--repeat', '0', /--repeat: expected an integer from 1 to 9, got "0"/],
    ['--repeat', '1.5', /--repeat: expected an integer from 1 to 9/],
    ['--repeat', '10', /--repeat: expected an integer from 1 to 9/],
    ['--store-latency-ms', '2000', /--store-latency-ms: expected a number of ms from 0 to 1000/]
  ])('%s %s is refused with the usage line', (flag, value, message) => {
    const r = spawnSync(process.execPath, [RUN, '3-kv-100-keys', flag, value], { encoding: 'utf8', timeout: 20000 })
    expect(r.status).toBe(2)
    expect(r.stderr + r.stdout).toMatch(message)
    expect(r.stderr + r.stdout).toMatch(/usage: node bench\/experiments\/run\.js .*\[--frontend-options JSON\]/)
  })
})
