'use strict'

const { RoutingTable } = require('../../core/routing-table')
const { KEYSPACE_SIZE } = require('../../core/keyspace')

const map = (generation) => ({ generation, servers: { a: { url: 'http://127.0.0.1:1' } }, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['a'] }] })

describe('RoutingTable', () => {
  test('waitNewer keeps its deadline when the pull hangs (a controller cut off), and a push still wakes it', async () => {
    let pulls = 0
    const hang = []
    const table = new RoutingTable({ pull: () => { pulls++; return new Promise((resolve) => hang.push(resolve)) } })
    table.set(map(1))
    const t0 = Date.now()
    await table.waitNewer(1, { timeoutMs: 300, pullEveryMs: 50 })
    // Back at the deadline, not when the pull ends (it never does here); one pull shared by every look.
    expect(Date.now() - t0).toBeLessThan(2000)
    expect(pulls).toBe(1)
    const waiting = table.waitNewer(1, { timeoutMs: 10000, pullEveryMs: 50 })
    table.set(map(2)) // a push
    expect((await waiting).generation).toBe(2)
    hang.forEach((resolve) => resolve(null))
  })

  test('pullFailing says whether the last pull failed', async () => {
    let fail = true
    const table = new RoutingTable({ pull: async () => { if (fail) throw new Error('cut'); return map(3) } })
    table.set(map(1))
    await table.refresh()
    expect(table.pullFailing).toBe(true)
    fail = false
    await table.refresh()
    expect(table.pullFailing).toBe(false)
    expect(table.generation).toBe(3)
  })
})
