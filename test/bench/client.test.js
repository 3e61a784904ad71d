'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')
const { missingReason } = require('../../bench/proxies/tools')

const BENCH = path.join(__dirname, '..', '..', 'bench', 'client.js')
const execFileP = promisify(execFile)

// bench/client.js on a tiny input: the harness, not the figures.
describe('node bench/client.js', () => {
  let dir
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-client-')) })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

  test('a one-round run reports p50, p99 and CPU per request for every contender, each request answered', async () => {
    const out = path.join(dir, 'client')
    await execFileP(process.execPath, [BENCH, '--duration', '0.5', '--rounds', '1', '--warmup', '0', '--connections', '4', '--out', out], { timeout: 60000 })
    const result = JSON.parse(fs.readFileSync(`${out}.json`, 'utf8'))
    expect(result.command).toBe(`node bench/client.js --duration 0.5 --rounds 1 --warmup 0 --connections 4 --out ${out}`)
    expect(result.rows.map((r) => r.id)).toEqual(['client', 'frontend', 'haproxy', 'direct'])
    const haproxyMissing = missingReason('haproxy')
    for (const row of result.rows) {
      if (row.id === 'haproxy' && haproxyMissing) {
        expect(row).toMatchObject({ available: false, reason: haproxyMissing })
        continue
      }
      expect(row).toMatchObject({ available: true, rounds: 1, errors: 0 })
      expect(row.rps).toBeGreaterThan(0)
      expect(row.p99Ms).toBeGreaterThanOrEqual(row.p50Ms)
      expect(row.callerCpuUsPerReq).toBeGreaterThan(0)
      expect(row.backendCpuUsPerReq).toBeGreaterThan(0)
    }
    const by = Object.fromEntries(result.rows.map((r) => [r.id, r]))
    // No proxy process for the client and direct; the front end's CPU is counted.
    expect(by.client.proxyCpuUsPerReq).toBe(0)
    expect(by.frontend.proxyCpuUsPerReq).toBeGreaterThan(0)
    expect(by.frontend.routingCpuUsPerReq).toBeCloseTo(by.frontend.callerCpuUsPerReq + by.frontend.proxyCpuUsPerReq, 6)
    expect(fs.readFileSync(`${out}.md`, 'utf8')).toMatch(/\| @chopper\/client, routed in the caller \| \d+ \|/)
  }, 90000)
})
