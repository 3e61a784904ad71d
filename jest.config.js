'use strict'

module.exports = {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/test/**/*.test.js'],
  testTimeout: 60000,
  // Integration suites spawn servers; two workers match the 2-core machines we run on.
  maxWorkers: 2
}
