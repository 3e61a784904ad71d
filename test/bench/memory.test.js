'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')
const { slicedAssignment } = require('../../bench/lib/assignments')
const { validateAssignment } = require('../../core/assignment')
const { KEYSPACE_SIZE } = require('../../core/keyspace')

const SCRIPT = path.join(__dirname, '..', '..', 'bench', 'memory.js')
const run = (args) => promisify(execFile)(process.execPath, [SCRIPT, ...args], { timeout: 30000 })

describe('memory bench', () => {
  let dir
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-mem-')) })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

  test('the sliced assignment is valid, tiles the keyspace evenly and deals slices round-robin', () => {
    const a = slicedAssignment({ slices: 7, servers: 3 })
    expect(() => validateAssignment(a)).not.toThrow()
    expect(a.slices[0].start).toBe(0)
    expect(a.slices[6].end).toBe(KEYSPACE_SIZE)
    expect(a.slices.map((s) => s.servers[0])).toEqual(['app-0', 'app-1', 'app-2', 'app-0', 'app-1', 'app-2', 'app-0'])
    const widths = a.slices.map((s) => s.end - s.start)
    expect(Math.max(...widths) - Math.min(...widths)).toBeLessThanOrEqual(1)
  })

  test('runs end to end on 1k slices and 200 connections and writes both reports with figures', async () => {
    const { stdout } = await run(['--slices', '1000', '--servers', '4', '--connections', '200', '--batch', '50', '--out', dir])
    const json = JSON.parse(fs.readFileSync(path.join(dir, 'memory.json'), 'utf8'))
    for (const holder of [json.frontend, json.appserver]) {
      expect(holder.installedSlices).toBe(1000)
      expect(holder.states.map((s) => s.state)).toEqual(['bare Node process', 'started, no assignment', 'assignment installed'])
      for (const s of holder.states) {
        expect(s.rss).toBeGreaterThan(0)
        expect(s.heapUsed).toBeGreaterThan(0)
        expect(s.gc).toBe(true)
      }
    }
    const c = json.connections
    expect(c.states).toHaveLength(5)
    const [idle, open, inflight, answered, closed] = c.states
    expect(open.fds).toBeGreaterThanOrEqual(idle.fds + 200) // the front end really held them
    expect(inflight.heldAtBackend).toBeGreaterThan(0)
    expect(c.tally).toEqual(expect.objectContaining({ answered: 200, statuses: { 200: 200 }, errors: 0 }))
    expect(answered.fds).toBeGreaterThanOrEqual(idle.fds + 200)
    expect(closed.fds).toBeLessThanOrEqual(answered.fds - 200)
    for (const k of ['frontendHeapBytesPerSlice', 'appserverHeapBytesPerSlice', 'rssKiBPerIdleConnection', 'rssKiBPerInflightConnection']) {
      expect(Number.isFinite(json.derived[k])).toBe(true)
    }
    const md = fs.readFileSync(path.join(dir, 'memory.md'), 'utf8')
    expect(md).toMatch(/\| front end +\| bare Node process +\| +[\d.]+ \|/)
    expect(md).toMatch(/200 requests in flight/)
    expect(stdout).toContain('# Memory: front end and app server')
  }, 30000)

  test('a bad flag exits 2 and names it', async () => {
    await expect(run(['--connections', '0'])).rejects.toMatchObject({ code: 2, stderr: expect.stringMatching(/invalid --connections: expected an integer >= 1, got "0"/) })
  })
})
