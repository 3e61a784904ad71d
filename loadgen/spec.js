'use strict'

const fs = require('node:fs')
const path = require('node:path')
const YAML = require('yaml')
const { InvalidArgumentError } = require('../core/errors')
const { DISTRIBUTION_TYPES, baseWeights, totalMass } = require('./distributions')
const { createKeySet, longestBaseName } = require('./key-set')

/**
 * Every default of a workload spec, in one visible place. A phase takes each
 * field from itself, else from the spec's `defaults` block, else from here.
 */
const PHASE_DEFAULTS = Object.freeze({
  keys: Object.freeze({ count: 100, prefix: 'key-' }),
  distribution: Object.freeze({ type: 'uniform' }),
  hot: null,
  mix: Object.freeze({ get: 1, set: 0, delete: 0 }),
  value: Object.freeze({ min: 16, max: 128 }),
  path: '/kv?key={key}',
  contentType: 'application/octet-stream'
})
const SPEC_DEFAULTS = Object.freeze({ seed: 1 })

/** Hard bounds that keep a typo from asking for a 100 GB payload. */
const LIMITS = Object.freeze({
  maxKeys: 10_000_000,
  maxKeyLength: 1024,
  maxValueBytes: 16 * 1024 * 1024,
  maxRate: 1_000_000,
  maxRequestsPerPhase: 100_000_000
})

const SPEC_FIELDS = ['seed', 'name', 'description', 'defaults', 'phases']
const PHASE_FIELDS = ['name', 'duration', 'rate', 'keys', 'distribution', 'hot', 'mix', 'value', 'path', 'contentType']
const DEFAULTABLE_FIELDS = PHASE_FIELDS.filter((f) => f !== 'name' && f !== 'duration')
const DIST_PARAMS = {
  uniform: { required: [], optional: [] },
  sequential: { required: [], optional: [] },
  normal: { required: ['sd'], optional: ['mean'] },
  poisson: { required: ['lambda'], optional: [] },
  exponential: { required: ['rate'], optional: [] },
  binomial: { required: ['p'], optional: ['n'] },
  zipf: { required: ['s'], optional: [] },
  weights: { required: ['weights'], optional: ['others'] },
  custom: { required: ['pmf'], optional: [] }
}
const MIX_OPS = ['get', 'set', 'delete']
// Control characters would break the tab- and newline-separated payload file and HTTP request lines.
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/ // eslint-disable-line no-control-regex
const DURATION_RE = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h)$/
const UNIT_SECONDS = { ms: 0.001, s: 1, m: 60, h: 3600 }

/**
 * Validate a workload spec and return it normalised: defaults merged into
 * every phase, durations in seconds, shorthands expanded. Normalised specs are
 * valid input, so validateSpec(validateSpec(x)) deep-equals validateSpec(x).
 *
 * Every problem is collected, so one run reports every mistake in the file.
 * The thrown InvalidArgumentError lists each as `field.path: expected ..., got ...`
 * and carries them as `err.problems` ({ path, message }).
 * @param {object} input parsed JSON/YAML
 * @returns {object} normalised spec
 */
function validateSpec (input) {
  const problems = []
  // Both return undefined, so `return fail(...)` doubles as "no value" in the normalisers below.
  const fail = (at, expected, got) => { problems.push({ path: at, message: `expected ${expected}, got ${describe(got)}` }) }
  const failRaw = (at, message) => { problems.push({ path: at, message }) }

  if (!isPlainObject(input)) {
    fail('spec', 'an object with a "phases" list', input)
    throw specError(problems)
  }
  unknownFields(input, SPEC_FIELDS, 'spec', failRaw)

  const seed = input.seed ?? SPEC_DEFAULTS.seed
  if (!(Number.isInteger(seed) && seed >= 0 && seed < 2 ** 32) && !(typeof seed === 'string' && seed.length > 0)) {
    fail('seed', 'an integer in [0, 2^32) or a non-empty string', seed)
  }
  for (const f of ['name', 'description']) {
    if (input[f] !== undefined && typeof input[f] !== 'string') fail(f, 'a string', input[f])
  }

  let defaults = {}
  if (input.defaults !== undefined) {
    if (!isPlainObject(input.defaults)) fail('defaults', 'an object of phase fields', input.defaults)
    else {
      defaults = input.defaults
      unknownFields(defaults, DEFAULTABLE_FIELDS, 'defaults', failRaw)
    }
  }

  const phases = []
  if (!Array.isArray(input.phases) || input.phases.length === 0) {
    fail('phases', 'a non-empty list of phases', input.phases)
  } else {
    const names = new Map()
    input.phases.forEach((raw, i) => {
      const at = `phases[${i}]`
      if (!isPlainObject(raw)) return fail(at, 'an object with duration and rate', raw)
      unknownFields(raw, PHASE_FIELDS, at, failRaw)
      const phase = normalisePhase(raw, defaults, i, at, seed, fail, failRaw)
      if (names.has(phase.name)) failRaw(`${at}.name`, `duplicate phase name ${JSON.stringify(phase.name)} (also phases[${names.get(phase.name)}])`)
      names.set(phase.name, i)
      phases.push(phase)
    })
  }

  if (problems.length) throw specError(problems)
  const out = { seed }
  if (input.name !== undefined) out.name = input.name
  if (input.description !== undefined) out.description = input.description
  out.phases = phases
  return out
}

function normalisePhase (raw, defaults, i, at, seed, fail, failRaw) {
  // Problems in an inherited field are reported against the phase, saying where the value came from.
  const pick = (field) => {
    const where = { at: `${at}.${field}`, fail, failRaw }
    if (raw[field] !== undefined) return { value: raw[field], ...where }
    const from = defaults[field] !== undefined ? `defaults.${field}` : 'the built-in default'
    const note = (m) => `${m} (inherited from ${from})`
    return {
      value: defaults[field] !== undefined ? defaults[field] : PHASE_DEFAULTS[field],
      at: where.at,
      fail: (path, expected, got) => failRaw(path, note(`expected ${expected}, got ${describe(got)}`)),
      failRaw: (path, message) => failRaw(path, note(message))
    }
  }
  const phase = {}

  phase.name = raw.name ?? `phase-${i + 1}`
  if (typeof phase.name !== 'string' || phase.name.length === 0 || CONTROL_CHARS.test(phase.name)) {
    fail(`${at}.name`, 'a non-empty string', raw.name)
  }

  phase.duration = parseDuration(raw.duration)
  if (phase.duration === null) fail(`${at}.duration`, 'a duration like 120, "120s", "2m" or "500ms" (> 0)', raw.duration)

  phase.rate = raw.rate
  if (!(typeof raw.rate === 'number' && Number.isFinite(raw.rate) && raw.rate > 0 && raw.rate <= LIMITS.maxRate)) {
    fail(`${at}.rate`, `a request rate in req/s, > 0 and <= ${LIMITS.maxRate}`, raw.rate)
  } else if (phase.duration !== null) {
    const n = Math.round(phase.duration * phase.rate)
    if (n < 1) failRaw(`${at}.rate`, `duration × rate gives ${n} requests; a phase needs at least 1`)
    if (n > LIMITS.maxRequestsPerPhase) failRaw(`${at}.rate`, `duration × rate gives ${n} requests; at most ${LIMITS.maxRequestsPerPhase} per phase`)
  }

  const keys = pick('keys')
  phase.keys = normaliseKeys(keys.value, keys.at, keys.fail, keys.failRaw)
  const keySet = phase.keys ? createKeySet(phase.keys, seed) : null

  const dist = pick('distribution')
  phase.distribution = normaliseDistribution(dist.value, dist.at, keySet, dist.fail, dist.failRaw)

  const hot = pick('hot')
  phase.hot = normaliseHot(hot.value, hot.at, keySet, hot.fail, hot.failRaw)

  if (phase.distribution && phase.distribution.type === 'sequential' && phase.hot) {
    hot.failRaw(hot.at, 'hot keys do not apply to a sequential distribution (it visits every key in turn); set hot: null')
  }

  const mix = pick('mix')
  phase.mix = normaliseMix(mix.value, mix.at, mix.fail, mix.failRaw)

  const value = pick('value')
  phase.value = normaliseValue(value.value, value.at, value.fail, value.failRaw)

  const p = pick('path')
  phase.path = p.value
  if (typeof p.value !== 'string' || !p.value.startsWith('/') || !p.value.includes('{key}') || /\s/.test(p.value) || CONTROL_CHARS.test(p.value)) {
    p.fail(p.at, 'a request path starting with "/" and containing {key}, without spaces (e.g. "/kv?key={key}")', p.value)
  }

  const ct = pick('contentType')
  phase.contentType = ct.value
  if (typeof ct.value !== 'string' || ct.value.length === 0 || CONTROL_CHARS.test(ct.value)) ct.fail(ct.at, 'a MIME type string', ct.value)

  return phase
}

function normaliseKeys (v, at, fail, failRaw) {
  if (Array.isArray(v)) v = { list: v }
  if (!isPlainObject(v)) return fail(at, '{ count, prefix } or { list: [...] } or a list of keys', v)
  if (v.list !== undefined) {
    unknownFields(v, ['list'], at, failRaw)
    if (!Array.isArray(v.list) || v.list.length === 0) return fail(`${at}.list`, 'a non-empty list of key strings', v.list)
    if (v.list.length > LIMITS.maxKeys) return fail(`${at}.list`, `at most ${LIMITS.maxKeys} keys`, `${v.list.length} keys`)
    const seen = new Set()
    let ok = true
    v.list.forEach((k, i) => {
      if (!validKey(k)) { ok = false; return fail(`${at}.list[${i}]`, `a non-empty string of at most ${LIMITS.maxKeyLength} characters without control characters`, k) }
      if (seen.has(k)) { ok = false; return failRaw(`${at}.list[${i}]`, `duplicate key ${JSON.stringify(k)}`) }
      seen.add(k)
    })
    return ok ? { list: [...v.list] } : null
  }
  unknownFields(v, ['count', 'prefix', 'length'], at, failRaw)
  const count = v.count ?? PHASE_DEFAULTS.keys.count
  const prefix = v.prefix ?? PHASE_DEFAULTS.keys.prefix
  let ok = true
  if (!(Number.isInteger(count) && count >= 1 && count <= LIMITS.maxKeys)) { ok = false; fail(`${at}.count`, `an integer in [1, ${LIMITS.maxKeys}]`, v.count) }
  if (typeof prefix !== 'string' || prefix.length > LIMITS.maxKeyLength / 2 || CONTROL_CHARS.test(prefix)) { ok = false; fail(`${at}.prefix`, 'a string without control characters', v.prefix) }
  if (!ok) return null
  const out = { count, prefix }
  if (v.length !== undefined) {
    const b = bounds(v.length, `${at}.length`, 1, LIMITS.maxKeyLength, fail, failRaw)
    if (!b) return null
    const need = longestBaseName(prefix, count)
    if (b.max < need) return failRaw(`${at}.length.max`, `expected >= ${need} (prefix ${JSON.stringify(prefix)} plus the index of key ${count - 1}), got ${b.max}`)
    out.length = b
  }
  return out
}

function normaliseDistribution (v, at, keySet, fail, failRaw) {
  if (typeof v === 'string') v = { type: v }
  // The paper says "Gaussian"; accept it as another name for normal.
  if (isPlainObject(v) && v.type === 'gaussian') v = { ...v, type: 'normal' }
  if (!isPlainObject(v)) return fail(at, `a distribution name or { type, ...parameters } with type one of ${DISTRIBUTION_TYPES.join(', ')}`, v)
  if (!DISTRIBUTION_TYPES.includes(v.type)) return fail(`${at}.type`, `one of ${DISTRIBUTION_TYPES.join(', ')}`, v.type)
  const { required, optional } = DIST_PARAMS[v.type]
  unknownFields(v, ['type', ...required, ...optional], at, failRaw)
  const d = { type: v.type }
  let ok = true
  const need = (name, test, expected) => {
    if (v[name] === undefined && !required.includes(name)) return
    if (!test(v[name])) { ok = false; fail(`${at}.${name}`, `${expected} (${v.type} needs ${name})`, v[name]) } else d[name] = v[name]
  }
  const positive = (x) => typeof x === 'number' && Number.isFinite(x) && x > 0
  const finite = (x) => typeof x === 'number' && Number.isFinite(x)
  switch (v.type) {
    case 'normal':
      need('mean', finite, 'a key index (number)')
      need('sd', positive, 'a standard deviation in keys, > 0')
      break
    case 'poisson': need('lambda', positive, 'a mean key index lambda > 0'); break
    case 'exponential': need('rate', positive, 'a rate > 0 (mean key index ≈ 1/rate)'); break
    case 'binomial':
      need('n', (x) => Number.isInteger(x) && x >= 0, 'an integer number of trials >= 0')
      need('p', (x) => finite(x) && x >= 0 && x <= 1, 'a probability in [0, 1]')
      break
    case 'zipf': need('s', (x) => finite(x) && x >= 0, 'an exponent s >= 0'); break
    case 'custom': need('pmf', (x) => typeof x === 'function', 'a function (index, count) => weight (library use only)'); break
    case 'weights': ok = weightsParam(v, at, keySet, d, fail, failRaw); break
  }
  if (!ok || !keySet) return ok ? d : null
  // Reject a distribution that puts (numerically) no mass on the key set, instead of looping or dividing by 0.
  let w
  try {
    w = baseWeights(d, keySet.count, keySet.indexOf)
  } catch (err) {
    return failRaw(at, `could not evaluate the distribution: ${err.message}`)
  }
  for (let k = 0; k < w.length; k++) {
    if (!(Number.isFinite(w[k]) && w[k] >= 0)) return failRaw(at, `weight of key index ${k} is ${w[k]}; weights must be finite and >= 0`)
  }
  if (!(totalMass(w) > 0)) return failRaw(at, `puts no probability on key indices 0..${keySet.count - 1}; move its mean/parameters inside the key set`)
  return d
}

function weightsParam (v, at, keySet, d, fail, failRaw) {
  const weightOk = (x) => typeof x === 'number' && Number.isFinite(x) && x >= 0
  if (Array.isArray(v.weights)) {
    if (keySet && v.weights.length !== keySet.count) return failRaw(`${at}.weights`, `expected one weight per key (${keySet.count}), got ${v.weights.length}`)
    if (v.others !== undefined) return failRaw(`${at}.others`, 'only applies when weights is a map of key -> weight')
    const bad = v.weights.findIndex((x) => !weightOk(x))
    if (bad >= 0) return fail(`${at}.weights[${bad}]`, 'a weight >= 0', v.weights[bad])
    d.weights = [...v.weights]
    return true
  }
  if (!isPlainObject(v.weights) || Object.keys(v.weights).length === 0) return fail(`${at}.weights`, 'a list of per-key weights or a map { key: weight }', v.weights)
  let ok = true
  for (const [key, weight] of Object.entries(v.weights)) {
    if (!weightOk(weight)) { ok = false; fail(`${at}.weights.${key}`, 'a weight >= 0', weight) }
    if (keySet && keySet.indexOf(key) < 0) { ok = false; failRaw(`${at}.weights.${key}`, `${JSON.stringify(key)} is not in this phase's key set (${keyRange(keySet)})`) }
  }
  if (v.others !== undefined && !weightOk(v.others)) { ok = false; fail(`${at}.others`, 'a weight >= 0 for keys not listed', v.others) }
  if (!ok) return false
  d.weights = { ...v.weights }
  if (v.others !== undefined) d.others = v.others
  return true
}

function normaliseHot (v, at, keySet, fail, failRaw) {
  if (v === null || v === undefined) return null
  if (!isPlainObject(v)) return fail(at, '{ keys: [...], share: 0..1 } or null', v)
  unknownFields(v, ['keys', 'share', 'weights'], at, failRaw)
  let ok = true
  if (!Array.isArray(v.keys) || v.keys.length === 0) return fail(`${at}.keys`, 'a non-empty list of key names or key indices', v.keys)
  const seen = new Set()
  v.keys.forEach((k, i) => {
    let index = -1
    if (Number.isInteger(k)) index = keySet && k >= 0 && k < keySet.count ? k : -1
    else if (typeof k === 'string') index = keySet ? keySet.indexOf(k) : 0
    else { ok = false; return fail(`${at}.keys[${i}]`, 'a key name or key index', k) }
    if (keySet && index < 0) { ok = false; return failRaw(`${at}.keys[${i}]`, `${JSON.stringify(k)} is not in this phase's key set (${keyRange(keySet)})`) }
    if (seen.has(index)) { ok = false; return failRaw(`${at}.keys[${i}]`, `duplicate hot key ${JSON.stringify(k)}`) }
    seen.add(index)
  })
  if (!(typeof v.share === 'number' && v.share > 0 && v.share <= 1)) { ok = false; fail(`${at}.share`, 'the fraction of all requests going to the hot keys, in (0, 1]', v.share) }
  if (v.weights !== undefined) {
    if (!Array.isArray(v.weights) || v.weights.length !== v.keys.length || !v.weights.every((x) => typeof x === 'number' && Number.isFinite(x) && x > 0)) {
      ok = false
      fail(`${at}.weights`, `one weight > 0 per hot key (${v.keys.length})`, v.weights)
    }
  }
  if (!ok) return null
  const out = { keys: [...v.keys], share: v.share }
  if (v.weights) out.weights = [...v.weights]
  return out
}

function normaliseMix (v, at, fail, failRaw) {
  if (!isPlainObject(v)) return fail(at, '{ get, set, delete } fractions summing to 1', v)
  unknownFields(v, MIX_OPS, at, failRaw)
  const out = {}
  let ok = true
  for (const op of MIX_OPS) {
    const x = v[op] ?? 0
    if (!(typeof x === 'number' && x >= 0 && x <= 1)) { ok = false; fail(`${at}.${op}`, 'a fraction in [0, 1]', v[op]) }
    out[op] = x
  }
  if (!ok) return null
  const sum = out.get + out.set + out.delete
  if (Math.abs(sum - 1) > 1e-6) return failRaw(at, `expected get + set + delete = 1, got ${+sum.toFixed(6)}`)
  return out
}

function normaliseValue (v, at, fail, failRaw) {
  if (Number.isInteger(v)) v = { min: v, max: v }
  return bounds(v, at, 0, LIMITS.maxValueBytes, fail, failRaw)
}

function bounds (v, at, lo, hi, fail, failRaw) {
  if (!isPlainObject(v)) return fail(at, `{ min, max } integers in [${lo}, ${hi}]`, v)
  unknownFields(v, ['min', 'max'], at, failRaw)
  let ok = true
  for (const f of ['min', 'max']) {
    if (!(Number.isInteger(v[f]) && v[f] >= lo && v[f] <= hi)) { ok = false; fail(`${at}.${f}`, `an integer in [${lo}, ${hi}]`, v[f]) }
  }
  if (ok && v.min > v.max) { ok = false; failRaw(at, `expected min <= max, got min ${v.min} > max ${v.max}`) }
  return ok ? { min: v.min, max: v.max } : null
}

/**
 * Parse a duration: a number of seconds, or a string with unit ms, s, m or h.
 * @returns {number|null} seconds, or null when invalid
 */
function parseDuration (v) {
  if (typeof v === 'number') return Number.isFinite(v) && v > 0 ? v : null
  if (typeof v !== 'string') return null
  const m = DURATION_RE.exec(v.trim())
  if (!m) return null
  const s = Number(m[1]) * UNIT_SECONDS[m[2]]
  return s > 0 ? s : null
}

/**
 * Read and validate a JSON or YAML spec file (YAML is a superset of JSON, so
 * any other extension is parsed as YAML).
 * @param {string} file
 * @returns {object} normalised spec
 */
function loadSpec (file) {
  let text
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch (err) {
    throw new InvalidArgumentError(`spec file ${file}: cannot read it (${err.code || err.message})`, { cause: err })
  }
  let parsed
  try {
    parsed = path.extname(file).toLowerCase() === '.json' ? JSON.parse(text) : YAML.parse(text, { prettyErrors: true })
  } catch (err) {
    throw new InvalidArgumentError(`spec file ${file}: not valid ${path.extname(file).toLowerCase() === '.json' ? 'JSON' : 'YAML'}: ${err.message}`, { cause: err })
  }
  try {
    return validateSpec(parsed)
  } catch (err) {
    if (err instanceof InvalidArgumentError) err.message = `spec file ${file}: ${err.message}`
    throw err
  }
}

function specError (problems) {
  const lines = problems.map((p) => `${p.path}: ${p.message}`)
  const message = lines.length === 1
    ? `invalid workload spec: ${lines[0]}`
    : `invalid workload spec (${lines.length} problems):\n  ${lines.join('\n  ')}`
  const err = new InvalidArgumentError(message)
  err.problems = problems
  return err
}

function unknownFields (obj, allowed, at, failRaw) {
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) failRaw(`${at}.${k}`, `unknown field (expected one of: ${allowed.join(', ')})`)
  }
}

function validKey (k) {
  return typeof k === 'string' && k.length > 0 && k.length <= LIMITS.maxKeyLength && !CONTROL_CHARS.test(k)
}

function keyRange (keySet) {
  return keySet.count === 1 ? keySet.name(0) : `${keySet.name(0)} … ${keySet.name(keySet.count - 1)}, or an index 0..${keySet.count - 1}`
}

function isPlainObject (v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

function describe (v) {
  if (v === undefined) return 'nothing'
  if (v === null) return 'null'
  if (Array.isArray(v)) return `a list of ${v.length}`
  if (typeof v === 'function') return 'a function'
  if (typeof v === 'object') return 'an object'
  const s = JSON.stringify(v)
  return s.length > 60 ? s.slice(0, 57) + '...' : s
}

module.exports = { PHASE_DEFAULTS, SPEC_DEFAULTS, LIMITS, validateSpec, loadSpec, parseDuration }
