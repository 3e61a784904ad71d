'use strict'

const fs = require('node:fs')
const path = require('node:path')
const { ERROR_TABLE } = require('../core/errors')

// As fastify's test/internals/errors.test.js: every code in the table is documented.
const doc = fs.readFileSync(path.join(__dirname, '..', 'docs', 'errors.md'), 'utf8')
const rows = new Map(
  doc.split('\n')
    .map((line) => line.match(/^\| `(CHOPPER_ERR_[A-Z_]+)` \| `(\w+)` \| (\d{3}) \|/))
    .filter(Boolean)
    .map(([, code, name, status]) => [code, { name, status: Number(status) }])
)

test.each(Object.entries(ERROR_TABLE))('%s is documented in docs/errors.md with its code and status', (name, [code, status]) => {
  expect(rows.get(code)).toEqual({ name, status })
})

test('docs/errors.md documents no code the table lacks', () => {
  const codes = new Set(Object.values(ERROR_TABLE).map(([code]) => code))
  expect([...rows.keys()].filter((c) => !codes.has(c))).toEqual([])
})
