'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { missingReason } = require('../../bench/proxies/tools')

const BENCH = path.join(__dirname, '..', '..', 'bench', 'forwarding.js')
const wrkMissing = missingReason('wrk')

/** Run the bench to completion; resolves with its exit code and output. */
function runBench (args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BENCH, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { out += d })
    child.once('error', reject)
    child.once('exit', (code) => resolve({ code, out }))
  })
}

describe('node bench/forwarding.js', () => {
  let dir
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-forwarding-')) })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

  const e2e = wrkMissing ? (name, fn) => test.skip(`${name} (skipped: ${wrkMissing})`, fn) : test
  e2e('a one-round, one-second run reports a row with figures per single-process contender', async () => {
    const out = path.join(dir, 'forwarding')
    const { code, out: log } = await runBench(['--duration', '1', '--rounds', '1', '--warmup', '0', '--connections', '8', '--only', 'single', '--out', out])
    expect({ code, log }).toEqual({ code: 0, log: expect.any(String) })
    const result = JSON.parse(fs.readFileSync(`${out}.json`, 'utf8'))
    expect(result.command).toBe(`node bench/forwarding.js --duration 1 --rounds 1 --warmup 0 --connections 8 --only single --out ${out}`)
    expect(result.machine).toMatchObject({ cores: expect.any(Number), loadavgStart: expect.any(Array), loadavgEnd: expect.any(Array) })
    expect(result.configurations.map((c) => c.id)).toEqual(['single'])
    const rows = result.configurations[0].rows
    expect(rows.map((r) => r.id)).toEqual(['haproxy', 'nginx', 'chopper', 'chopper-undici', 'chopper-node', 'chopper-axios', 'direct'])
    const haproxy = rows.find((r) => r.id === 'haproxy')
    for (const r of rows) {
      if (!r.available) {
        // Only a missing peer proxy may be absent, and it says how to install it.
        expect(['haproxy', 'nginx']).toContain(r.id)
        expect(r.reason).toMatch(/is not installed \(apt-get install -y (haproxy|nginx)\)/)
        continue
      }
      expect(r).toMatchObject({ rps: expect.any(Number), p50Ms: expect.any(Number), p99Ms: expect.any(Number), backendCpuPct: expect.any(Number) })
      expect(r.rps).toBeGreaterThan(0)
      // Every request was forwarded and answered 200: a broken route would show as non-2xx.
      expect({ id: r.id, errors: r.errors }).toEqual({ id: r.id, errors: 0 })
      expect(r.rounds).toHaveLength(1)
      if (haproxy.available) expect(r).toMatchObject({ rpsRatio: expect.any(Number), p99Ratio: expect.any(Number) })
    }
    expect(rows.find((r) => r.id === 'chopper').available).toBe(true)
    expect(rows.find((r) => r.id === 'chopper').cpuUsPerReq).toBeGreaterThan(0)
    const md = fs.readFileSync(`${out}.md`, 'utf8')
    expect(md).toMatch(/## Single process/)
    expect(md).toMatch(/\| contender \| req\/s \| p50 ms \| p99 ms \| req\/s ÷ HAProxy \| p99 ÷ HAProxy \|/)
    expect(md).toContain(result.command)
  })

  test('a bad flag is refused with the usage line, before anything starts', async () => {
    const { code, out } = await runBench(['--only', 'some'])
    expect(code).toBe(2)
    expect(out).toMatch(/--only must be one of single, all/)
    expect(out).toMatch(/usage: node bench\/forwarding\.js/)
  })
})
