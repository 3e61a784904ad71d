'use strict'

const { planHandoff } = require('../../controller/handoff-plan')
const { HandoffTracker } = require('../../controller/handoff-tracker')
const { LeaseTable } = require('../../controller/leases')
const { validateAssignment, ownedRanges, withoutMoving } = require('../../core/assignment')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { subtract } = require('../../core/ranges')
const { createRng } = require('../../loadgen/prng')

const servers = { a: { url: 'http://127.0.0.1:1' }, b: { url: 'http://127.0.0.1:2' }, c: { url: 'http://127.0.0.1:3' } }
const Q = KEYSPACE_SIZE / 4
const layout = (...owners) => ({
  servers,
  slices: owners.map((o, i) => ({ start: Math.floor(i * KEYSPACE_SIZE / owners.length), end: Math.floor((i + 1) * KEYSPACE_SIZE / owners.length), servers: [o] }))
})
const deepFreeze = (o) => { Object.values(o).forEach((v) => typeof v === 'object' && v !== null && deepFreeze(v)); return Object.freeze(o) }

describe('planHandoff', () => {
  test('marks the pieces whose admitting owner changes as moving, routed to the new owner; the rest is untouched', () => {
    const current = deepFreeze({ ...layout('a', 'a', 'b', 'c'), generation: 4 })
    const next = deepFreeze(layout('a', 'b', 'b', 'c'))
    const { revoke, losers, moving } = planHandoff(current, next)
    expect(losers).toEqual(['a'])
    expect(moving).toBe(Q)
    expect(revoke.slices).toEqual([
      { start: 0, end: Q, servers: ['a'] },
      { start: Q, end: 2 * Q, servers: ['b'], moving: true },
      { start: 2 * Q, end: 3 * Q, servers: ['b'] },
      { start: 3 * Q, end: KEYSPACE_SIZE, servers: ['c'] }
    ])
    validateAssignment({ ...revoke, generation: 5 })
  })

  test('a revoke map grants nothing: every server admits a subset of what it admitted before', () => {
    const rng = createRng(11)
    const ids = ['a', 'b', 'c']
    for (let t = 0; t < 300; t++) {
      const n = 1 + rng.int(8)
      const m = 1 + rng.int(8)
      const current = layout(...Array.from({ length: n }, () => ids[rng.int(3)]))
      // Some of the current slices may already be moving (a handoff in progress).
      current.slices.forEach((s) => { if (rng.next() < 0.2) s.moving = true })
      const next = layout(...Array.from({ length: m }, () => ids[rng.int(3)]))
      const { revoke, losers } = planHandoff(current, next)
      validateAssignment({ ...revoke, generation: 1 })
      for (const id of ids) {
        const gained = subtract(ownedRanges(revoke, id), ownedRanges(current, id))
        expect(gained).toEqual([])
        // Whoever loses something it admitted now is a loser.
        const lost = subtract(ownedRanges(current, id), ownedRanges(next, id))
        expect(losers.includes(id)).toBe(lost.length > 0)
      }
      // Without the marks, the revoke map routes exactly like the target.
      for (const key of [0, Q - 1, Q, 2 * Q + 5, KEYSPACE_SIZE - 1]) {
        const own = (a) => a.slices.find((s) => s.end > key).servers[0]
        expect(own(withoutMoving(revoke))).toBe(own(next))
      }
    }
  })

  test('no owner change: no losers, nothing moving', () => {
    const a = layout('a', 'b')
    const { losers, moving } = planHandoff(a, layout('a', 'a', 'b', 'b'))
    expect(losers).toEqual([])
    expect(moving).toBe(0)
  })
})

describe('HandoffTracker', () => {
  test('a loser is done when it drained the revoke generation, or when its lease lapsed', () => {
    const t = new HandoffTracker()
    t.add('a', 7, 1000)
    t.add('b', 7, 500)
    expect(t.ack('a', 6)).toBe(false)
    expect(t.ack('a', 7)).toBe(true)
    expect(t.idle).toBe(false)
    expect(t.expire(499)).toEqual([])
    expect(t.expire(500)).toEqual(['b'])
    expect(t.idle).toBe(true)
  })

  test('a superseding revoke raises what the loser owes', () => {
    const t = new HandoffTracker()
    t.add('a', 7, 1000)
    t.add('a', 9, 900)
    expect(t.ack('a', 8)).toBe(false)
    expect(t.expire(999)).toEqual([])
    expect(t.ack('a', 9)).toBe(true)
  })
})

describe('LeaseTable', () => {
  test('a grant lasts leaseMs plus the margin on the controller clock; lapsed leases are taken once', () => {
    let now = 0
    const l = new LeaseTable({ leaseMs: 1500, marginMs: 100, now: () => now })
    expect(l.grant('a', 3)).toEqual({ leaseMs: 1500, minGeneration: 3 })
    expect(l.expiresAt('a')).toBe(1600)
    expect(l.expiresAt('b')).toBe(-Infinity)
    now = 1599
    expect(l.live('a')).toBe(true)
    expect(l.takeExpired()).toEqual([])
    now = 1600
    expect(l.takeExpired()).toEqual(['a'])
    expect(l.takeExpired()).toEqual([])
  })
})
