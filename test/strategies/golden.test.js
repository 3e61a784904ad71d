'use strict'

const { chopperRound } = require('../../controller/strategies/chopper')
const { CASES, makeCase, summarize } = require('./golden-cases')
const golden = require('./fixtures/chopper-golden.json')

// The round was rewritten for speed (docs/algorithm.md, "Performance"); these
// 300 seeded inputs pin its results, byte for byte, to the original code's.
describe('chopperRound golden results', () => {
  test('the fixture covers every case', () => {
    expect(golden).toHaveLength(CASES)
  })

  test.each(Array.from({ length: CASES }, (_, i) => i))('case %i matches the recorded result', (i) => {
    const { assignment, loads, opts, inputs } = makeCase(i)
    expect(summarize(chopperRound(assignment, loads, opts, inputs))).toEqual(golden[i])
  })
})
