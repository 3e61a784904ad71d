'use strict'

// The assignment model of replicated slices (docs/replication.md): validation,
// the slice map's admitters, owned ranges, churn, per-server loads and the
// fenced handoff plan when replica sets change.

const { planHandoff } = require('../../controller/handoff-plan')
const { validateAssignment, ownedRanges, keyChurn, serverLoads, withoutMoving, sameLayout } = require('../../core/assignment')
const { SliceMap } = require('../../core/slice-map')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { subtract } = require('../../core/ranges')
const { createRng } = require('../../loadgen/prng')
const { pollUntil } = require('../../core/poll')

const servers = { a: { url: 'http://127.0.0.1:1' }, b: { url: 'http://127.0.0.1:2' }, c: { url: 'http://127.0.0.1:3' } }
const H = KEYSPACE_SIZE / 2
const layout = (...sets) => ({
  generation: 1,
  servers,
  slices: sets.map((set, i) => ({ start: Math.floor(i * KEYSPACE_SIZE / sets.length), end: Math.floor((i + 1) * KEYSPACE_SIZE / sets.length), servers: set.split('') }))
})

describe('assignment with replicas', () => {
  test('validation: duplicates, holders only on moving slices, holders a subset of servers', () => {
    expect(() => validateAssignment(layout('ab', 'c'))).not.toThrow()
    expect(() => validateAssignment(layout('aa', 'c'))).toThrow(/lists server "a" twice/)
    const withHolders = (extra) => { const a = layout('ab', 'c'); Object.assign(a.slices[0], extra); return a }
    expect(() => validateAssignment(withHolders({ moving: true, holders: ['a'] }))).not.toThrow()
    expect(() => validateAssignment(withHolders({ holders: ['a'] }))).toThrow(/only allowed on a moving slice/)
    expect(() => validateAssignment(withHolders({ moving: true, holders: [] }))).toThrow(/non-empty array/)
    expect(() => validateAssignment(withHolders({ moving: true, holders: ['c'] }))).toThrow(/not in its servers/)
    expect(() => validateAssignment(withHolders({ moving: true, holders: ['a', 'a'] }))).toThrow(/twice/)
  })

  test('the slice map: primary, replicas and who admits now', () => {
    const a = layout('ab', 'c', 'bca')
    a.slices[1] = { ...a.slices[1], servers: ['c', 'a'], moving: true, holders: ['c'] }
    a.slices.push({ start: a.slices[2].start, end: KEYSPACE_SIZE, servers: ['b'], moving: true })
    a.slices[2].end = a.slices[2].start + 1
    a.slices[3].start = a.slices[2].end
    validateAssignment(a)
    const m = new SliceMap(a)
    expect(m.owners).toEqual(['a', 'c', 'b', 'b'])
    expect(m.replicas.map((r) => r.join(''))).toEqual(['ab', 'ca', 'bca', 'b'])
    expect(m.admitters.map((r) => r.join(''))).toEqual(['ab', 'c', 'bca', ''])
    expect(m.admits(0, 'b')).toBe(true)
    expect(m.admits(1, 'a')).toBe(false) // a new replica waits for the grant
    expect(m.admits(1, 'c')).toBe(true) // the holder keeps serving
    expect(m.admits(3, 'b')).toBe(false)
    expect(m.hasReplicas).toBe(true)
    expect(new SliceMap(layout('a', 'b')).hasReplicas).toBe(false)
  })

  test('owned ranges include replica positions and holders', () => {
    const a = layout('ab', 'c')
    expect(ownedRanges(a, 'b')).toEqual([{ start: 0, end: H }])
    a.slices[1] = { ...a.slices[1], servers: ['c', 'b'], moving: true, holders: ['c'] }
    expect(ownedRanges(a, 'b')).toEqual([{ start: 0, end: H }])
    expect(ownedRanges(a, 'c')).toEqual([{ start: H, end: KEYSPACE_SIZE }])
  })

  test('churn counts each server that gains a range; same-server reorders and dropped replicas are free', () => {
    expect(keyChurn(layout('a', 'b'), layout('b', 'b'))).toBe(H)
    expect(keyChurn(layout('a', 'b'), layout('ab', 'b'))).toBe(H) // one new replica
    expect(keyChurn(layout('a', 'b'), layout('abc', 'b'))).toBe(2 * H) // two
    expect(keyChurn(layout('ab', 'b'), layout('ba', 'b'))).toBe(0) // new primary, same servers
    expect(keyChurn(layout('abc', 'b'), layout('a', 'b'))).toBe(0) // dropped replicas
    expect(keyChurn(layout('ab', 'b'), layout('c', 'b'))).toBe(H) // moved to a new server
  })

  test('per-server load splits a replicated slice evenly', () => {
    const loads = serverLoads(layout('abc', 'b'), [90, 10])
    expect(loads.a.load).toBeCloseTo(30)
    expect(loads.b.load).toBeCloseTo(40)
    expect(loads.c.load).toBeCloseTo(30)
    expect(loads.a.keys).toBe(H)
  })

  test('sameLayout sees holders', () => {
    const x = layout('ab', 'c')
    const y = layout('ab', 'c')
    x.slices[0].moving = y.slices[0].moving = true
    x.slices[0].holders = ['a']
    expect(sameLayout(x, y)).toBe(false)
    y.slices[0].holders = ['a']
    expect(sameLayout(x, y)).toBe(true)
  })
})

describe('planHandoff with replicas', () => {
  test('a slice that only gains replicas keeps its servers admitting; they must still acknowledge', () => {
    const { revoke, losers } = planHandoff(layout('a', 'b'), layout('ac', 'b'))
    expect(revoke.slices[0]).toEqual({ start: 0, end: H, servers: ['a', 'c'], moving: true, holders: ['a'] })
    expect(revoke.slices[1]).toEqual({ start: H, end: KEYSPACE_SIZE, servers: ['b'] })
    expect(losers).toEqual(['a'])
  })

  test('a dropped replica fences the whole slice: nobody admits it until the grant', () => {
    const { revoke, losers } = planHandoff(layout('abc', 'b'), layout('ab', 'b'))
    expect(revoke.slices[0]).toEqual({ start: 0, end: H, servers: ['a', 'b'], moving: true })
    expect(losers).toEqual(['a', 'b', 'c'])
  })

  test('a new primary among the same servers is not a handoff', () => {
    const { losers, moving } = planHandoff(layout('ab', 'c'), layout('ba', 'c'))
    expect(losers).toEqual([])
    expect(moving).toBe(0)
  })

  test('randomized: a revoke map grants nothing, its holders keep only what they had, and every admitter of a changed range acknowledges', () => {
    const rng = createRng(23)
    const ids = ['a', 'b', 'c']
    const randomSet = () => {
      const set = ids.filter(() => rng.next() < 0.5)
      if (set.length === 0) set.push(ids[rng.int(3)])
      for (let i = set.length - 1; i > 0; i--) { const j = rng.int(i + 1); [set[i], set[j]] = [set[j], set[i]] }
      return set.join('')
    }
    for (let t = 0; t < 500; t++) {
      const current = layout(...Array.from({ length: 1 + rng.int(6) }, randomSet))
      current.slices.forEach((s) => {
        if (rng.next() < 0.2) {
          s.moving = true
          const h = s.servers.filter(() => rng.next() < 0.5)
          if (h.length > 0) s.holders = h
        }
      })
      validateAssignment(current)
      const next = layout(...Array.from({ length: 1 + rng.int(6) }, randomSet))
      const { revoke, losers } = planHandoff(current, next)
      validateAssignment({ ...revoke, generation: 2 })
      for (const id of ids) {
        expect(subtract(ownedRanges(revoke, id), ownedRanges(current, id))).toEqual([])
        // A server that admits a range now whose server set changes must acknowledge.
        const changed = current.slices.some((s) => {
          const admits = s.moving ? (s.holders || []).includes(id) : s.servers.includes(id)
          if (!admits) return false
          return next.slices.some((n) => n.start < s.end && n.end > s.start && (s.moving || n.servers.length !== s.servers.length || n.servers.some((x) => !s.servers.includes(x))))
        })
        expect(losers.includes(id)).toBe(changed)
      }
      // Without the marks, the revoke map routes exactly like the target.
      for (const key of [0, H - 1, H, KEYSPACE_SIZE - 1]) {
        const set = (a) => a.slices.find((s) => s.end > key).servers.join('')
        expect(set(withoutMoving(revoke))).toBe(set(next))
      }
    }
  })
})

describe('ShardGuard with replicas', () => {
  const { ShardGuard } = require('../../appserver-lib/index.js')
  const { sliceKey } = require('../../core/keyspace')
  const keyIn = (lo, hi) => { for (let i = 0; ; i++) { const k = `k${i}`; const h = sliceKey(k); if (h >= lo && h < hi) return k } }

  test('every listed server admits; during a handoff holders keep admitting and new replicas hold until the grant', async () => {
    const first = keyIn(0, H)
    const acquired = []
    const b = new ShardGuard({ serverId: 'b', holdMs: 2000, onAcquire: (ranges) => acquired.push(ranges) })
    const a = new ShardGuard({ serverId: 'a', holdMs: 2000 })
    for (const g of [a, b]) g.setAssignment(layout('ab', 'c'))
    expect(a.admit(first)).toBe(sliceKey(first))
    expect(b.admit(first)).toBe(sliceKey(first)) // a replica, not the primary
    expect(acquired).toEqual([[{ start: 0, end: H }]])

    // c joins the slice: a and b are holders and keep serving; c holds.
    const c = new ShardGuard({ serverId: 'c', holdMs: 2000 })
    const revoke = layout('abc', 'c')
    revoke.generation = 2
    Object.assign(revoke.slices[0], { moving: true, holders: ['a', 'b'] })
    for (const g of [a, b, c]) g.setAssignment(revoke)
    expect(a.admitSliceKey(sliceKey(first))).toBeGreaterThanOrEqual(0)
    expect(c.admitSliceKey(sliceKey(first))).toBe(-1)
    expect(c.shouldHold(sliceKey(first), 2)).toBe(true)
    const held = c.admitOrHold(sliceKey(first), 2)
    const grant = layout('abc', 'c')
    grant.generation = 3
    c.setAssignment(grant)
    expect(await held).toBeGreaterThanOrEqual(0)
  })

  /** c joins slice 0 (a and b hold it); slice 1 is a and b's, not moving. */
  function joiningGuard (holdMs) {
    const c = new ShardGuard({ serverId: 'c', holdMs })
    const revoke = layout('abc', 'ab')
    revoke.generation = 2
    Object.assign(revoke.slices[0], { moving: true, holders: ['a', 'b'] })
    c.setAssignment(revoke)
    return c
  }

  test('a joining server admits what the app lets it take before the grant (admitSliceKey with joining); nothing else', async () => {
    const joined = sliceKey(keyIn(0, H))
    const other = sliceKey(keyIn(H, KEYSPACE_SIZE))
    const c = joiningGuard(60000) // a hold would outlast the test
    expect(c.admitSliceKey(joined)).toBe(-1)
    const before = { ...c.stats }
    expect(c.admitSliceKey(joined, true)).toBe(0)
    expect(c.stats.admitted).toBe(before.admitted + 1)
    expect(c.admitSliceKey(other, true)).toBe(-1) // not listed there
    expect(c.stats.misdirected).toBe(before.misdirected + 1)
    // admitOrHold with joining: at once, no hold, not counted as misdirected
    const misdirected = c.stats.misdirected
    expect(await c.admitOrHold(joined, 2, () => false, true)).toBe(0)
    expect(c.stats.held).toBe(before.held)
    expect(c.stats.misdirected).toBe(misdirected)
    // once granted it is simply ours
    const grant = layout('abc', 'ab')
    grant.generation = 3
    c.setAssignment(grant)
    expect(c.admitSliceKey(joined)).toBe(0)
    expect(c.admitSliceKey(joined, true)).toBe(0) // granted: simply ours
  })

  test('through the middleware: requests admitJoining picks are served by a joining server at once; the others wait for the grant', async () => {
    const express = require('express')
    const { shardGuardMiddleware } = require('../../appserver-lib/middleware')
    const { listen, close } = require('../../core/http')
    const c = joiningGuard(10000)
    const app = express()
    app.use(shardGuardMiddleware(c, { admitJoining: (req) => req.method === 'POST' && req.path === '/fence' }))
    app.use((req, res) => res.json({ slice: req.sliceKey, replicas: req.chopperReplicas }))
    const server = require('node:http').createServer(app)
    const port = await listen(server, 0, '127.0.0.1')
    const key = keyIn(0, H)
    try {
      const url = (path) => `http://127.0.0.1:${port}${path}?key=${key}`
      const fence = await fetch(url('/fence'), { method: 'POST' })
      expect(fence.status).toBe(200)
      expect(await fence.json()).toEqual({ slice: sliceKey(key), replicas: ['a', 'b', 'c'] })
      expect(c.stats.held).toBe(0)
      // a read of the same key is held until the grant
      const read = fetch(url('/read'))
      await pollUntil(() => c.stats.held === 1, { what: 'the read to be held' })
      const grant = layout('abc', 'ab')
      grant.generation = 3
      c.setAssignment(grant)
      expect((await read).status).toBe(200)
      expect(() => shardGuardMiddleware(c, { admitJoining: 'yes' })).toThrow(/invalid admitJoining/)
    } finally {
      server.closeAllConnections()
      await close(server)
    }
  })
})
