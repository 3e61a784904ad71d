'use strict'

const { chopperRound } = require('../../controller/strategies/chopper')
const { lendFrom } = require('../../controller/strategies/scratch')
const { CASES, makeCase, summarize, FIXTURES } = require('./golden-cases')

// The same 300 seeded inputs as golden.test.js, with every array of the
// round lent from the pool (./scratch.js; rounds of fewer than 65,536 slices
// otherwise allocate their own), in reverse order, so each round gets arrays
// of other lengths that the last round left full of its own figures.
describe.each(Object.keys(FIXTURES))('chopperRound on pooled arrays (%s)', (file) => {
  const golden = require(`./fixtures/${file}`)
  const variant = FIXTURES[file]
  let was
  beforeAll(() => { was = lendFrom(0) })
  afterAll(() => { lendFrom(was) })

  test('every case, last first, matches the recorded result, read after all have run', () => {
    const results = []
    for (let i = CASES - 1; i >= 0; i--) {
      const { assignment, loads, opts, inputs } = makeCase(i)
      results[i] = chopperRound(assignment, loads, variant(opts), inputs)
    }
    // read only now: a result that kept a lent array would show the later rounds' figures
    for (let i = 0; i < CASES; i++) expect([i, summarize(results[i])]).toEqual([i, golden[i]])
  })
})
