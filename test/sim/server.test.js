'use strict'

const { createEngine } = require('../../sim/engine')
const { SimServer } = require('../../sim/server')
const { createRng } = require('../../loadgen/prng')

function setup (opts) {
  const engine = createEngine()
  const done = []
  const server = new SimServer({ id: 's0', engine, rng: createRng(1), onComplete: (req) => done.push(req), service: { type: 'deterministic', mean: 2 }, ...opts })
  return { engine, server, done }
}

describe('sim server', () => {
  test('one slot: FIFO queue, sojourn = wait + service', () => {
    const { engine, server, done } = setup({ missCost: 1 })
    for (const k of ['a', 'b', 'c']) engine.at(0, () => server.arrive({ key: k, arrivedAt: engine.now }))
    engine.run()
    expect(done.map((r) => [r.key, r.startedAt, r.doneAt])).toEqual([['a', 0, 2], ['b', 2, 4], ['c', 4, 6]])
  })

  test('capacity 2 serves two at once', () => {
    const { engine, server, done } = setup({ missCost: 1, capacity: 2 })
    for (const k of ['a', 'b', 'c']) engine.at(0, () => server.arrive({ key: k, arrivedAt: 0 }))
    engine.run()
    expect(done.map((r) => r.doneAt)).toEqual([2, 2, 4])
  })

  test('a cold key pays the miss cost until warm, and an evicted key is cold again', () => {
    const { engine, server, done } = setup({ missCost: 3, warmAfter: 2, warmKeys: 2 })
    const keys = ['a', 'a', 'a', 'b', 'c', 'a']
    keys.forEach((k, i) => engine.at(i * 100, () => server.arrive({ key: k, arrivedAt: engine.now })))
    engine.run()
    // a: miss, miss (warmAfter 2), hit; b, c: miss; a was evicted by b and c (LRU of 2): miss
    expect(done.map((r) => r.serviceMs)).toEqual([6, 6, 2, 6, 6, 6])
    expect(server.misses).toBe(5)
  })

  test('options are validated by name', () => {
    expect(() => setup({ capacity: 0 })).toThrow(/capacity/)
    expect(() => setup({ missCost: 0.5 })).toThrow(/missCost/)
    expect(() => setup({ cpus: 2 })).toThrow(/unknown server option cpus/)
  })
})
