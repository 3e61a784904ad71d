'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { summariseRequests, servedAgain, failureTimeline, promValue, promSeries, diffSeries } = require('../../bench/chaos/measure')
const { formatTable, toMarkdown } = require('../../bench/chaos/report')
const { resolveOptions } = require('../../bench/chaos/index')
const { unavailability } = require('../../bench/chaos/unavailability')
const { planSchedule, stepRows, KINDS } = require('../../bench/chaos/nemesis')
const { findBinary } = require('../../apps/kv-cache/embedded')

const RUN = path.join(__dirname, '..', '..', 'bench', 'chaos', 'run.js')

// Records as load.js writes them (times in ms on one clock).
const rec = (o) => ({ op: 'get', key: 'k', fe: 0, probe: false, call: 0, ret: 1, status: 200, code: null, error: null, servedBy: 'app-1', ...o })

describe('chaos bench: figures', () => {
  test('failed counts no answer and any non-2xx except a 404 GET', () => {
    const s = summariseRequests([
      rec({}),
      rec({ status: 404, code: 'CHOPPER_ERR_NOT_FOUND' }),
      rec({ op: 'put', status: 204 }),
      rec({ op: 'put', status: 421, code: 'CHOPPER_ERR_FENCED_WRITE' }),
      rec({ status: 502, code: 'CHOPPER_ERR_UPSTREAM_UNREACHABLE' }),
      rec({ status: null, error: 'TimeoutError', ret: null })
    ])
    expect(s.sent).toBe(6)
    expect(s.failed).toBe(3)
    expect(s.failedPct).toBeCloseTo(50)
    expect(s.failures.byStatus).toEqual({ 421: 1, 502: 1 })
    expect(s.failures.byCode).toEqual({ CHOPPER_ERR_FENCED_WRITE: 1, CHOPPER_ERR_UPSTREAM_UNREACHABLE: 1 })
    expect(s.failures.byError).toEqual({ TimeoutError: 1 })
  })

  test('served again: first served answer per key sent after the fault, max over keys', () => {
    const records = [
      rec({ key: 'a', call: 5, ret: 8 }), // before the fault: ignored
      rec({ key: 'a', call: 10, ret: 40, status: 502 }), // failed
      rec({ key: 'a', call: 12, ret: 30 }),
      rec({ key: 'b', call: 11, ret: 90, status: 404, code: 'CHOPPER_ERR_NOT_FOUND' }),
      rec({ key: 'b', call: 20, ret: 25 })
    ]
    const r = servedAgain(records, { at: 10, keys: ['a', 'b', 'c'] })
    expect(r.maxMs).toBe(20) // a at 30, b at 25
    expect(r.unresolved).toEqual(['c'])
    expect(failureTimeline(records, 0, 10)).toEqual([{ fromMs: 10, failed: 1 }])
  })

  test('reads Prometheus counters with and without labels', () => {
    const text = [
      '# HELP chopper_frontend_misdirected_total 421 answers',
      'chopper_frontend_misdirected_total 7',
      'chopper_frontend_retries_total{reason="misdirected"} 3',
      'chopper_frontend_retries_total{reason="unreachable"} 2'
    ].join('\n')
    expect(promValue(text, 'chopper_frontend_misdirected_total')).toBe(7)
    expect(promValue(text, 'chopper_frontend_retries_total')).toBe(5)
    expect(promValue(text, 'chopper_frontend_retries_total', (l) => l.includes('unreachable'))).toBe(2)
    expect(diffSeries({ 'reason="misdirected"': 1 }, promSeries(text, 'chopper_frontend_retries_total'))).toEqual({ 'reason="misdirected"': 2, 'reason="unreachable"': 2 })
  })

  test('options: --quick shortens unless a value is given; bad values are refused by name', () => {
    expect(resolveOptions({ quick: true })).toMatchObject({ moves: 100, beforeMs: 2000 })
    expect(resolveOptions({ quick: true, moves: 50 }).moves).toBe(50)
    expect(resolveOptions({}).moves).toBe(1000)
    expect(() => resolveOptions({ only: ['nope'] })).toThrow(/invalid only: unknown fault "nope"/)
    expect(() => resolveOptions({ rate: -1 })).toThrow(/invalid rate/)
    expect(() => resolveOptions({ heldReads: 'peek' })).toThrow(/invalid heldReads: expected "wait" or "ask"/)
    expect(resolveOptions({ heldReads: 'ask' }).heldReads).toBe('ask')
  })

  test('unavailability: per key, the longest run of failed or held (> 1 s) requests, ended by a served one', () => {
    const at = (key, call, ms, status = 200) => rec({ key, call, ret: call + ms, status })
    const records = [at('a', 0, 10), at('a', 100, 10, 503), at('a', 200, 1500), at('a', 400, 10, 503), at('a', 2000, 10), at('a', 2100, 10, 503), at('b', 0, 10)]
    expect(unavailability(records)).toEqual({ maxMs: 1600, key: 'a', keys: 1, p50Ms: 1600 })
    expect(unavailability([at('b', 0, 10)])).toEqual({ maxMs: null, key: null, keys: 0, p50Ms: null })
  })

  test('network-fault options: --net auto by default, hold times validated by name', () => {
    expect(resolveOptions({}).net).toBe('auto')
    expect(resolveOptions({ quick: true })).toMatchObject({ netHoldMs: 2000, netDelayHoldMs: 15000 })
    expect(resolveOptions({}).netDelayHoldMs).toBe(60000)
    expect(() => resolveOptions({ net: 'maybe' })).toThrow(/invalid net/)
    expect(() => resolveOptions({ netLossPct: 0 })).toThrow(/invalid netLossPct/)
  })

  test('nemesis: the schedule is a pure function of the seed; a row per step counts its span', () => {
    const hosts = { servers: ['app-1', 'app-2'], frontends: ['fe-1'] }
    const a = planSchedule({ seed: 7, durationMs: 120000, ...hosts })
    expect(planSchedule({ seed: 7, durationMs: 120000, ...hosts })).toEqual(a)
    expect(planSchedule({ seed: 8, durationMs: 120000, ...hosts })).not.toEqual(a)
    expect(a.length).toBeGreaterThan(3)
    for (const [i, s] of a.entries()) {
      expect(KINDS).toContain(s.kind)
      expect(s.atMs + s.holdMs).toBeLessThanOrEqual(120000)
      if (i > 0) expect(s.atMs).toBeGreaterThanOrEqual(a[i - 1].atMs + a[i - 1].holdMs)
    }
    const at = (call, ms, status = 200) => rec({ call, ret: call + ms, status })
    const rows = stepRows([at(100, 5), at(1100, 5, 503), at(1200, 5, 503), at(1300, 5), at(2500, 5)], [{ kind: 'member-cut', victim: 'app-1', atMs: 0, heldMs: 900 }, { kind: 'clock-fast', victim: 'app-2', atMs: 1000, heldMs: 900 }], 100)
    expect(rows.map((r) => [r.sent, r.failed, r.unavailableMs])).toEqual([[1, 0, 0], [4, 2, 105]])
  })

  test('the table has a header, a rule and one line per row', () => {
    const rows = [{ title: 'SIGKILL + restart', sent: 10, failed: 1, failedPct: 10, misrouted: 0, servedAgainMs: 1234.5, unavailableMs: 2100, verdict: 'linearizable', notes: ['x'] }]
    const lines = formatTable(rows).split('\n')
    expect(lines).toHaveLength(3)
    expect(lines[0]).toMatch(/^fault\s+\| sent \| failed \| failed % \| misrouted \| served again after \(ms\) \| unavailable max \(ms\) \| history verdict \| notes$/)
    expect(lines[2]).toMatch(/SIGKILL \+ restart \| 10\s+\| 1\s+\| 10\.00\s+\| 0\s+\| 1235\s+\| 2100\s+\| linearizable\s+\| x/)
  })
})

const haveRedis = Boolean(findBinary('redis-server'))

;(haveRedis ? describe : describe.skip)('chaos bench: a tiny run (npm run chaos -- --quick --only sigkill,moves,leader-kill --moves 50)', () => {
  let dir
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chaos-test-')) })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

  test('prints the table and writes consistent JSON and Markdown', async () => {
    const args = [RUN, '--quick', '--only', 'sigkill,moves,leader-kill', '--moves', '50', '--redis-every', '20', '--before-ms', '1000', '--after-ms', '1000', '--rate', '100', '--keys', '50', '--out', dir, '--log-dir', path.join(dir, 'logs')]
    const { code, stdout, stderr } = await new Promise((resolve) => {
      execFile(process.execPath, args, { timeout: 75000, killSignal: 'SIGKILL' }, (err, stdout, stderr) => resolve({ code: err ? err.code ?? err.signal : 0, stdout, stderr }))
    })
    if (code !== 0) throw new Error(`chaos run exited with ${code}:\n${stderr.slice(-3000)}`)

    const result = JSON.parse(fs.readFileSync(path.join(dir, 'chaos.json'), 'utf8'))
    expect(result.rows.map((r) => r.fault)).toEqual(['sigkill', 'moves', 'leader-kill'])
    for (const r of result.rows) {
      expect(r.sent).toBeGreaterThan(0)
      expect(r.failed).toBeGreaterThanOrEqual(0)
      expect(r.failed).toBeLessThanOrEqual(r.sent)
      expect(r.failedPct).toBeCloseTo((100 * r.failed) / r.sent, 6)
      expect(Number.isInteger(r.misrouted) && r.misrouted >= 0).toBe(true)
      expect(['linearizable', 'violation', 'unknown']).toContain(r.verdict)
    }
    const [kill, moves, leaderKill] = result.phases
    expect(kill.error).toBeNull()
    expect(kill.events).toHaveLength(1)
    expect(kill.events[0].keys).toBeGreaterThan(0)
    expect(kill.servedAgainMs).toBeGreaterThan(0)
    expect(kill.history.ops).toBe(kill.requests.sent + kill.probes.sent)
    expect(moves.error).toBeNull()
    expect(moves.details.moves.changed).toBe(50)
    expect(moves.details.redisRestarts).toHaveLength(2)
    // The leader controller killed under load: a standby leads within 5 s, no key moves, nothing fails.
    expect(leaderKill.error).toBeNull()
    expect(leaderKill.details.takeoverMs).toBeLessThanOrEqual(5000)
    expect(leaderKill.details.churn).toBe(0)
    expect(leaderKill.details.deposedPushes.refused).toBe(leaderKill.details.deposedPushes.sent)
    expect(leaderKill.details.restartedAsStandby).toBe(true)
    expect(leaderKill.requests.failed).toBe(0)
    expect(result.settings.controller.leaseMs).toBeGreaterThan(0)
    expect(result.settings.appServer.consistency).toBe('strict')
    expect(result.settings.appServer.heldReads).toBe('wait')

    // The printed table: header, rule, one line per fault, with the JSON's numbers.
    const lines = stdout.split('\n')
    const start = lines.findIndex((l) => l.startsWith('fault '))
    const table = lines.slice(start, lines.indexOf('', start))
    expect(table[1]).toMatch(/^-+-\|-/)
    expect(table).toHaveLength(2 + result.rows.length)
    expect(table[2]).toContain(`| ${result.rows[0].sent} `)
    expect(stdout).toContain('command:  node bench/chaos/run.js --quick')
    expect(fs.readFileSync(path.join(dir, 'chaos.md'), 'utf8')).toBe(toMarkdown(result) + '\n')
  }, 90000)
})
