'use strict'

const neostandard = require('neostandard')

module.exports = [
  ...neostandard({ ignores: ['node_modules/**', 'coverage/**', 'bench/results/**'] }),
  {
    files: ['test/**/*.js'],
    languageOptions: {
      globals: { describe: 'readonly', test: 'readonly', it: 'readonly', expect: 'readonly', beforeAll: 'readonly', afterAll: 'readonly', beforeEach: 'readonly', afterEach: 'readonly', jest: 'readonly' }
    }
  }
]
