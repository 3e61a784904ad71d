'use strict'

const fs = require('node:fs')
const path = require('node:path')
const YAML = require('yaml')
const { InvalidArgumentError } = require('../core/errors')
const { validateScenario } = require('../bench/experiments/scenario')
const { validateSpec } = require('../loadgen/spec')

/**
 * Read a simulator input: either an experiment scenario `{ experiment, workload }`
 * (bench/experiments/scenarios, validated by the experiments' own code) or a
 * bare loadgen spec. Returns the workload spec and, for scenarios, the
 * experiment settings the simulator takes defaults from.
 * @param {string} file .json, .yaml or .yml
 * @returns {{ name: string, workload: object, experiment: object|null }}
 */
function readSimInput (file) {
  let text
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch (err) {
    throw new InvalidArgumentError(`scenario file ${file}: cannot read it (${err.code || err.message})`, { cause: err })
  }
  let parsed
  try {
    parsed = path.extname(file).toLowerCase() === '.json' ? JSON.parse(text) : YAML.parse(text)
  } catch (err) {
    throw new InvalidArgumentError(`scenario file ${file}: not valid JSON/YAML: ${err.message}`, { cause: err })
  }
  const name = path.basename(file).replace(/\.(json|ya?ml)$/i, '')
  try {
    if (parsed && typeof parsed === 'object' && parsed.workload !== undefined) {
      const s = validateScenario(parsed, name)
      return { name, workload: s.workload, experiment: s.experiment }
    }
    return { name, workload: validateSpec(parsed), experiment: null }
  } catch (err) {
    if (err instanceof InvalidArgumentError) err.message = `scenario file ${file}: ${err.message}`
    throw err
  }
}

module.exports = { readSimInput }
