'use strict'

const { shortRun, expectClean } = require('./harness')

// A short run of fuzz/ against the appserver (npm run fuzz sends 100,000 calls per mode).
describe('fuzzing the appserver', () => {
  test('every malformed call gets a 4xx JSON error; it keeps its map and serves legit calls', async () => {
    const results = await shortRun('appserver')
    expectClean(results, { minCallsPerMode: 500 })
  })
})
