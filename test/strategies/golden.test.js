'use strict'

const { chopperRound } = require('../../controller/strategies/chopper')
const { CASES, makeCase, summarize, FIXTURES } = require('./golden-cases')

// The round was rewritten for speed (docs/algorithm.md, "Performance"); these
// 300 seeded inputs pin its results, byte for byte. chopper-golden.json holds
// the single-owner round (`replicate: false`), as the original code returned
// it; chopper-golden-replicated.json the default round with replication.
describe.each(Object.keys(FIXTURES))('chopperRound golden results (%s)', (file) => {
  const golden = require(`./fixtures/${file}`)
  const variant = FIXTURES[file]

  test('the fixture covers every case', () => {
    expect(golden).toHaveLength(CASES)
  })

  test.each(Array.from({ length: CASES }, (_, i) => i))('case %i matches the recorded result', (i) => {
    const { assignment, loads, opts, inputs } = makeCase(i)
    expect(summarize(chopperRound(assignment, loads, variant(opts), inputs))).toEqual(golden[i])
  })
})
