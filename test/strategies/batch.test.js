'use strict'

const { strategies } = require('../../controller/strategies')
const chopper = require('../../controller/strategies/chopper')
const { InvalidArgumentError } = require('../../core/errors')
const { prng, deepFreeze } = require('./helpers')

const url = (id) => `http://127.0.0.1:1/${id}`
const serversOf = (ids) => Object.fromEntries(ids.map((id) => [id, { url: url(id) }]))

/** A chopper layout some rounds old (replica sets of several shapes), with loads for it. */
function layout (seed, opts) {
  const rand = prng(seed)
  const n = 2 + Math.floor(rand() * 24)
  let a = chopper.initial(serversOf(Array.from({ length: n }, (_, i) => `s${i}`)), opts)
  for (let r = 0; r < 3; r++) a = chopper.rebalance(a, a.slices.map(() => Math.floor(rand() * 50)), opts)
  // some zeros and some equal loads, so ties decide too
  const loads = a.slices.map(() => (rand() < 0.2 ? 0 : rand() < 0.2 ? 7 : Math.floor(rand() * 100)))
  return { a, loads, rand }
}

describe('chopper addServers / removeServers', () => {
  const variants = [{}, { replicate: false }, { minReplicas: 3 }, { minReplicas: 1 }]

  test.each(Array.from({ length: 80 }, (_, i) => i + 1))('seed %i: the result of one call per server in turn', (seed) => {
    const opts = variants[seed % variants.length]
    const { a, loads, rand } = layout(seed, opts)
    const ids = Object.keys(a.servers)
    const leave = ids.filter(() => rand() < 0.5).slice(0, ids.length - 1)
    const unknown = ids.filter(() => rand() < 0.3)
    const inputs = seed % 2 ? { unknownServers: unknown } : undefined
    const given = seed % 3 ? loads : undefined
    deepFreeze(a)
    let loop = a
    for (const id of leave) {
      // as the controller passes them: only servers still in the assignment
      const now = inputs && { unknownServers: unknown.filter((u) => Object.hasOwn(loop.servers, u)) }
      loop = chopper.removeServer(loop, id, given, opts, now)
    }
    expect(chopper.removeServers(a, leave, given, opts, inputs)).toEqual(loop)

    const joins = Array.from({ length: 1 + Math.floor(rand() * 5) }, (_, k) => ({ id: `n${k}`, url: url(`n${k}`) }))
    let joined = a
    for (const j of joins) joined = chopper.addServer(joined, j.id, j.url, given, opts, inputs)
    expect(chopper.addServers(a, joins, given, opts, inputs)).toEqual(joined)
  })

  test('a server that takes slices in one leave can give them on at a later one', () => {
    const a = chopper.initial(serversOf(['a', 'b', 'c', 'd']), { replicate: false })
    const loads = a.slices.map((s, i) => i + 1)
    let loop = a
    for (const id of ['a', 'b', 'c']) loop = chopper.removeServer(loop, id, loads, { replicate: false })
    const batch = chopper.removeServers(a, ['a', 'b', 'c'], loads, { replicate: false })
    expect(batch).toEqual(loop)
    expect(batch.slices.every((s) => s.servers[0] === 'd')).toBe(true)
  })

  test('checks the batch before doing anything, naming the entry', () => {
    const a = chopper.initial(serversOf(['a', 'b']))
    expect(() => chopper.addServers(a, [{ id: 'c', url: url('c') }, { id: 'c', url: url('c') }])).toThrow('server c is already in the assignment')
    expect(() => chopper.addServers(a, [{ id: 'a', url: url('a') }])).toThrow('server a is already in the assignment')
    expect(() => chopper.addServers(a, [{ id: 'c', url: 'ftp://x' }])).toThrow(/joins\[0\]\.url must be an http\(s\) URL/)
    expect(() => chopper.addServers(a, { id: 'c' })).toThrow(InvalidArgumentError)
    expect(() => chopper.removeServers(a, ['a', 'a'])).toThrow('server a is not in the assignment')
    expect(() => chopper.removeServers(a, ['x'])).toThrow('server x is not in the assignment')
    expect(() => chopper.removeServers(a, ['a', 'b'])).toThrow('cannot remove server b: it is the last server')
    expect(() => chopper.removeServers(a, ['a'], [1])).toThrow(/loads must have one entry per slice/)
    expect(() => chopper.addServers(a, [], undefined, { minReplicas: 0 })).toThrow(/invalid chopper option minReplicas/)
  })

  test('an empty batch gives a copy of the assignment', () => {
    const a = deepFreeze(chopper.initial(serversOf(['a', 'b'])))
    expect(chopper.addServers(a, [])).toEqual(a)
    expect(chopper.removeServers(a, [])).not.toBe(a)
  })
})

describe('every strategy has the batch forms', () => {
  test.each(Object.keys(strategies))('%s: addServers and removeServers match one call per server', (name) => {
    const s = strategies[name]
    const a = deepFreeze(s.initial(serversOf(['a', 'b', 'c', 'd', 'e'])))
    const rand = prng(3)
    const loads = a.slices.map(() => Math.floor(rand() * 100))
    const joins = [{ id: 'f', url: url('f') }, { id: 'g', url: url('g') }]
    let joined = a
    let load = loads
    for (const j of joins) {
      joined = s.addServer(joined, j.id, j.url, load)
      load = undefined // a strategy may cut new slices: later calls see no loads in this check
    }
    if (name === 'chopper' || name === 'slicer-weighted') {
      expect(s.addServers(a, joins, loads)).toEqual(joined)
    } else {
      // the loop carries the loads over by overlap; with all-zero loads it is the plain loop
      expect(s.addServers(a, joins)).toEqual(joins.reduce((x, j) => s.addServer(x, j.id, j.url), a))
    }
    expect(s.removeServers(a, ['b', 'd'])).toEqual(['b', 'd'].reduce((x, id) => s.removeServer(x, id), a))
    expect(s.removeServers(a, ['b', 'd'], loads).servers).toEqual(serversOf(['a', 'c', 'e']))
    expect(() => s.removeServers(a, ['a', 'b', 'c', 'd', 'e'])).toThrow('cannot remove server e: it is the last server')
  })
})
