'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { parsePayload } = require('../../loadgen')
const { startFixture, closedPort } = require('./helpers/fixture-server')

const BIN = path.join(__dirname, '../../loadgen/bin/loadgen.js')
const SMOKE = path.join(__dirname, '../../loadgen/examples/smoke.yaml')

/** Run the CLI; resolves { code, stdout, stderr } whatever the exit code. */
function cli (args, options = {}) {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 30000, ...options }, (err, stdout, stderr) => {
      resolve({ code: err ? err.code : 0, stdout, stderr })
    })
  })
}

let dir
let fixture
beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loadgen-cli-')) })
afterEach(async () => {
  fs.rmSync(dir, { recursive: true, force: true })
  if (fixture) await fixture.close()
  fixture = null
})

test('validate prints the plan; a bad spec exits 2 naming the field', async () => {
  const good = await cli(['validate', SMOKE])
  expect(good.code).toBe(0)
  expect(good.stdout).toContain('smoke.yaml: valid')
  expect(good.stdout).toContain('phase 3 zipf: 2 s at 300 req/s = 600 requests, starts at 2.5 s')
  expect(good.stdout).toMatch(/top keys: key-0 26\.\d\d%/)

  const file = path.join(dir, 'bad.yaml')
  fs.writeFileSync(file, 'phases:\n  - { duration: 2s, rate: 100, distribution: { type: poisson } }\n')
  const bad = await cli(['validate', file])
  expect(bad.code).toBe(2)
  expect(bad.stderr).toContain('phases[0].distribution.lambda: expected a mean key index lambda > 0 (poisson needs lambda), got nothing')
})

test('generate writes the payload, all phases or selected ones', async () => {
  const out = path.join(dir, 'payload.txt')
  const all = await cli(['generate', SMOKE, '-o', out])
  expect(all.code).toBe(0)
  expect(all.stderr).toBe(`wrote 1450 requests to ${out}\n`)
  const parsed = parsePayload(fs.readFileSync(out, 'utf8'))
  expect(parsed.requests).toHaveLength(1450)
  expect(parsed.phases.map((p) => p.name)).toEqual(['preload', 'uniform', 'zipf', 'hot'])

  const one = await cli(['generate', SMOKE, '--phase', 'zipf'])
  expect(one.code).toBe(0)
  expect(parsePayload(one.stdout).phases.map((p) => p.name)).toEqual(['zipf'])
  expect(parsePayload(one.stdout).requests).toEqual(parsed.requests.filter((r) => r.phase === 2).map((r) => ({ ...r, phase: 0 })))

  const missing = await cli(['generate', SMOKE, '--phase', 'nope'])
  expect(missing.code).toBe(2)
  expect(missing.stderr).toContain('--phase nope: no such phase (have 0:preload, 1:uniform, 2:zipf, 3:hot)')
})

test('run prints the summary table and writes the JSON result file', async () => {
  fixture = await startFixture()
  const spec = path.join(dir, 'short.yaml')
  fs.writeFileSync(spec, 'seed: 3\nphases:\n  - { name: one, duration: 1s, rate: 100 }\n  - { name: two, duration: 1s, rate: 150, keys: { count: 5 } }\n')
  const out = path.join(dir, 'result.json')
  const r = await cli(['run', spec, '--target', fixture.url, '-o', out, '--servers', 's0,s1,s2,s3'])
  expect(r.code).toBe(0)
  expect(r.stdout).toContain('chopper-loadgen: open loop, latency from intended send time (coordinated omission corrected)')
  expect(r.stdout).toMatch(/phase +target\/s +achieved\/s +p50 ms +p90 ms +p99 ms +p99\.9 ms +max ms +errors +imbalance/)
  expect(r.stdout).toMatch(/\none +100\.0 +\d+\.\d/)
  expect(r.stdout).toMatch(/\ntwo +150\.0 +\d+\.\d/)
  expect(r.stdout).toMatch(/\nall +125\.0 +\d+\.\d/)
  expect(r.stdout).toContain(`result written to ${out}`)
  const result = JSON.parse(fs.readFileSync(out, 'utf8'))
  expect(result.phases.map((p) => p.responses)).toEqual([100, 150])
  expect(result.servers).toEqual(['s0', 's1', 's2', 's3'])
  expect(fixture.arrivals).toHaveLength(250)
})

test('run against an unreachable target exits 1 quickly with a clear error', async () => {
  const port = await closedPort()
  const started = Date.now()
  const r = await cli(['run', SMOKE, '--target', `http://127.0.0.1:${port}`, '-o', path.join(dir, 'r.json')])
  expect(r.code).toBe(1)
  expect(r.stderr).toBe(`loadgen: target http://127.0.0.1:${port} is unreachable: ECONNREFUSED connecting to 127.0.0.1:${port} [CHOPPER_ERR_UPSTREAM_UNREACHABLE]\n`)
  expect(Date.now() - started).toBeLessThan(5000)
  expect(fs.existsSync(path.join(dir, 'r.json'))).toBe(false)
})

test('usage errors exit 2 with the usage text', async () => {
  for (const args of [['frobnicate', SMOKE], ['run', SMOKE], ['run', SMOKE, '--target', 'http://127.0.0.1:1', '--connections', 'many']]) {
    const r = await cli(args)
    expect(r.code).toBe(2)
    expect(r.stderr).toContain('Usage:')
  }
  const help = await cli(['--help'])
  expect(help.code).toBe(0)
  expect(help.stdout).toContain('loadgen run <spec> --target URL')
})
