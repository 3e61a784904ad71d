'use strict'

const { shortRun, expectClean } = require('./harness')

// A short run of fuzz/ against the controller (npm run fuzz sends 100,000 calls per mode).
describe('fuzzing the controller', () => {
  test('every malformed call gets a 4xx JSON error; it keeps its map and serves legit calls', async () => {
    const results = await shortRun('controller')
    expectClean(results, { minCallsPerMode: 500 })
  })
})
