'use strict'

const { Writable } = require('node:stream')
const { run, formatSummary } = require('../../loadgen')
const { formatProgressLine } = require('../../loadgen/progress')
const { startFixture } = require('./helpers/fixture-server')

let fixture
afterEach(async () => {
  if (fixture) await fixture.close()
  fixture = null
})

test('progress line: bar, phase, counts and the last window', () => {
  const line = formatProgressLine({
    elapsedMs: 30000,
    totalMs: 120000,
    phase: { index: 1, name: 'hot', rate: 500 },
    phases: 3,
    sent: 15000,
    inFlight: 7,
    lastWindow: { responses: 498, latencyMs: { p99: 3.2 }, errors: { '4xx': 1, '5xx': 0, timeout: 0 }, imbalance: 1.234 },
    lastWindowRate: 500
  }, 200)
  expect(line.trimEnd()).toBe('[#####---------------]   25%  30.0/120.0s  phase 2/3 hot  sent 15000  resp/s 498/500  p99 3.2ms  err 1  imb 1.23  in-flight 7')
  expect(formatProgressLine({ elapsedMs: 0, totalMs: 1000, phase: null, phases: 1, sent: 0, inFlight: 0, lastWindow: null }, 30)).toHaveLength(29)
})

test('a run draws the progress bar on a TTY stream and ends the line; not on a plain stream', async () => {
  fixture = await startFixture()
  const written = []
  const tty = new Writable({ write (chunk, enc, cb) { written.push(String(chunk)); cb() } })
  tty.isTTY = true
  tty.columns = 120
  const result = await run({ seed: 1, phases: [{ duration: 0.6, rate: 100 }] }, { target: fixture.url, progress: 'auto', progressStream: tty })
  expect(written.length).toBeGreaterThan(1)
  expect(written[0]).toMatch(/^\r\[[#-]{20}\]/)
  expect(written.at(-1)).toBe('\n')
  expect(written.at(-2)).toContain('sent 60')

  const plain = []
  const pipe = new Writable({ write (chunk, enc, cb) { plain.push(String(chunk)); cb() } })
  await run({ seed: 1, phases: [{ duration: 0.3, rate: 100 }] }, { target: fixture.url, progress: 'auto', progressStream: pipe })
  expect(plain).toEqual([])

  // The summary table has one row per phase and an "all" row.
  const table = formatSummary(result).split('\n')
  expect(table.find((l) => l.startsWith('phase-1 '))).toMatch(/^phase-1 +100\.0 +\d+\.\d +[\d.]+ +[\d.]+/)
  expect(table.find((l) => l.startsWith('all '))).toBeDefined()
})
