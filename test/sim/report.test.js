'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { runScaleSet, scaleSpec } = require('../../sim/scale')
const { renderScaleReport, renderRunReport, compactRun } = require('../../sim/report')
const { simulate } = require('../../sim/cluster')
const { main } = require('../../sim/bin/sim')

describe('sim reports', () => {
  let dir
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sim-test-')) })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

  test('the scale workload shifts its hot set each phase', () => {
    const spec = scaleSpec(10, { phases: 2, periodsPerPhase: 2 })
    expect(spec.phases).toHaveLength(2)
    expect(spec.phases[0].hot.keys).toHaveLength(10)
    expect(spec.phases[0].hot.keys.some((k) => spec.phases[1].hot.keys.includes(k))).toBe(false)
  })

  test('a tiny scale set renders: one row and three charts per size', () => {
    const data = runScaleSet({ sizes: [8], phases: 2, periodsPerPhase: 3, clock: () => 0 })
    const runs = data.runs.map(compactRun)
    expect(runs.map((r) => r.label)).toContain('chopper')
    expect(runs.map((r) => r.label)).toContain('consistent-hash')
    expect(runs[0].imbalance).toHaveLength(6)
    const html = renderScaleReport({ settings: data.settings, runs, notes: ['n'] })
    expect(html.match(/<svg /g)).toHaveLength(3)
    expect(html.match(/<svg /g)).toHaveLength(html.match(/<\/svg>/g).length)
    expect(html).toContain('<td>chopper</td>')
  })

  test('a run report has the imbalance, churn, latency and share charts', () => {
    const spec = { name: 'r', phases: [{ duration: '2s', rate: 500, keys: { count: 20 } }] }
    const html = renderRunReport(simulate(spec, { servers: 2, periodMs: 500, clock: () => 0 }))
    expect(html.match(/<svg /g)).toHaveLength(4)
    expect(html).toContain('Per-server share')
  })

  test('the CLI writes JSON and HTML for a spec file', () => {
    const file = path.join(dir, 'spec.json')
    fs.writeFileSync(file, JSON.stringify({ name: 'cli', phases: [{ duration: '2s', rate: 400, keys: { count: 30 }, hot: { keys: [0], share: 0.5 } }] }))
    const write = jest.spyOn(process.stdout, 'write').mockImplementation(() => true)
    try {
      expect(main([file, '--servers', '2', '--period', '500', '--out', dir, '--seed', '3'])).toBe(0)
    } finally {
      write.mockRestore()
    }
    const r = JSON.parse(fs.readFileSync(path.join(dir, 'spec-chopper-2.json'), 'utf8'))
    expect(r.options).toMatchObject({ servers: 2, periodMs: 500, seed: 3, strategy: 'chopper' })
    expect(r.periods).toHaveLength(4)
    expect(fs.readFileSync(path.join(dir, 'spec-chopper-2.html'), 'utf8')).toContain('<svg')
    expect(() => main([file, '--servers', 'x'])).toThrow(/--servers/)
  })

  test('--dispatch prints the slowdown tables and the ratios next to the paper\'s; --report --only merges new sections', () => {
    const out = []
    const write = jest.spyOn(process.stdout, 'write').mockImplementation((s) => { out.push(String(s)); return true })
    const errWrite = jest.spyOn(process.stderr, 'write').mockImplementation(() => true)
    try {
      expect(main(['--dispatch', '--jobs', '1000', '--out', dir])).toBe(0)
      const text = out.join('')
      expect(text).toContain('with preemption (processor sharing)')
      expect(text).toContain('JSQ / LC*, with preemption (overall)')
      expect(text).toMatch(/lcstar +\d/)
      const d = JSON.parse(fs.readFileSync(path.join(dir, 'dispatch.json'), 'utf8'))
      expect(d.runs).toHaveLength(12)
      expect(d.sweep.rows).toHaveLength(3)

      // an existing scale report: --only dispatch keeps its runs and adds the section
      const data = runScaleSet({ sizes: [8], phases: 2, periodsPerPhase: 3, clock: () => 0 })
      fs.writeFileSync(path.join(dir, 'report.json'), JSON.stringify({ tool: 'chopper-sim', settings: data.settings, runs: data.runs.map(compactRun) }))
      expect(main(['--report', '--only', 'dispatch', '--jobs', '1000', '--out', dir])).toBe(0)
      const merged = JSON.parse(fs.readFileSync(path.join(dir, 'report.json'), 'utf8'))
      expect(merged.runs).toHaveLength(data.runs.length)
      expect(merged.dispatch.ratios.length).toBeGreaterThan(3)
      const html = fs.readFileSync(path.join(dir, 'report.html'), 'utf8')
      expect(html).toContain('id="lc-star"')
      expect(html).toContain('Ratios next to the paper')
      expect(() => main(['--report', '--only', 'nope', '--out', dir])).toThrow(/--only/)
    } finally {
      write.mockRestore()
      errWrite.mockRestore()
    }
  })
})
