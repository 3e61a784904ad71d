'use strict'

const { ShardGuard } = require('../../appserver-lib')
const { sliceKey, KEYSPACE_SIZE } = require('../../core/keyspace')

const servers = { me: { url: 'http://127.0.0.1:1' }, other: { url: 'http://127.0.0.1:2' } }
const H = KEYSPACE_SIZE / 2
const gen = (generation, firstOwner, secondOwner = 'other') => ({
  generation,
  slices: [{ start: 0, end: H, servers: [firstOwner] }, { start: H, end: KEYSPACE_SIZE, servers: [secondOwner] }],
  servers
})
const keyIn = (lo, hi) => { for (let i = 0; ; i++) { const k = `k${i}`; const h = sliceKey(k); if (h >= lo && h < hi) return k } }

describe('ShardGuard', () => {
  test('admits owned keys, refuses others with a 421 carrying its generation', () => {
    const g = new ShardGuard({ serverId: 'me' })
    expect(() => g.admit('x')).toThrow(expect.objectContaining({ status: 421 }))
    g.setAssignment(gen(1, 'me'))
    const mine = keyIn(0, H)
    const theirs = keyIn(H, KEYSPACE_SIZE)
    expect(g.admit(mine)).toBe(sliceKey(mine))
    expect(() => g.admit(theirs)).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_NOT_OWNER', status: 421, generation: 1 }))
    expect(g.stats).toMatchObject({ admitted: 1, misdirected: 2 })
  })

  test('reports per-range counts across a layout change; a report stays until the controller acknowledges it', () => {
    const g = new ShardGuard({ serverId: 'me' })
    g.setAssignment(gen(1, 'me'))
    const a = keyIn(0, H)
    for (let i = 0; i < 3; i++) g.admit(a)
    g.setAssignment(gen(2, 'me', 'me'))
    const b = keyIn(H, KEYSPACE_SIZE)
    g.admit(b)
    const r = g.report()
    expect(r.generation).toBe(2)
    expect(r.entries).toEqual([{ start: 0, end: H, count: 3 }, { start: H, end: KEYSPACE_SIZE, count: 1 }])
    // Not acknowledged (the answer was lost): read again, nothing lost, nothing doubled, plus new counts.
    g.admit(b)
    const again = g.report()
    expect(again.entries).toEqual([{ start: 0, end: H, count: 3 }, { start: H, end: KEYSPACE_SIZE, count: 2 }])
    expect(again.frames).toBe(2)
    expect(again.seq).toBe(r.seq + 1)
    // Acknowledged: only what came after.
    g.admit(a)
    expect(g.report({ instance: again.instance, seq: again.seq }).entries).toEqual([{ start: 0, end: H, count: 1 }])
    // An acknowledgement for another incarnation is ignored.
    expect(g.report({ instance: 'other', seq: 1e9 }).entries).toEqual([{ start: 0, end: H, count: 1 }])
  })

  test('fires onRelease then onAcquire with the ranges that changed, before serving on the new map', () => {
    const calls = []
    const g = new ShardGuard({
      serverId: 'me',
      onRelease: (ranges, ctx) => calls.push(['release', ranges, ctx.generation]),
      onAcquire: (ranges, ctx) => calls.push(['acquire', ranges, ctx.generation])
    })
    g.setAssignment(gen(1, 'me'))
    g.setAssignment(gen(2, 'other', 'me'))
    expect(calls).toEqual([
      ['acquire', [{ start: 0, end: H }], 1],
      ['release', [{ start: 0, end: H }], 2],
      ['acquire', [{ start: H, end: KEYSPACE_SIZE }], 2]
    ])
  })

  test('keeps the old map when an assignment is invalid or stale; a repeat is a no-op', () => {
    const g = new ShardGuard({ serverId: 'me' })
    g.setAssignment(gen(2, 'me'))
    expect(() => g.setAssignment(gen(1, 'me'))).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_STALE_GENERATION' }))
    expect(() => g.setAssignment({ ...gen(3, 'me'), slices: [] })).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_INVALID_ASSIGNMENT' }))
    expect(g.generation).toBe(2)
    expect(g.setAssignment(gen(2, 'me')).changed).toBe(false)
    expect(g.stats.assignmentsRejected).toBe(2)
  })

  test('validates its options', () => {
    expect(() => new ShardGuard({})).toThrow(/invalid serverId/)
    expect(() => new ShardGuard({ serverId: 'x', onAcquire: 5 })).toThrow(/invalid onAcquire/)
  })
})
