'use strict'

const { MAX_REPEATS, checkRepeats, rankedBy, medianRun, runOrder, foldRuns, runSummary } = require('../../bench/experiments/repeats')

/** A contender result with just the figures repeats.js reads. */
function run (p99, { ok = true, maxSustainedRate = null, hitRate } = {}) {
  if (!ok) return { name: 'chopper', ok: false, error: { code: 'X', message: 'it broke' } }
  return {
    name: 'chopper',
    ok: true,
    latencyMs: { p50: p99 / 4, p90: p99 / 2, p99 },
    throughput: { achievedRate: 300, maxSustainedRate, errors: 0 },
    cache: hitRate === undefined ? null : { hitRate },
    imbalance: { mean: 1.05 }
  }
}

describe('repeats: the run that stands for a contender', () => {
  test('the median run by p99, whatever the order the runs came in', () => {
    expect(medianRun([run(90), run(60), run(120)], 'p99')).toBe(0)
    expect(medianRun([run(120), run(90), run(60)], 'p99')).toBe(1)
    expect(medianRun([run(60), run(120), run(90), run(100), run(70)], 'p99')).toBe(2) // 90
    expect(medianRun([run(42)], 'p99')).toBe(0)
  })

  test('an even count takes the worse of the two middle runs', () => {
    expect(medianRun([run(60), run(90)], 'p99')).toBe(1)
    expect(medianRun([run(90), run(60)], 'p99')).toBe(0)
    expect(medianRun([run(10), run(40), run(30), run(20)], 'p99')).toBe(2) // 30 of 10, 20, 30, 40
  })

  test('on a rising rate, by the maximum sustained throughput (higher is better); none sustained ranks last', () => {
    const runs = [run(50, { maxSustainedRate: 600 }), run(40, { maxSustainedRate: 750 }), run(45, { maxSustainedRate: null }), run(60, { maxSustainedRate: 675 })]
    // ranked 750, 675, 600, none: the worse middle one is 600
    expect(medianRun(runs, 'maxSustainedRate')).toBe(0)
    expect(medianRun(runs.slice(0, 3), 'maxSustainedRate')).toBe(0) // 750, 600, none
    expect(rankedBy({ kind: 'rising' })).toBe('maxSustainedRate')
    expect(rankedBy({ app: 'kv-cache' })).toBe('p99')
  })

  test('failed runs rank after every run that did not fail: the median fails only when half the runs or more failed', () => {
    expect(medianRun([run(0, { ok: false }), run(80), run(70)], 'p99')).toBe(1) // 70, 80, failed
    expect(medianRun([run(0, { ok: false }), run(80), run(0, { ok: false })], 'p99')).toBe(0) // 80, then the failures in run order
    expect(medianRun([run(80), run(0, { ok: false })], 'p99')).toBe(1)
  })

  test('refuses an empty list or an unknown figure', () => {
    expect(() => medianRun([], 'p99')).toThrow(/at least one run/)
    expect(() => medianRun([run(1)], 'p50')).toThrow(/invalid by "p50"/)
  })

  test('foldRuns: one run unchanged; several give the median run with every run summarised', () => {
    const one = run(33)
    expect(foldRuns([one], 'p99')).toBe(one)
    const runs = [run(90, { hitRate: 0.99 }), run(60, { hitRate: 0.98 }), run(0, { ok: false })]
    const f = foldRuns(runs, 'p99')
    expect(f.latencyMs.p99).toBe(90) // 60, 90, failed
    expect(f.ok).toBe(true)
    expect(f.repeats).toEqual({
      count: 3,
      by: 'p99',
      chosen: 1,
      runs: [
        { run: 1, ok: true, p50: 22.5, p90: 45, p99: 90, achievedRate: 300, maxSustainedRate: null, errors: 0, hitRate: 0.99, imbalance: 1.05 },
        { run: 2, ok: true, p50: 15, p90: 30, p99: 60, achievedRate: 300, maxSustainedRate: null, errors: 0, hitRate: 0.98, imbalance: 1.05 },
        { run: 3, ok: false, error: 'it broke' }
      ]
    })
    expect(runs[0].repeats).toBeUndefined() // the runs themselves are not changed
    expect(runSummary(run(8), 4)).toEqual(expect.objectContaining({ run: 5, p99: 8, hitRate: null }))
  })

  test('runOrder rotates the contenders, so none always runs first or after the same neighbour', () => {
    const names = ['chopper', 'consistent-hash', 'haproxy-bounded']
    expect(runOrder(names, 0)).toEqual(names)
    expect(runOrder(names, 1)).toEqual(['consistent-hash', 'haproxy-bounded', 'chopper'])
    expect(runOrder(names, 2)).toEqual(['haproxy-bounded', 'chopper', 'consistent-hash'])
    expect(runOrder(names, 3)).toEqual(names)
    expect(runOrder(['chopper'], 5)).toEqual(['chopper'])
  })

  test('checkRepeats takes 1 to MAX_REPEATS', () => {
    expect(checkRepeats(1)).toBe(1)
    expect(checkRepeats(MAX_REPEATS)).toBe(MAX_REPEATS)
    for (const bad of [0, MAX_REPEATS + 1, 1.5, '3', null]) expect(() => checkRepeats(bad)).toThrow(/invalid repeats: expected an integer from 1 to 9/)
  })
})
