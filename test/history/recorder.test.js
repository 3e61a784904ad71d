'use strict'

const { HistoryRecorder, uniqueValue, checkLinearizability } = require('../../history')

/** A clock the test moves by hand. */
function manualClock () {
  const clock = { t: 0, now: () => clock.t }
  return clock
}

describe('HistoryRecorder', () => {
  test('records each operation between invoke and complete on one clock', () => {
    const clock = manualClock()
    const rec = new HistoryRecorder({ now: clock.now })
    const put = rec.invoke({ client: 'a', key: 'k', op: 'put', value: 'a:0' })
    clock.t = 2
    const get = rec.invoke({ client: 'b', key: 'k', op: 'get' })
    clock.t = 3
    rec.complete(put, { ok: true })
    clock.t = 4
    rec.complete(get, { ok: true, value: 'a:0' })
    const del = rec.invoke({ client: 'a', key: 'k', op: 'delete' })
    clock.t = 5
    rec.complete(del, { ok: 'failed' })
    expect(rec.operations()).toEqual([
      { client: 'a', key: 'k', op: 'put', value: 'a:0', call: 0, ret: 3, ok: true },
      { client: 'b', key: 'k', op: 'get', value: 'a:0', call: 2, ret: 4, ok: true },
      { client: 'a', key: 'k', op: 'delete', value: null, call: 4, ret: 5, ok: 'failed' }
    ])
    expect(rec.size).toBe(3)
    expect(rec.pending).toBe(0)
    expect(checkLinearizability(rec.operations()).ok).toBe(true)
  })

  test('uses performance.now by default', () => {
    const rec = new HistoryRecorder()
    const before = performance.now()
    rec.complete(rec.invoke({ client: 1, key: 'k', op: 'get' }), { ok: true, value: null })
    const [o] = rec.operations()
    expect(o.call).toBeGreaterThanOrEqual(before)
    expect(o.ret).toBeGreaterThanOrEqual(o.call)
    expect(o.ret).toBeLessThanOrEqual(performance.now())
  })

  test('reports operations still in flight as outcome unknown', () => {
    const clock = manualClock()
    const rec = new HistoryRecorder({ now: clock.now })
    rec.invoke({ client: 'a', key: 'k', op: 'put', value: 'a:0' }) // never completed
    clock.t = 1
    const get = rec.invoke({ client: 'b', key: 'k', op: 'get' })
    clock.t = 2
    rec.complete(get, { ok: true, value: 'a:0' })
    expect(rec.pending).toBe(1)
    expect(rec.operations()[0]).toMatchObject({ ok: false, ret: null })
    expect(checkLinearizability(rec.operations()).ok).toBe(true) // the put may have landed
  })

  test('end to end: a read served by a lagging replica is caught', () => {
    const clock = manualClock()
    const rec = new HistoryRecorder({ now: clock.now })
    const primary = new Map()
    const replica = new Map() // never caught up: the planted bug
    const run = (client, key, op, value) => {
      const h = rec.invoke({ client, key, op, value })
      clock.t += 1
      if (op === 'put') primary.set(key, value)
      const result = op === 'get' ? (replica.has(key) ? replica.get(key) : null) : undefined
      rec.complete(h, { ok: true, value: result })
      clock.t += 1
    }
    run('a', 'k', 'put', rec.nextValue('a'))
    replica.set('k', primary.get('k'))
    run('a', 'k', 'put', rec.nextValue('a'))
    run('b', 'k', 'get')
    const r = checkLinearizability(rec.operations())
    expect(r.verdict).toBe('violation')
    expect(r.violations[0].message).toMatch(/client b returned "a:0" at t=4–5, but "a:1" was acknowledged at t=3/)
  })

  test('throws a typed error beyond maxOperations', () => {
    const rec = new HistoryRecorder({ maxOperations: 2 })
    rec.invoke({ client: 'a', key: 'k', op: 'get' })
    rec.invoke({ client: 'a', key: 'k', op: 'get' })
    expect(() => rec.invoke({ client: 'a', key: 'k', op: 'get' })).toThrow(expect.objectContaining({
      code: 'CHOPPER_ERR_PAYLOAD_TOO_LARGE',
      message: 'history is full: maxOperations is 2; raise it or record a shorter run'
    }))
    expect(rec.size).toBe(2)
  })

  test('rejects a value already written to the same key, unless told not to', () => {
    const rec = new HistoryRecorder()
    rec.invoke({ client: 'a', key: 'k', op: 'put', value: 'x' })
    rec.invoke({ client: 'a', key: 'j', op: 'put', value: 'x' }) // another key: fine
    expect(() => rec.invoke({ client: 'b', key: 'k', op: 'put', value: 'x' })).toThrow(/value "x" was already written to key "k"/)
    const lax = new HistoryRecorder({ uniqueWrites: false })
    lax.invoke({ client: 'a', key: 'k', op: 'put', value: 'x' })
    expect(() => lax.invoke({ client: 'b', key: 'k', op: 'put', value: 'x' })).not.toThrow()
  })

  test('rejects bad arguments with typed errors that name them', () => {
    const invalid = expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ARG' })
    const rec = new HistoryRecorder()
    expect(() => rec.invoke({ client: 'a', key: 'k', op: 'read' })).toThrow(/op must be 'get', 'put' or 'delete', got "read"/)
    expect(() => rec.invoke({ client: 'a', key: 'k', op: 'put' })).toThrow(/value must be a string for a put/)
    expect(() => rec.invoke({ key: 'k', op: 'get' })).toThrow(/client must be a string or number/)
    const h = rec.invoke({ client: 'a', key: 'k', op: 'get' })
    expect(() => rec.complete(h, { ok: 'maybe' })).toThrow(/ok must be true, false/)
    expect(() => rec.complete(h, { ok: true, value: 3 })).toThrow(/value of a completed get must be a string or null/)
    rec.complete(h, { ok: false })
    expect(() => rec.complete(h, { ok: true, value: null })).toThrow(/already completed/)
    expect(() => rec.complete(99, { ok: true })).toThrow(invalid)
    expect(() => new HistoryRecorder({ maxOps: 3 })).toThrow(/unknown history recorder option maxOps/)
    expect(() => new HistoryRecorder({ maxOperations: 0 })).toThrow(/invalid maxOperations/)
  })
})

describe('unique values', () => {
  test('uniqueValue never repeats across clients and sequence numbers', () => {
    const seen = new Set()
    for (const client of ['a', 'a:1', 'b', 1, 11]) {
      for (let seq = 0; seq < 20; seq++) seen.add(uniqueValue(client, seq))
    }
    expect(seen.size).toBe(100)
    expect(uniqueValue('c3', 7)).toBe('c3:7')
    expect(() => uniqueValue('c', -1)).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ARG' }))
  })

  test('nextValue counts per client', () => {
    const rec = new HistoryRecorder()
    expect([rec.nextValue('a'), rec.nextValue('a'), rec.nextValue('b')]).toEqual(['a:0', 'a:1', 'b:0'])
  })
})
