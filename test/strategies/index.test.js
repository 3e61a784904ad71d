'use strict'

const { strategies, getStrategy } = require('../../controller/strategies')
const { InvalidArgumentError } = require('../../core/errors')

describe('strategy registry', () => {
  test('lists every strategy, each with the full interface', () => {
    expect(Object.keys(strategies).sort()).toEqual(['bounded-consistent-hash', 'chopper', 'consistent-hash', 'neighbour-offload', 'slicer-weighted'])
    for (const [name, s] of Object.entries(strategies)) {
      expect(s.name).toBe(name)
      expect(Object.isFrozen(s.defaults)).toBe(true)
      for (const fn of ['initial', 'rebalance', 'addServer', 'removeServer', 'addServers', 'removeServers']) expect(typeof s[fn]).toBe('function')
    }
    expect(getStrategy('chopper')).toBe(strategies.chopper)
  })

  test('getStrategy rejects unknown names, listing the valid ones', () => {
    expect(() => getStrategy('slicer')).toThrow(InvalidArgumentError)
    expect(() => getStrategy('slicer')).toThrow(/unknown strategy "slicer" \(valid strategies: chopper, consistent-hash, bounded-consistent-hash, neighbour-offload, slicer-weighted\)/)
    expect(() => getStrategy('toString')).toThrow(InvalidArgumentError)
  })
})
