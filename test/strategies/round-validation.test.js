'use strict'

const { chopperRound } = require('../../controller/strategies/chopper')
const { validateAssignment } = require('../../core/assignment')
const { KEYSPACE_SIZE } = require('../../core/keyspace')

// The round checks the slices in the pass that reads them (chopper.js
// readInput), not by validateAssignment: it must refuse what
// validateAssignment refuses, with validateAssignment's message.
const Q = KEYSPACE_SIZE / 4
const servers = { a: { url: 'http://127.0.0.1:1' }, b: { url: 'http://127.0.0.1:2' }, c: { url: 'http://127.0.0.1:3' } }
const good = () => ({
  generation: 3,
  servers,
  slices: [
    { start: 0, end: Q, servers: ['a', 'b'] },
    { start: Q, end: 2 * Q, servers: ['b'] },
    { start: 2 * Q, end: 3 * Q, servers: ['c', 'a', 'b'] },
    { start: 3 * Q, end: KEYSPACE_SIZE, servers: ['c', 'a'] }
  ]
})
const loads = [1, 2, 3, 4]
const faults = {
  'a null slice': (a) => { a.slices[1] = null },
  'a gap': (a) => { a.slices[1].start = Q + 1 },
  'an overlap': (a) => { a.slices[2].start = 2 * Q - 1 },
  'an end at its start': (a) => { a.slices[1].end = Q },
  'an end past the keyspace': (a) => { a.slices[3].end = KEYSPACE_SIZE + 1 },
  'an end short of the keyspace': (a) => { a.slices[3].end = KEYSPACE_SIZE - 1 },
  'a fractional end': (a) => { a.slices[0].end = Q + 0.5 },
  'an end as a string': (a) => { a.slices[0].end = String(Q) },
  'no servers': (a) => { a.slices[1].servers = [] },
  'servers not an array': (a) => { a.slices[1].servers = 'b' },
  'an unknown first server': (a) => { a.slices[1].servers = ['z'] },
  'an unknown second server': (a) => { a.slices[0].servers = ['a', 'z'] },
  'an unknown third server': (a) => { a.slices[2].servers = ['c', 'a', 'z'] },
  'a server id that is not a string': (a) => { a.slices[0].servers = ['a', 7] },
  'a server listed twice': (a) => { a.slices[2].servers = ['c', 'a', 'c'] },
  'a server twice in a pair': (a) => { a.slices[0].servers = ['a', 'a'] },
  'moving not a boolean': (a) => { a.slices[0].moving = 'yes' },
  'holders on a slice not moving': (a) => { a.slices[0].holders = ['a'] },
  'a holder not among its servers': (a) => { a.slices[0].moving = true; a.slices[0].holders = ['c'] },
  'a server without a URL': (a) => { a.servers = { ...servers, d: {} } }
}

describe('chopperRound refuses what validateAssignment refuses, with its message', () => {
  test.each(Object.keys(faults))('%s', (name) => {
    const a = good()
    faults[name](a)
    let expected
    try {
      validateAssignment(a)
    } catch (err) {
      expected = err
    }
    expect(expected).toBeDefined()
    expect(() => chopperRound(a, loads)).toThrow(expected.message)
    expect(() => chopperRound(a, loads, { replicate: false })).toThrow(expected.message)
  })

  test('an invalid assignment is named before bad loads, as before', () => {
    const a = good()
    a.slices[1].start = Q + 1
    expect(() => chopperRound(a, [1, 2])).toThrow(/gap/)
  })

  test('a valid assignment with moving slices and holders is read as one', () => {
    const a = good()
    a.slices[0].moving = true
    a.slices[0].holders = ['a']
    a.slices[3].moving = false
    const r = chopperRound(a, loads)
    expect(r.assignment.slices.map((s) => s.end)).toContain(KEYSPACE_SIZE)
  })
})
