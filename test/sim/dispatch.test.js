'use strict'

const { runDispatch, makeTrace, sizeModel, boundedParetoMean, PsServer, FifoServer, DISPATCH_DEFAULTS } = require('../../sim/dispatch')

describe('sim dispatch (seed 004: JSQ, LC, LC*)', () => {
  test('the spliced Pareto puts ~3 % of the jobs at or above the cutoff, carrying ~50 % of the work', () => {
    const m = sizeModel(DISPATCH_DEFAULTS)
    expect(m.meanShort).toBeCloseTo(boundedParetoMean(1.37, m.shortMin, 1), 6)
    expect(0.03 * m.meanLong / m.mean).toBeCloseTo(0.5, 6)
    const t = makeTrace({ ...DISPATCH_DEFAULTS, jobsPerLevel: 50000 })
    let long = 0
    let longWork = 0
    let work = 0
    for (const s of t.sizes) { work += s; if (s >= 1) { long++; longWork += s } }
    expect(long / t.sizes.length).toBeGreaterThan(0.027)
    expect(long / t.sizes.length).toBeLessThan(0.033)
    expect(longWork / work).toBeGreaterThan(0.4)
    expect(longWork / work).toBeLessThan(0.6)
    expect(t.sizes.reduce((a, b) => Math.max(a, b), 0)).toBeLessThanOrEqual(DISPATCH_DEFAULTS.maxSizeRatio)
    // each level runs at about its utilisation
    for (const l of t.levels) expect(Math.abs(l.realisedUtilisation - l.utilisation)).toBeLessThan(0.08)
  })

  test('processor sharing and FIFO servers finish jobs when they should', () => {
    const ps = new PsServer()
    ps.add('a', 1, 0)
    ps.add('b', 3, 0)
    expect(ps.residual(0)).toBeCloseTo(4)
    expect(ps.nextCompletion()).toBeCloseTo(2) // both at half speed: a's 1 takes 2
    expect(ps.complete(2)).toBe('a')
    expect(ps.nextCompletion()).toBeCloseTo(4) // b has 2 left, alone
    expect(ps.residual(3)).toBeCloseTo(1)
    expect(ps.complete(4)).toBe('b')
    expect(ps.nextCompletion()).toBe(Infinity)

    const sizes = [1, 3]
    const fifo = new FifoServer(sizes)
    fifo.add(0, 1, 0)
    fifo.add(1, 3, 0)
    expect(fifo.residual(0.5)).toBeCloseTo(3.5)
    expect(fifo.nextCompletion()).toBe(1)
    expect(fifo.complete(1)).toBe(0)
    expect(fifo.nextCompletion()).toBe(4)
    expect(fifo.complete(4)).toBe(1)
    expect(fifo.nextCompletion()).toBe(Infinity)
  })

  test('a small trace reproduces the ordering: with preemption LC* < LC < JSQ; without, JSQ < LC', () => {
    const d = runDispatch({ jobsPerLevel: 20000, policies: ['jsq', 'jsq-residual', 'lc', 'lcstar'] })
    const g = (p, disc, l = 'overall') => d.runs.find((r) => r.policy === p && r.discipline === disc).meanSlowdown[l]
    expect(g('lcstar', 'ps')).toBeLessThan(g('lc', 'ps'))
    expect(g('lcstar', 'ps', 'heavy')).toBeLessThan(g('lc', 'ps', 'heavy'))
    expect(g('lc', 'ps')).toBeLessThan(g('jsq', 'ps'))
    expect(g('lc', 'ps')).toBeLessThan(g('jsq-residual', 'ps'))
    expect(g('jsq', 'fifo')).toBeLessThan(g('lc', 'fifo'))
    expect(g('lcstar', 'ps')).toBeLessThan(g('jsq', 'fifo'))
    // slowdowns grow with the load
    for (const r of d.runs) expect(r.meanSlowdown.light).toBeLessThan(r.meanSlowdown.heavy)
    // only LC* defers
    for (const r of d.runs) expect(r.deferred > 0).toBe(r.policy === 'lcstar')
    // the ratios sit next to the paper's
    const byLabel = Object.fromEntries(d.ratios.map((r) => [r.label, r]))
    expect(byLabel['JSQ / LC*, with preemption (overall)'].paper).toBeCloseTo(3.56, 2)
    expect(byLabel['JSQ / LC*, with preemption (overall)'].measured).toBeGreaterThan(1)
    expect(byLabel['LC / LC*, with preemption (heavy load)'].paper).toBeCloseTo(1.92, 2)
  })

  test('deterministic for a seed; options are validated by name', () => {
    const o = { jobsPerLevel: 2000, policies: ['p2c', 'lcstar'] }
    expect(JSON.stringify(runDispatch({ ...o, seed: 4 }))).toBe(JSON.stringify(runDispatch({ ...o, seed: 4 })))
    expect(JSON.stringify(runDispatch({ ...o, seed: 4 }).runs)).not.toBe(JSON.stringify(runDispatch({ ...o, seed: 5 }).runs))
    expect(() => runDispatch({ policies: ['nope'] })).toThrow(/policies/)
    expect(() => runDispatch({ disciplines: ['lifo'] })).toThrow(/disciplines/)
    expect(() => runDispatch({ servers: 0 })).toThrow(/servers/)
    expect(() => runDispatch({ k: 4 })).toThrow(/unknown dispatch option k/)
  })
})
