'use strict'

const { parseArgs } = require('node:util')
const { InvalidArgumentError } = require('../../core/errors')

/**
 * Parse a bench's flags. `spec` maps each flag to `{ type: 'int'|'number'|'string'|'boolean', default, min }`.
 * Numbers are validated here, so a wrong flag is named with what was expected.
 * @returns {Record<string, any>} values by flag name
 * @throws {InvalidArgumentError} on an unknown flag or a bad value
 */
function parseFlags (argv, spec) {
  const options = {}
  for (const [name, s] of Object.entries(spec)) options[name] = { type: s.type === 'boolean' ? 'boolean' : 'string' }
  let values
  try {
    ({ values } = parseArgs({ args: argv, options, strict: true, allowPositionals: false }))
  } catch (err) {
    throw new InvalidArgumentError(err.message)
  }
  const out = {}
  for (const [name, s] of Object.entries(spec)) {
    const raw = values[name]
    if (raw === undefined) { out[name] = s.default; continue }
    if (s.type === 'boolean' || s.type === 'string') { out[name] = raw; continue }
    const n = Number(raw)
    const ok = raw.trim() !== '' && Number.isFinite(n) && (s.type !== 'int' || Number.isInteger(n)) && n >= (s.min ?? -Infinity)
    if (!ok) throw new InvalidArgumentError(`invalid --${name}: expected ${s.type === 'int' ? 'an integer' : 'a number'}${s.min !== undefined ? ` >= ${s.min}` : ''}, got ${JSON.stringify(raw)}`)
    out[name] = n
  }
  return out
}

module.exports = { parseFlags }
