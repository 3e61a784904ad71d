'use strict'

const { chopperRound } = require('../../controller/strategies/chopper')
const { makeCase } = require('./golden-cases')
const { deepFreeze } = require('./helpers')

// A round's result keeps the input's object for every slice it left as it
// was (controller/strategies/columns.js toResultSlices): the input must stay
// untouched, and a slice that changed, or was moving, must not be the input's.
describe('chopperRound shares the slices it leaves as they were', () => {
  const key = (s) => `${s.start}:${s.end}:${s.servers.join(',')}`

  test.each([3, 7, 12, 41, 55, 60])('case %i: unchanged slices are the input\'s objects, the rest are new', (i) => {
    const { assignment, loads, inputs } = makeCase(i)
    const before = JSON.stringify(assignment)
    deepFreeze(assignment) // a write to a shared slice would throw
    const r = chopperRound(assignment, loads, {}, inputs)
    expect(JSON.stringify(assignment)).toBe(before)
    const inputs_ = new Map(assignment.slices.map((s) => [key(s), s]))
    const inputObjects = new Set(assignment.slices)
    let shared = 0
    for (const s of r.assignment.slices) {
      const same = inputs_.get(key(s))
      if (same && same.moving === undefined) {
        expect(s).toBe(same)
        shared++
      } else {
        expect(inputObjects.has(s)).toBe(false)
        expect(Object.keys(s)).toEqual(['start', 'end', 'servers'])
      }
    }
    expect(shared).toBeGreaterThan(0)
  })

  test('a moving slice the round leaves in place comes back as a plain slice', () => {
    const { assignment, loads, inputs } = makeCase(7) // 6 of its 80 slices are moving
    const moving = new Set(assignment.slices.filter((s) => s.moving))
    expect(moving.size).toBe(6)
    const r = chopperRound(assignment, loads, {}, inputs)
    for (const s of r.assignment.slices) {
      expect(moving.has(s)).toBe(false)
      expect(s.moving).toBeUndefined()
    }
  })
})
