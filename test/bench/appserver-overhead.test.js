'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')
const { parseSliceKeyHeader } = require('../../bench/appserver-overhead')
const { parseWrk, toMs, hasWrk } = require('../../bench/lib/wrk')

const SCRIPT = path.join(__dirname, '..', '..', 'bench', 'appserver-overhead.js')
const run = (args) => promisify(execFile)(process.execPath, [SCRIPT, ...args], { timeout: 30000 })
const wrkInstalled = hasWrk()
if (!wrkInstalled) console.warn('SKIPPING the appserver-overhead harness test: `wrk` is not on PATH (CI installs it with apt-get install -y wrk)')

const WRK_OUTPUT = `Running 1s test @ http://127.0.0.1:4000/hello?key=k
  1 threads and 32 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     4.01ms    1.20ms  30.00ms   90.00%
    Req/Sec     8.00k   500.00     9.00k    70.00%
  Latency Distribution
     50%  850.00us
     75%    3.90ms
     90%    5.10ms
     99%    1.20s
  8123 requests in 1.00s, 1.50MB read
  Socket errors: connect 0, read 2, write 1, timeout 3
  Non-2xx or 3xx responses: 7
Requests/sec:   8120.55
Transfer/sec:      1.50MB
`

describe('appserver-overhead bench: parsing', () => {
  test('wrk output: throughput, percentiles in ms, errors', () => {
    expect(parseWrk(WRK_OUTPUT)).toEqual({ rps: 8120.55, requests: 8123, p50Ms: 0.85, p75Ms: 3.9, p90Ms: 5.1, p99Ms: 1200, non2xx: 7, socketErrors: 6 })
    expect(toMs('2m')).toBe(120000)
    expect(toMs('fast')).toBeNaN()
    expect(() => parseWrk('no figures')).toThrow(/unreadable wrk output/)
  })

  test('the slice-key header parser takes exact unsigned 32-bit decimals only', () => {
    expect(parseSliceKeyHeader('0')).toBe(0)
    expect(parseSliceKeyHeader('4294967295')).toBe(4294967295)
    for (const bad of ['4294967296', '99999999999', '', ' 7', '-1', '1.5', '0x10', '1e3', 'abc', undefined]) {
      expect(parseSliceKeyHeader(bad)).toBe(-1)
    }
  })
})

describe('appserver-overhead bench: harness', () => {
  let dir
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-ao-')) })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

  ;(wrkInstalled ? test : test.skip)('runs end to end on 1 s rounds and writes both reports with figures', async () => {
    const { stdout } = await run(['--duration', '1', '--rounds', '1', '--warmup', '0', '--connections', '4', '--iterations', '20000', '--out', dir])
    const json = JSON.parse(fs.readFileSync(path.join(dir, 'appserver-overhead.json'), 'utf8'))
    expect(json.rounds).toHaveLength(1)
    for (const name of ['plain', 'guarded', 'unshaped']) {
      const v = json.summary.variants[name]
      expect(v.rps).toBeGreaterThan(0)
      expect(v.p50Ms).toBeGreaterThan(0)
      expect(v.p99Ms).toBeGreaterThanOrEqual(v.p50Ms)
      expect(v.cpuUsPerRequest).toBeGreaterThan(0)
      expect(v.non2xx).toBe(0)
    }
    expect(Number.isFinite(json.summary.overhead.usPerRequest)).toBe(true)
    expect(Number.isFinite(json.summary.overhead.throughputLossPct)).toBe(true)
    expect(Number.isFinite(json.summary.shapes.cpuUsPerRequest)).toBe(true)
    expect(json.summary.shapes.perRoundCpuUs).toHaveLength(1)
    // Every guarded request went through the shard guard (wrk counts only completed ones).
    expect(json.guardCheck.wrkRequests).toBeGreaterThan(0)
    expect(json.guardCheck.admitted).toBeGreaterThanOrEqual(json.guardCheck.wrkRequests)

    const hashes = json.micro.filter((m) => m.name.startsWith('sliceKey'))
    expect(hashes.map((m) => m.keyLength)).toEqual([8, 32, 128])
    for (const m of json.micro) expect(m.medianNs).toBeGreaterThan(0)
    expect(json.verdict.map((x) => x.keyLength)).toEqual([8, 32, 128])
    for (const x of json.verdict) expect(Number.isFinite(x.savedNs)).toBe(true)

    const md = fs.readFileSync(path.join(dir, 'appserver-overhead.md'), 'utf8')
    expect(md).toMatch(/\| plain Express \(with the request shapes\) +\| +[\d,]+ \|/)
    expect(md).toMatch(/X-Chopper-Slice-Key/)
    expect(stdout).toContain('Overhead of the shard guard')
    expect(stdout).toContain('What the request shapes save')
  }, 30000)

  test('a bad flag exits 2 and names it', async () => {
    await expect(run(['--duration', 'soon'])).rejects.toMatchObject({ code: 2, stderr: expect.stringMatching(/invalid --duration: expected an integer >= 1, got "soon"/) })
  })
})
