'use strict'

const { checkLinearizability } = require('../../history')
const { createRng } = require('../../loadgen/prng')
const { simulate, plantStaleRead } = require('./simulate')
const { bruteForceLinearizable } = require('./reference')

/** One operation; key 'k' unless given. */
function op (client, kind, value, call, ret, ok = true, key = 'k') {
  return { client, key, op: kind, value, call, ret, ok }
}

function deepFreeze (x) {
  if (x && typeof x === 'object') {
    Object.values(x).forEach(deepFreeze)
    Object.freeze(x)
  }
  return x
}

/** Check a frozen copy, so that any mutation of the input throws. */
function check (history, options) {
  return checkLinearizability(deepFreeze(structuredClone(history)), options)
}

describe('linearizable histories', () => {
  test('an empty history', () => {
    expect(check([])).toEqual({ ok: true, verdict: 'linearizable', keys: 0, ops: 0, violations: [], unknown: [], warnings: [] })
  })

  test('a sequential history, including not-found before the first put and after a delete', () => {
    const r = check([
      op('a', 'get', null, 0, 1),
      op('a', 'put', 'v1', 2, 3),
      op('b', 'get', 'v1', 4, 5),
      op('a', 'put', 'v2', 6, 7),
      op('b', 'get', 'v2', 8, 9),
      op('a', 'delete', undefined, 10, 11),
      op('b', 'get', null, 12, 13)
    ])
    expect(r).toMatchObject({ ok: true, verdict: 'linearizable', keys: 1, ops: 7, violations: [] })
  })

  test('overlapping writes may be read in either order', () => {
    const writes = [op('a', 'put', 'v1', 0, 10), op('b', 'put', 'v2', 1, 11)]
    expect(check([...writes, op('c', 'get', 'v1', 2, 3), op('c', 'get', 'v2', 4, 5)]).ok).toBe(true)
    expect(check([...writes, op('c', 'get', 'v2', 2, 3), op('c', 'get', 'v1', 4, 5)]).ok).toBe(true)
    // after both were acknowledged, either one may have won, but it must stay won
    expect(check([...writes, op('c', 'get', 'v1', 12, 13), op('d', 'get', 'v1', 14, 15)]).ok).toBe(true)
    expect(check([...writes, op('c', 'get', 'v2', 12, 13), op('d', 'get', 'v2', 14, 15)]).ok).toBe(true)
  })

  test('an indeterminate write may take effect long after the client gave up', () => {
    const r = check([
      op('a', 'put', 'v1', 0, 1, false),
      op('b', 'get', null, 2, 3),
      op('b', 'get', null, 50, 51),
      op('b', 'get', 'v1', 100, 101),
      op('b', 'get', 'v1', 102, 103)
    ])
    expect(r.ok).toBe(true)
  })

  test('an indeterminate write may never take effect, and needs no ret', () => {
    expect(check([op('a', 'put', 'v1', 0, undefined, false), op('b', 'get', null, 2, 3)]).ok).toBe(true)
    expect(check([
      op('a', 'put', 'v1', 0, 1),
      op('a', 'delete', undefined, 2, 3, false),
      op('b', 'get', 'v1', 4, 5),
      op('b', 'get', null, 6, 7)
    ]).ok).toBe(true)
  })

  test('failed gets observed nothing and are dropped', () => {
    expect(check([op('a', 'put', 'v1', 0, 1), op('b', 'get', 'garbage', 2, 3, false), op('b', 'get', 'v1', 4, 5)]).ok).toBe(true)
  })

  test('intervals that touch at one clock reading count as concurrent', () => {
    expect(check([op('a', 'put', 'v1', 0, 5), op('b', 'get', null, 5, 6)]).ok).toBe(true)
  })

  test('keys are independent registers', () => {
    const r = check([
      op('a', 'put', 'x1', 0, 1, true, 'x'),
      op('a', 'put', 'y1', 0, 1, true, 'y'),
      op('b', 'get', 'x1', 2, 3, true, 'x'),
      op('b', 'get', null, 2, 3, true, 'z')
    ])
    expect(r).toMatchObject({ ok: true, keys: 3 })
  })

  test('repeated written values are checked but warned about', () => {
    const r = check([op('a', 'put', 'same', 0, 1), op('b', 'put', 'same', 2, 3), op('c', 'get', 'same', 4, 5)])
    expect(r.ok).toBe(true)
    expect(r.warnings).toEqual([expect.stringContaining('key "k": 1 value(s) written more than once (e.g. "same")')])
  })
})

describe('violations', () => {
  test('a planted stale read after an acknowledged write', () => {
    const history = [op('a', 'put', 'v1', 0, 1), op('b', 'put', 'v2', 2, 3), op('c', 'get', 'v1', 4, 5)]
    const r = check(history)
    expect(r).toMatchObject({ ok: false, verdict: 'violation', keys: 1, ops: 3 })
    expect(r.violations).toHaveLength(1)
    expect(r.violations[0].key).toBe('k')
    expect(r.violations[0].message).toBe('get of key "k" by client c returned "v1" at t=4–5, but "v2" was acknowledged at t=3 ' +
      '(client b) and nothing concurrent wrote "v1" (the last write of "v1", by client a, finished at t=1)')
    expect(r.violations[0].ops).toEqual(history.map((o, index) => ({ ...o, index })))
  })

  test('a read of a value never written to the key', () => {
    const r = check([op('a', 'put', 'v1', 0, 1), op('a', 'put', 'other', 0, 1, true, 'j'), op('b', 'get', 'other', 2, 3)])
    expect(r.verdict).toBe('violation')
    expect(r.violations[0].message).toBe('get of key "k" by client b returned "other" at t=2–3, but "other" was never written to key "k"')
    expect(r.violations[0].ops.map((o) => o.index)).toEqual([2])
  })

  test('a read of a value whose write began only after the read returned', () => {
    const r = check([op('b', 'get', 'v1', 0, 1), op('a', 'put', 'v1', 2, 3, false)])
    expect(r.violations[0].message).toMatch(/returned "v1" at t=0–1, but the first write of it began only at t=2 \(client a\)/)
  })

  test('a read that goes back in time', () => {
    const r = check([
      op('a', 'put', 'v1', 0, 1),
      op('b', 'put', 'v2', 2, 10), // still in flight during both reads
      op('c', 'get', 'v2', 3, 4),
      op('d', 'get', 'v1', 5, 6)
    ])
    expect(r.verdict).toBe('violation')
    expect(r.violations[0].message).toBe('get of key "k" by client d returned "v1" at t=5–6, but an earlier get by client c had already ' +
      'returned "v2" at t=4 and nothing concurrent wrote "v1" (the last write of "v1", by client a, finished at t=1)')
  })

  test('a lost acknowledged delete', () => {
    const r = check([op('a', 'put', 'v1', 0, 1), op('b', 'delete', undefined, 2, 3), op('c', 'get', 'v1', 4, 5)])
    expect(r.violations[0].message).toMatch(/returned "v1" at t=4–5, but a delete was acknowledged at t=3 \(client b\) and nothing concurrent wrote "v1"/)
  })

  test('a lost acknowledged put (not-found after it)', () => {
    const r = check([op('a', 'put', 'v1', 0, 1), op('c', 'get', null, 4, 5)])
    expect(r.violations[0].message).toMatch(/returned not-found at t=4–5, but "v1" was acknowledged at t=1 \(client a\) and nothing concurrent deleted it \(the key was never deleted\)/)
  })

  test('a write that certainly failed cannot be read', () => {
    const history = [op('a', 'put', 'v1', 0, 1, 'failed'), op('b', 'get', 'v1', 2, 3)]
    expect(check(history).verdict).toBe('violation')
    expect(check([{ ...history[0], ok: false }, history[1]]).verdict).toBe('linearizable')
  })

  test('reads that flip between two completed writes', () => {
    const r = check([
      op('a', 'put', 'v1', 0, 10),
      op('b', 'put', 'v2', 1, 11),
      op('c', 'get', 'v1', 12, 13),
      op('c', 'get', 'v2', 14, 15)
    ])
    expect(r.verdict).toBe('violation')
    expect(r.violations[0].message).toMatch(/returned "v2" at t=14–15, but an earlier get by client c had already returned "v1" at t=13/)
  })

  test('only the broken key is reported', () => {
    const r = check([
      op('a', 'put', 'good', 0, 1, true, 'g'),
      op('b', 'get', 'good', 2, 3, true, 'g'),
      op('a', 'put', 'v1', 0, 1, true, 'bad'),
      op('a', 'put', 'v2', 2, 3, true, 'bad'),
      op('b', 'get', 'v1', 4, 5, true, 'bad')
    ])
    expect(r).toMatchObject({ ok: false, verdict: 'violation', keys: 2 })
    expect(r.violations.map((v) => v.key)).toEqual(['bad'])
  })
})

describe('generated histories', () => {
  // 5,000 ops on 20 keys from 8 clients, built from a true sequential register.
  const history = simulate({ seed: 42, ops: 5000, keys: 20, clients: 8 })

  test('a large linearizable history passes quickly', () => {
    const started = performance.now()
    const r = check(history)
    const elapsed = performance.now() - started
    expect(r).toMatchObject({ ok: true, verdict: 'linearizable', keys: 20, ops: 5000, violations: [], unknown: [] })
    expect(elapsed).toBeLessThan(1000) // about 20 ms on a laptop core
  })

  test('the same history with one stale read planted is caught', () => {
    const planted = history.slice()
    const index = plantStaleRead(planted, 7)
    const r = check(planted)
    expect(r.verdict).toBe('violation')
    expect(r.violations).toHaveLength(1)
    const [v] = r.violations
    expect(v.key).toBe(planted[index].key)
    expect(v.ops.map((o) => o.index)).toContain(index)
    expect(v.ops.length).toBeLessThanOrEqual(20)
    expect(v.message).toContain(`returned ${JSON.stringify(planted[index].value)}`)
  })

  test('one hot key with 32 concurrent clients and late indeterminate writes', () => {
    const hot = simulate({ seed: 3, ops: 5000, keys: 1, clients: 32, indeterminate: 0.1, lateness: 100 })
    const started = performance.now()
    expect(check(hot).verdict).toBe('linearizable')
    expect(performance.now() - started).toBeLessThan(1000)
    const index = plantStaleRead(hot, 3)
    const r = check(hot)
    expect(r.verdict).toBe('violation')
    expect(r.violations[0].ops.map((o) => o.index)).toContain(index)
  })

  test('agrees with a brute-force search on thousands of small random histories', () => {
    const rng = createRng(2024)
    const pick = (a) => a[rng.int(a.length)]
    let violations = 0
    for (let t = 0; t < 3000; t++) {
      const history = []
      const n = 1 + rng.int(7)
      for (let i = 0; i < n; i++) {
        const kind = pick(['get', 'get', 'put', 'put', 'delete'])
        const call = rng.int(10) // small range: many overlaps and ties
        const r = rng.next()
        history.push(op(i, kind, kind === 'put' ? pick(['a', 'b', 'c']) : kind === 'get' ? pick([null, 'a', 'b', 'c']) : undefined,
          call, call + rng.int(5), r < 0.75 ? true : r < 0.92 ? false : 'failed', rng.next() < 0.85 ? 'k' : 'j'))
      }
      const expected = bruteForceLinearizable(history)
      if (!expected) violations++
      const result = checkLinearizability(history)
      if (result.ok !== expected) throw new Error(`disagrees with brute force (expected ${expected}): ${JSON.stringify(history)}`)
      if (!expected) expect(result.violations[0].message).toMatch(/^(get|put|delete)/)
    }
    expect(violations).toBeGreaterThan(500) // both verdicts are exercised
    expect(violations).toBeLessThan(2500)
  })
})

describe('budgets', () => {
  const hot = simulate({ seed: 5, ops: 3000, keys: 1, clients: 8 })

  test('running out of steps gives unknown, not ok and not a violation', () => {
    const r = check(hot, { maxStepsPerKey: 100 })
    expect(r).toMatchObject({ ok: false, verdict: 'unknown', violations: [] })
    expect(r.unknown).toEqual([{ key: 'k0', ops: expect.any(Number), steps: 101, reason: 'more than 100 search steps' }])
  })

  test('running out of time gives unknown', () => {
    let t = 0
    const now = () => (t += 100) // every reading is 100 ms later
    const r = check(hot, { timeBudgetMs: 50, now })
    expect(r.verdict).toBe('unknown')
    expect(r.unknown[0].reason).toBe('search took more than 50 ms')
  })

  test('a violation on one key outweighs an unknown on another', () => {
    const r = check([
      ...hot,
      op('a', 'put', 'v1', 0, 1, true, 'bad'),
      op('a', 'put', 'v2', 2, 3, true, 'bad'),
      op('b', 'get', 'v1', 4, 5, true, 'bad')
    ], { maxStepsPerKey: 100 })
    expect(r).toMatchObject({ ok: false, verdict: 'violation' })
    expect(r.violations.map((v) => v.key)).toEqual(['bad'])
    expect(r.unknown.map((u) => u.key)).toEqual(['k0'])
  })
})

describe('input validation', () => {
  const invalid = expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ARG' })

  test('rejects a non-array', () => {
    expect(() => checkLinearizability({})).toThrow(invalid)
  })

  test('names the operation and field at fault', () => {
    expect(() => check([op('a', 'get', null, 0, 1), op('a', 'read', null, 0, 1)])).toThrow(/operations\[1\]\.op must be 'get', 'put' or 'delete', got "read"/)
    expect(() => check([op('a', 'put', 'v', 5, 4)])).toThrow(/operations\[0\]\.ret must be a finite number >= call/)
    expect(() => check([op('a', 'put', 42, 0, 1)])).toThrow(/operations\[0\]\.value must be a string for a put, got 42/)
    expect(() => check([op('a', 'get', undefined, 0, 1)])).toThrow(/operations\[0\]\.value must be a string or null/)
    expect(() => check([op('a', 'get', null, 0, 1, 'yes')])).toThrow(/operations\[0\]\.ok must be true, false/)
    expect(() => check([{ ...op('a', 'get', null, 0, 1), key: 7 }])).toThrow(invalid)
  })

  test('rejects unknown and invalid options by name', () => {
    expect(() => check([], { maxSteps: 5 })).toThrow(/unknown linearizability option maxSteps/)
    expect(() => check([], { maxStepsPerKey: 0 })).toThrow(/invalid linearizability option maxStepsPerKey: expected an integer >= 1, got 0/)
  })
})
