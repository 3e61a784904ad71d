'use strict'

const { runSensitivity } = require('../../sim/sensitivity')
const { periodsToSettle } = require('../../sim/metrics')
const { heatmap, renderSensitivity } = require('../../sim/report')

describe('neighbour-offload N x T sensitivity (seed 001)', () => {
  const grid = () => runSensitivity({ servers: 20, seed: undefined, buckets: [3, 12], offloadPercent: [10, 45], phases: 2, periodsPerPhase: 6, clock: () => 0 })

  test('one cell per (N, T), each with imbalance, settling, recovery and churn; N and T matter', () => {
    const s = grid()
    expect(s.cells.map((c) => [c.buckets, c.offloadPercent])).toEqual([[3, 10], [3, 45], [12, 10], [12, 45]])
    const cell = (n, t) => s.cells.find((c) => c.buckets === n && c.offloadPercent === t)
    for (const c of s.cells) {
      expect(c.imbalance).toHaveLength(12)
      expect(c.periodsToSettle).toHaveLength(1)
      expect(c.periodsToRecover).toHaveLength(1)
    }
    // three buckets are a third of a range each: T = 10 % lets none go
    expect(cell(3, 10).churnPerRound).toBe(0)
    expect(cell(3, 45).churnPerRound).toBeGreaterThan(0)
    // finer buckets and a larger T balance better, at more churn
    expect(cell(12, 45).steadyImbalance).toBeLessThan(cell(3, 10).steadyImbalance)
    expect(cell(12, 45).churnPerRound).toBeGreaterThan(cell(3, 45).churnPerRound)
    expect(JSON.stringify(grid())).toBe(JSON.stringify(s))
  })

  test('periodsToSettle counts periods until within 5 % of the steady state', () => {
    expect(periodsToSettle([2, 1.6, 1.45, 1.41, 1.4, 1.4], 0, 6, 1.4)).toBe(2)
    expect(periodsToSettle([1.4, 1.4], 0, 2, 1.4)).toBe(0)
    expect(periodsToSettle([2, 2, 1.4], 0, 3, 1.4)).toBeNull()
  })

  test('renders three heatmaps and a recovery heatmap as inline SVG', () => {
    const html = renderSensitivity(grid())
    expect(html.match(/<svg /g)).toHaveLength(4)
    expect(html).toContain('Steady-state imbalance')
    const svg = heatmap({ title: 't', rowLabel: 'N', colLabel: 'T', rows: [1, 2], cols: ['a', 'b'], values: [[1, 2], [null, 4]] })
    expect(svg.match(/<rect /g)).toHaveLength(4)
    expect(svg).toContain('>never<')
    expect(svg).toContain('fill="#ccc"')
  })
})
