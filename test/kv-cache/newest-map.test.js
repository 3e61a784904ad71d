'use strict'

const { NewestMap } = require('../../apps/kv-cache/newest-map')
const { SliceMap } = require('../../core/slice-map')
const { KEYSPACE_SIZE } = require('../../core/keyspace')

const H = KEYSPACE_SIZE / 2
const servers = { A: { url: 'http://127.0.0.1:1' }, B: { url: 'http://127.0.0.1:2' }, C: { url: 'http://127.0.0.1:3' } }
const layout = (generation, low, high = ['C']) => ({ generation, slices: [{ start: 0, end: H, ...low }, { start: H, end: KEYSPACE_SIZE, servers: high }], servers })

describe('NewestMap (kv-cache): the newest installed map, for write fencing', () => {
  test('keeps the newest generation it is shown; an older or equal one is ignored', () => {
    const m = new NewestMap()
    expect(m.generation).toBe(-1)
    m.learn({ assignment: layout(5, { servers: ['A', 'B'] }) })
    m.learn({ assignment: layout(4, { servers: ['A'] }) })
    m.learn({ assignment: layout(5, { servers: ['A'] }) })
    m.learn(undefined)
    m.learn({ assignment: { generation: 9 } }) // not an assignment
    expect(m.generation).toBe(5)
    expect(m.map.replicas[0]).toEqual(['A', 'B'])
    const a = layout(6, { servers: ['A'] })
    const sm = new SliceMap(a)
    m.learn({ assignment: a, map: sm })
    expect(m.map).toBe(sm) // the guard's own SliceMap, not a copy
  })

  test('dropped: only a newer map that settles the key\'s slice without the replica', () => {
    const m = new NewestMap()
    expect(m.dropped('B', 10, 5)).toBe(false) // no map yet
    m.learn({ assignment: layout(6, { servers: ['A', 'B'], moving: true }) })
    expect(m.dropped('C', 10, 5)).toBe(false) // in a handoff: C may not have installed the revoke
    m.learn({ assignment: layout(7, { servers: ['A', 'B'] }) })
    expect(m.dropped('C', 10, 5)).toBe(true) // settled without C
    expect(m.dropped('B', 10, 5)).toBe(false) // still listed
    expect(m.dropped('C', 10, 7)).toBe(false) // the write was admitted under this very map
    expect(m.dropped('C', H + 10, 5)).toBe(false) // the other slice lists C
    expect(m.dropped('Z', H + 10, 5)).toBe(true) // not a server of that slice (nor of the cluster)
  })

  test('waitFor: resolves true once that generation (or a newer one) is learned, false after the timeout or at close', async () => {
    const m = new NewestMap()
    m.learn({ assignment: layout(3, { servers: ['A'] }) })
    await expect(m.waitFor(3, 10)).resolves.toBe(true)
    const five = m.waitFor(5, 60000)
    const six = m.waitFor(6, 60000)
    m.learn({ assignment: layout(5, { servers: ['A'] }) })
    await expect(five).resolves.toBe(true)
    await expect(m.waitFor(9, 1)).resolves.toBe(false)
    m.close()
    await expect(six).resolves.toBe(false)
    expect(m.waiters.size).toBe(0)
  })

  test('waitFor with a signal: false as soon as the asker goes away, and nothing is left waiting', async () => {
    const m = new NewestMap()
    const gone = new AbortController()
    const waiting = m.waitFor(4, 60000, gone.signal)
    expect(m.waiters.size).toBe(1)
    gone.abort()
    await expect(waiting).resolves.toBe(false)
    expect(m.waiters.size).toBe(0)
    await expect(m.waitFor(4, 60000, gone.signal)).resolves.toBe(false) // already aborted
    expect(m.waiters.size).toBe(0)
    // reached first: the signal's listener goes with it
    const later = new AbortController()
    let listeners = 0
    const signal = later.signal
    const add = signal.addEventListener.bind(signal)
    const remove = signal.removeEventListener.bind(signal)
    signal.addEventListener = (...a) => { listeners++; add(...a) }
    signal.removeEventListener = (...a) => { listeners--; remove(...a) }
    const five = m.waitFor(5, 60000, signal)
    expect(listeners).toBe(1)
    m.learn({ assignment: layout(5, { servers: ['A'] }) })
    await expect(five).resolves.toBe(true)
    expect(listeners).toBe(0)
    later.abort() // too late to matter
    expect(m.waiters.size).toBe(0)
  })

  test('urlOf: the admitting map\'s servers first, then the newest map\'s', () => {
    const m = new NewestMap()
    expect(m.urlOf('A')).toBe(undefined)
    m.learn({ assignment: layout(3, { servers: ['A'] }) })
    expect(m.urlOf('B')).toBe('http://127.0.0.1:2')
    expect(m.urlOf('B', { chopperServers: { B: { url: 'http://127.0.0.1:9' } } })).toBe('http://127.0.0.1:9')
    expect(m.urlOf('Z')).toBe(undefined)
  })
})
