'use strict'

const { DynamoStateStore } = require('../../controller/state-store')
const { describeEachDynamo } = require('../helpers/dynamo-backends')

// The controllers' state store (docs/controller-ha.md) against dynalite and DynamoDB Local.
describeEachDynamo('DynamoStateStore', (endpoint) => {
  let tables = 0
  const stores = []
  const open = (table) => {
    const store = new DynamoStateStore({ table, endpoint: endpoint(), timeoutMs: 2000 })
    stores.push(store)
    return store
  }
  afterEach(() => { for (const s of stores.splice(0)) s.close() })

  test('ensureTable creates the table once, even when several controllers start together', async () => {
    const table = `ctl-${++tables}`
    const [a, b, c] = [open(table), open(table), open(table)]
    await Promise.all([a.ensureTable(), b.ensureTable(), c.ensureTable()])
    expect(await a.readLease()).toBe(null)
    await expect(open(`missing-${tables}`).ensureTable({ create: false })).rejects.toThrow(/does not exist/)
  })

  test('lease: first taker wins; renewals keep it; a takeover needs the record version it watched; a release frees it', async () => {
    const table = `ctl-${++tables}`
    const a = open(table)
    const b = open(table)
    await a.ensureTable()
    const first = await a.acquireLease({ holder: 'a/1', url: 'http://a', leaseMs: 1000, observed: null })
    expect(first).toMatchObject({ holder: 'a/1', url: 'http://a' })
    expect(first.epoch).toBeGreaterThan(Date.now() - 60000)
    // b saw nobody too, but a was first.
    expect(await b.acquireLease({ holder: 'b/1', url: 'http://b', leaseMs: 1000, observed: null })).toBe(null)
    const seen = await b.readLease()
    expect(seen).toMatchObject({ holder: 'a/1', epoch: first.epoch, rvn: first.rvn, released: false })
    const renewed = await a.renewLease(first, 1000)
    expect(renewed.rvn).not.toBe(first.rvn)
    // A takeover conditional on the version before the renewal fails: a is alive.
    expect(await b.acquireLease({ holder: 'b/1', url: 'http://b', leaseMs: 1000, observed: seen })).toBe(null)
    // On the current version it succeeds, with a higher epoch; a's renewal then fails.
    const taken = await b.acquireLease({ holder: 'b/1', url: 'http://b', leaseMs: 1000, observed: await b.readLease() })
    expect(taken.epoch).toBeGreaterThan(first.epoch)
    expect(await a.renewLease(renewed, 1000)).toBe(null)
    expect(await a.releaseLease(renewed)).toBe(false)
    expect(await b.releaseLease(taken)).toBe(true)
    expect(await a.readLease()).toMatchObject({ holder: 'b/1', released: true })
  })

  test('state: saved in parts and resumed whole; a lower epoch can neither claim nor save; generations never go back', async () => {
    const store = open(`ctl-${++tables}`)
    await store.ensureTable()
    expect(await store.loadState()).toBe(null)
    await store.claimState(5)
    expect(await store.loadState()).toBe(null) // claimed, nothing saved yet
    // 40k slices compress to several 300 KB parts.
    const slices = Array.from({ length: 40000 }, (_, i) => ({ start: i, end: i + 1, servers: [`s${i % 97}-${(i * 7919) % 10007}`] }))
    const out = await store.saveState({ epoch: 5, generation: 10, state: { slices } })
    expect(out.parts).toBeGreaterThan(1)
    const saved = await store.loadState()
    expect(saved).toMatchObject({ epoch: 5, generation: 10 })
    expect(saved.state.slices).toEqual(slices)
    await store.saveState({ epoch: 5, generation: 10, state: { small: true } }) // membership only: same generation
    expect((await store.loadState()).state).toEqual({ small: true })
    await expect(store.saveState({ epoch: 5, generation: 9, state: {} })).rejects.toMatchObject({ code: 'CHOPPER_ERR_DEPOSED' })
    await expect(store.claimState(4)).rejects.toMatchObject({ code: 'CHOPPER_ERR_DEPOSED' })
    await store.claimState(6)
    await expect(store.saveState({ epoch: 5, generation: 12, state: {} })).rejects.toMatchObject({ code: 'CHOPPER_ERR_DEPOSED' })
    expect((await store.loadState()).state).toEqual({ small: true })
  })

  test('an unreachable store is a 503 StoreUnavailableError, not a crash', async () => {
    const store = new DynamoStateStore({ table: 'ctl-x', endpoint: 'http://127.0.0.1:1', timeoutMs: 300 })
    stores.push(store)
    await expect(store.readLease()).rejects.toMatchObject({ code: 'CHOPPER_ERR_STORE_UNAVAILABLE', status: 503 })
  })
})
