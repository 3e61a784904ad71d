'use strict'

/**
 * Chopper's workload generator and load driver (issue 4, paper section 6.2).
 * This file only re-exports; see README.md for the spec format and the result file.
 */
const { validateSpec, loadSpec, parseDuration, PHASE_DEFAULTS, LIMITS } = require('./spec')
const { generate, METHODS } = require('./workload')
const { run, DEFAULT_OPTIONS } = require('./driver')
const { payloadLines, writePayload, parsePayload } = require('./payload')
const { formatSummary, formatPlan } = require('./summary')
const { DISTRIBUTION_TYPES } = require('./distributions')
const { createRng, deriveSeed } = require('./prng')

module.exports = {
  validateSpec,
  loadSpec,
  generate,
  run,
  formatSummary,
  formatPlan,
  payloadLines,
  writePayload,
  parsePayload,
  parseDuration,
  createRng,
  deriveSeed,
  DEFAULT_OPTIONS,
  PHASE_DEFAULTS,
  LIMITS,
  DISTRIBUTION_TYPES,
  METHODS
}
