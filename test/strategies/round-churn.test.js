'use strict'

const { chopperRound } = require('../../controller/strategies/chopper')
const { keyChurn } = require('../../core/assignment')
const { CASES, makeCase } = require('./golden-cases')

// The round's total churn comes from server indices (controller/strategies/round-churn.js);
// it must be keyChurn between the round's input and its result, to the last bit.
describe('a chopper round\'s total churn', () => {
  test.each([{}, { minReplicas: 1 }, { minReplicas: 3, balancePrimaries: false }])('is keyChurn(input, result) with %j', (variant) => {
    let replicated = 0
    for (let i = 0; i < CASES; i += 3) {
      const { assignment, loads, opts, inputs } = makeCase(i)
      const r = chopperRound(assignment, loads, { ...opts, ...variant }, inputs)
      expect(r.churn.total).toBe(keyChurn(assignment, r.assignment))
      if (r.assignment.slices.some((s) => s.servers.length > 1)) replicated++
    }
    expect(replicated).toBeGreaterThan(50) // the cases do exercise replicated slices
  })
})
