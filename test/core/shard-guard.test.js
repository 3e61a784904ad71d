'use strict'

const { ShardGuard } = require('../../appserver-lib/index.js')
const { sliceKey, KEYSPACE_SIZE } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')

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
    // hot: each slice's majority vote over the keys it admitted (core/hot-keys.js)
    const ha = sliceKey(a)
    const hb = sliceKey(b)
    expect(r.entries).toEqual([{ start: 0, end: H, count: 3, cost: 0, hot: { key: ha, votes: 3 } }, { start: H, end: KEYSPACE_SIZE, count: 1, cost: 0, hot: { key: hb, votes: 1 } }])
    // Not acknowledged (the answer was lost): read again, nothing lost, nothing doubled, plus new counts.
    g.admit(b)
    const again = g.report()
    expect(again.entries).toEqual([{ start: 0, end: H, count: 3, cost: 0, hot: { key: ha, votes: 3 } }, { start: H, end: KEYSPACE_SIZE, count: 2, cost: 0, hot: { key: hb, votes: 2 } }])
    expect(again.frames).toBe(2)
    expect(again.seq).toBe(r.seq + 1)
    // Acknowledged: only what came after.
    g.admit(a)
    expect(g.report({ instance: again.instance, seq: again.seq }).entries).toEqual([{ start: 0, end: H, count: 1, cost: 0, hot: { key: ha, votes: 1 } }])
    // An acknowledgement for another incarnation is ignored.
    expect(g.report({ instance: 'other', seq: 1e9 }).entries).toEqual([{ start: 0, end: H, count: 1, cost: 0, hot: { key: ha, votes: 1 } }])
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

  test('fires onAssignment with every map installed, also one that changes only other servers\' part; a throwing hook is logged, not thrown', () => {
    const seen = []
    const errors = []
    const logger = { error: (o, msg) => errors.push([o.hook, msg]), warn () {}, info () {}, debug () {}, child () { return this } }
    const g = new ShardGuard({
      serverId: 'me',
      logger,
      onAssignment: (ctx) => {
        seen.push([ctx.generation, ctx.map === g.map, ctx.assignment === ctx.map.assignment])
        if (ctx.generation === 3) throw new Error('boom')
      }
    })
    g.setAssignment(gen(1, 'me'))
    g.setAssignment(gen(2, 'me')) // our ranges unchanged: no onAcquire / onRelease
    g.setAssignment(gen(2, 'me')) // a repeat: not installed again
    expect(() => g.setAssignment(gen(3, 'me'))).not.toThrow()
    expect(g.generation).toBe(3)
    expect(seen).toEqual([[1, true, true], [2, true, true], [3, true, true]])
    expect(errors).toEqual([['onAssignment', 'assignment hook failed']])
    expect(() => new ShardGuard({ serverId: 'me', onAssignment: 'x' })).toThrow(/invalid onAssignment/)
  })

  test('an async onAssignment that rejects is logged, not left as an unhandled rejection', async () => {
    const errors = []
    const unhandled = []
    const onUnhandled = (err) => unhandled.push(err)
    process.on('unhandledRejection', onUnhandled)
    try {
      const logger = { error: (o, msg) => errors.push([o.hook, o.err.message, msg]), warn () {}, info () {}, debug () {}, child () { return this } }
      const g = new ShardGuard({ serverId: 'me', logger, onAssignment: async () => { throw new Error('async boom') } })
      expect(() => g.setAssignment(gen(1, 'me'))).not.toThrow()
      // either outcome shows within a few turns of the event loop
      await pollUntil(() => errors.length > 0 || unhandled.length > 0, { timeoutMs: 2000, intervalMs: 1, what: 'the hook\'s rejection to surface' })
      await new Promise((resolve) => setImmediate(resolve))
      expect(errors).toEqual([['onAssignment', 'async boom', 'assignment hook failed']])
      expect(unhandled).toEqual([])
    } finally {
      process.off('unhandledRejection', onUnhandled)
    }
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
  test('a moving slice is admitted by nobody; its new owner holds a request until the grant', async () => {
    const g = new ShardGuard({ serverId: 'me', holdMs: 5000 })
    g.setAssignment(gen(1, 'other', 'other'))
    const k = keyIn(0, H)
    const revoke = gen(2, 'me')
    revoke.slices[0].moving = true
    g.setAssignment(revoke)
    expect(g.admitSliceKey(sliceKey(k))).toBe(-1)
    expect(g.shouldHold(sliceKey(k), 2)).toBe(true)
    const held = g.admitOrHold(sliceKey(k), 2)
    expect(g.stats.held).toBe(1)
    g.setAssignment(gen(3, 'me'))
    expect(await held).toBeGreaterThanOrEqual(0)
  })

  test('a request routed with a newer generation waits for it; without a newer map it is refused after holdMs', async () => {
    let now = 0
    const g = new ShardGuard({ serverId: 'me', holdMs: 20, now: () => now })
    g.setAssignment(gen(1, 'other'))
    const k = sliceKey(keyIn(0, H))
    expect(g.shouldHold(k, 1)).toBe(false) // same generation: refuse at once
    expect(g.shouldHold(k, 2)).toBe(true)
    const held = g.admitOrHold(k, 2)
    now = 25 // the hold's deadline passes before any newer map arrives
    expect(await held).toBe(-1)
  })

  test('strict: admits only under a live lease, measured from when the renewal was sent, and only for the required generation', () => {
    let now = 1000
    const g = new ShardGuard({ serverId: 'me', consistency: 'strict', now: () => now })
    g.setAssignment(gen(4, 'me'))
    const k = sliceKey(keyIn(0, H))
    expect(g.admitSliceKey(k)).toBeGreaterThanOrEqual(0) // no lease ever granted: not in force
    expect(g.applyLease({ leaseMs: 1500, minGeneration: 5 }, 900)).toBe(false) // we hold 4 < 5
    expect(g.applyLease({ leaseMs: 1500, minGeneration: 4 }, 900)).toBe(true)
    now = 2399
    expect(g.admitSliceKey(k)).toBeGreaterThanOrEqual(0)
    now = 2400 // 900 + 1500
    expect(g.admitSliceKey(k)).toBe(-2)
    expect(() => g.admit(keyIn(0, H))).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_LEASE_EXPIRED', status: 421 }))
    expect(g.stats.leaseRefused).toBe(2)
    const a = new ShardGuard({ serverId: 'me', consistency: 'available', now: () => now })
    a.setAssignment(gen(4, 'me'))
    a.applyLease({ leaseMs: 1, minGeneration: 0 }, 0)
    expect(a.admitSliceKey(k)).toBeGreaterThanOrEqual(0) // available: the lease does not gate admission
  })

  test('drainedGeneration stays below a revoke until writes admitted under older maps finish; reads do not hold it', async () => {
    const g = new ShardGuard({ serverId: 'me' })
    g.setAssignment(gen(1, 'me'))
    const k = sliceKey(keyIn(0, H))
    g.admitSliceKey(k)
    const write = g.begin(true)
    const read = g.begin(false)
    g.setAssignment(gen(2, 'other'))
    expect(g.drainedGeneration).toBe(1)
    const drained = g.waitDrained(5000)
    g.end(write, -1, 0, true)
    expect(await drained).toBe(true)
    expect(g.drainedGeneration).toBe(2) // the read still runs
    expect(await g.waitDrained(0)).toBe(true)
    g.end(read)
    expect(g.older).toEqual([])
  })

  test("handoffDrain 'all' waits for reads too", async () => {
    const g = new ShardGuard({ serverId: 'me', handoffDrain: 'all' })
    g.setAssignment(gen(1, 'me'))
    const read = g.begin(false)
    g.setAssignment(gen(2, 'other'))
    expect(g.drainedGeneration).toBe(1)
    expect(await g.waitDrained(0)).toBe(false)
    const drained = g.waitDrained(5000)
    g.end(read)
    expect(await drained).toBe(true)
    expect(g.drainedGeneration).toBe(2)
    expect(() => new ShardGuard({ serverId: 'me', handoffDrain: 'some' })).toThrow(/invalid handoffDrain/)
  })

  test('invalid consistency or holdMs is refused with a message naming it', () => {
    expect(() => new ShardGuard({ serverId: 'me', consistency: 'eventual' })).toThrow(/invalid consistency/)
    expect(() => new ShardGuard({ serverId: 'me', holdMs: -1 })).toThrow(/invalid holdMs/)
  })
})

describe('settleRequest', () => {
  const express = require('express')
  const http = require('node:http')
  const { shardGuardMiddleware, settleRequest } = require('../../appserver-lib/index.js')
  test('a write whose effects are done stops holding a handoff, though its response is still open', async () => {
    const g = new ShardGuard({ serverId: 'me' })
    g.setAssignment(gen(1, 'me', 'me'))
    let finish
    const app = express()
    app.use(shardGuardMiddleware(g))
    app.put('/w', (req, res) => {
      settleRequest(req)
      settleRequest(req) // idempotent
      finish = () => res.end('ok')
    })
    const server = http.createServer(app)
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const done = fetch(`http://127.0.0.1:${server.address().port}/w?key=a`, { method: 'PUT' })
      const { pollUntil } = require('../../core/poll')
      await pollUntil(() => finish !== undefined, { timeoutMs: 5000, intervalMs: 5, what: 'the write to arrive' })
      g.setAssignment(gen(2, 'other', 'other'))
      expect(g.drainedGeneration).toBe(2) // settled: nothing to wait for
      expect(g.older.length).toBe(1) // but still in flight (its cost is still to come)
      finish()
      expect((await done).status).toBe(200)
      await pollUntil(() => g.older.length === 0, { timeoutMs: 5000, intervalMs: 5, what: 'the request to close' })
      expect(g.older[0] === undefined && g.current.writes).toBe(0)
    } finally {
      server.close()
    }
  })
})

describe('the 421 owner hint', () => {
  const express = require('express')
  const http = require('node:http')
  const { shardGuardMiddleware } = require('../../appserver-lib/index.js')
  const { jsonErrorHandler } = require('../../core/http')
  const { silent } = require('../../core/logger')

  async function serve (guard) {
    const app = express()
    app.use(shardGuardMiddleware(guard))
    app.get('/x', (req, res) => res.json({ ok: true }))
    app.use(jsonErrorHandler(silent))
    const server = http.createServer(app)
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    return { server, get: (key) => fetch(`http://127.0.0.1:${server.address().port}/x?key=${key}`) }
  }

  test('a refusal because the map names other servers names them, primary first; an admission or a lease refusal names nobody', async () => {
    const g = new ShardGuard({ serverId: 'me' })
    g.setAssignment({
      generation: 7,
      slices: [{ start: 0, end: H, servers: ['me'] }, { start: H, end: KEYSPACE_SIZE, servers: ['other', 'third'] }],
      servers: { ...servers, third: { url: 'http://127.0.0.1:3' } }
    })
    const { server, get } = await serve(g)
    try {
      const refused = await get(keyIn(H, KEYSPACE_SIZE))
      expect(refused.status).toBe(421)
      expect((await refused.json()).error.code).toBe('CHOPPER_ERR_NOT_OWNER')
      expect(refused.headers.get('x-chopper-generation')).toBe('7')
      expect(refused.headers.get('x-chopper-owner')).toBe('other,third')
      g.setAssignment(gen(8, 'me'))
      const single = await get(keyIn(H, KEYSPACE_SIZE))
      expect(single.headers.get('x-chopper-owner')).toBe('other')
      expect(single.headers.get('x-chopper-generation')).toBe('8')
      const admitted = await get(keyIn(0, H))
      expect(admitted.status).toBe(200)
      expect(admitted.headers.get('x-chopper-owner')).toBe(null)
    } finally {
      server.close()
    }

    let now = 1000
    const strict = new ShardGuard({ serverId: 'me', consistency: 'strict', holdMs: 0, now: () => now })
    strict.setAssignment(gen(4, 'me'))
    strict.applyLease({ leaseMs: 1500, minGeneration: 4 }, 900)
    now = 2400 // the lease ran out: our map may be out of date, so it names nobody
    const lapsed = await serve(strict)
    try {
      const r = await lapsed.get(keyIn(0, H))
      expect(r.status).toBe(421)
      expect((await r.json()).error.code).toBe('CHOPPER_ERR_LEASE_EXPIRED')
      expect(r.headers.get('x-chopper-owner')).toBe(null)
    } finally {
      lapsed.server.close()
    }
  })
})
