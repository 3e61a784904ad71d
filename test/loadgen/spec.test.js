'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { validateSpec, loadSpec, parseDuration } = require('../../loadgen')

const EXAMPLES = path.join(__dirname, '../../loadgen/examples')
const ok = { phases: [{ duration: 1, rate: 10 }] }

function problemsOf (spec) {
  try {
    validateSpec(spec)
  } catch (err) {
    expect(err.code).toBe('CHOPPER_ERR_INVALID_ARG')
    return { message: err.message, problems: err.problems }
  }
  throw new Error('spec was accepted')
}

describe('validateSpec: a malformed spec names the field and what was expected', () => {
  test.each([
    ['not an object', 'hello', 'spec: expected an object with a "phases" list, got "hello"'],
    ['no phases', {}, 'phases: expected a non-empty list of phases, got nothing'],
    ['empty phases', { phases: [] }, 'phases: expected a non-empty list of phases'],
    ['bad duration', { phases: [{ duration: '10 parsecs', rate: 1 }] }, 'phases[0].duration: expected a duration like 120, "120s", "2m" or "500ms" (> 0), got "10 parsecs"'],
    ['negative rate', { phases: [{ duration: 1, rate: -5 }] }, 'phases[0].rate: expected a request rate in req/s, > 0'],
    ['rate as string', { phases: [{ duration: 1, rate: 'fast' }] }, 'phases[0].rate: expected a request rate in req/s, > 0 and <= 1000000, got "fast"'],
    ['too few requests', { phases: [{ duration: '10ms', rate: 1 }] }, 'phases[0].rate: duration × rate gives 0 requests'],
    ['typo field', { phases: [{ duration: 1, rate: 1, distrbution: 'uniform' }] }, 'phases[0].distrbution: unknown field (expected one of: name, duration, rate, keys, distribution, hot, mix, value, path, contentType)'],
    ['unknown distribution', { phases: [{ duration: 1, rate: 1, distribution: 'pareto' }] }, 'phases[0].distribution.type: expected one of uniform, sequential, normal, poisson, exponential, binomial, zipf, weights, custom, got "pareto"'],
    ['normal without sd', { phases: [{ duration: 1, rate: 1, distribution: { type: 'normal', mean: 3 } }] }, 'phases[0].distribution.sd: expected a standard deviation in keys, > 0 (normal needs sd), got nothing'],
    ['poisson lambda 0', { phases: [{ duration: 1, rate: 1, distribution: { type: 'poisson', lambda: 0 } }] }, 'phases[0].distribution.lambda: expected a mean key index lambda > 0'],
    ['binomial p > 1', { phases: [{ duration: 1, rate: 1, distribution: { type: 'binomial', p: 1.5 } }] }, 'phases[0].distribution.p: expected a probability in [0, 1] (binomial needs p), got 1.5'],
    ['extra parameter', { phases: [{ duration: 1, rate: 1, distribution: { type: 'zipf', s: 1, alpha: 2 } }] }, 'phases[0].distribution.alpha: unknown field (expected one of: type, s)'],
    ['mass outside key set', { phases: [{ duration: 1, rate: 1, keys: { count: 10 }, distribution: { type: 'normal', mean: 5000, sd: 1 } }] }, 'phases[0].distribution: puts no probability on key indices 0..9'],
    ['weights length', { phases: [{ duration: 1, rate: 1, keys: { count: 3 }, distribution: { type: 'weights', weights: [1, 2] } }] }, 'phases[0].distribution.weights: expected one weight per key (3), got 2'],
    ['weights unknown key', { phases: [{ duration: 1, rate: 1, keys: { count: 3 }, distribution: { type: 'weights', weights: { 'key-9': 1 } } }] }, 'phases[0].distribution.weights.key-9: "key-9" is not in this phase\'s key set (key-0 … key-2, or an index 0..2)'],
    ['hot key not in set', { phases: [{ duration: 1, rate: 1, keys: { count: 10 }, hot: { keys: ['key-10'], share: 0.5 } }] }, 'phases[0].hot.keys[0]: "key-10" is not in this phase\'s key set'],
    ['hot share > 1', { phases: [{ duration: 1, rate: 1, hot: { keys: [1], share: 2 } }] }, 'phases[0].hot.share: expected the fraction of all requests going to the hot keys, in (0, 1], got 2'],
    ['mix does not sum to 1', { phases: [{ duration: 1, rate: 1, mix: { get: 0.8, set: 0.3 } }] }, 'phases[0].mix: expected get + set + delete = 1, got 1.1'],
    ['mix unknown op', { phases: [{ duration: 1, rate: 1, mix: { get: 1, post: 0 } }] }, 'phases[0].mix.post: unknown field (expected one of: get, set, delete)'],
    ['value min > max', { phases: [{ duration: 1, rate: 1, value: { min: 10, max: 5 } }] }, 'phases[0].value: expected min <= max, got min 10 > max 5'],
    ['path without {key}', { phases: [{ duration: 1, rate: 1, path: '/kv' }] }, 'phases[0].path: expected a request path starting with "/" and containing {key}'],
    ['key count 0', { phases: [{ duration: 1, rate: 1, keys: { count: 0 } }] }, 'phases[0].keys.count: expected an integer in [1, 10000000], got 0'],
    ['duplicate list key', { phases: [{ duration: 1, rate: 1, keys: ['a', 'b', 'a'] }] }, 'phases[0].keys.list[2]: duplicate key "a"'],
    ['key with a tab', { phases: [{ duration: 1, rate: 1, keys: ['a\tb'] }] }, 'phases[0].keys.list[0]: expected a non-empty string of at most 1024 characters without control characters'],
    ['key length too short for the index', { phases: [{ duration: 1, rate: 1, keys: { count: 1000, prefix: 'user:', length: { min: 3, max: 6 } } }] }, 'phases[0].keys.length.max: expected >= 8'],
    ['bad seed', { seed: -1, ...ok }, 'seed: expected an integer in [0, 2^32) or a non-empty string, got -1'],
    ['hot keys on sequential', { defaults: { hot: { keys: [0], share: 0.5 } }, phases: [{ duration: 1, rate: 1, distribution: 'sequential' }] }, 'phases[0].hot: hot keys do not apply to a sequential distribution (it visits every key in turn); set hot: null (inherited from defaults.hot)'],
    ['duplicate phase names', { phases: [{ name: 'a', duration: 1, rate: 1 }, { name: 'a', duration: 1, rate: 1 }] }, 'phases[1].name: duplicate phase name "a" (also phases[0])']
  ])('%s', (_, spec, expected) => {
    expect(problemsOf(spec).message).toContain(expected)
  })

  test('every problem is reported at once, each with its path', () => {
    const { message, problems } = problemsOf({ phases: [{ duration: 0, rate: 0, mix: { get: 2 } }, { rate: 1 }] })
    expect(problems.map((p) => p.path)).toEqual(['phases[0].duration', 'phases[0].rate', 'phases[0].mix.get', 'phases[1].duration'])
    expect(message).toMatch(/^invalid workload spec \(4 problems\):\n {2}phases\[0\]\.duration/)
  })

  test('a problem in an inherited default is reported against the phase, saying where it came from', () => {
    const { message } = problemsOf({
      defaults: { hot: { keys: ['key-50'], share: 0.5 } },
      phases: [{ duration: 1, rate: 1, keys: { count: 100 } }, { duration: 1, rate: 1, keys: { count: 10 } }]
    })
    expect(message).toBe('invalid workload spec: phases[1].hot.keys[0]: "key-50" is not in this phase\'s key set (key-0 … key-9, or an index 0..9) (inherited from defaults.hot)')
  })
})

describe('validateSpec: normalisation', () => {
  test('fills every default and is idempotent', () => {
    const s = validateSpec({ seed: 'exp-1', defaults: { mix: { get: 0.8, set: 0.2 } }, phases: [{ duration: '2m', rate: 5, distribution: 'uniform' }, { name: 'b', duration: 500, rate: 1, value: 64 }] })
    expect(s).toEqual({
      seed: 'exp-1',
      phases: [
        { name: 'phase-1', duration: 120, rate: 5, keys: { count: 100, prefix: 'key-' }, distribution: { type: 'uniform' }, hot: null, mix: { get: 0.8, set: 0.2, delete: 0 }, value: { min: 16, max: 128 }, path: '/kv?key={key}', contentType: 'application/octet-stream' },
        { name: 'b', duration: 500, rate: 1, keys: { count: 100, prefix: 'key-' }, distribution: { type: 'uniform' }, hot: null, mix: { get: 0.8, set: 0.2, delete: 0 }, value: { min: 64, max: 64 }, path: '/kv?key={key}', contentType: 'application/octet-stream' }
      ]
    })
    expect(validateSpec(s)).toEqual(s)
  })

  test('does not alias the caller\'s arrays', () => {
    const keys = ['a', 'b']
    const s = validateSpec({ phases: [{ duration: 1, rate: 1, keys }] })
    keys.push('c')
    expect(s.phases[0].keys.list).toEqual(['a', 'b'])
  })

  test('parseDuration', () => {
    expect(parseDuration(90)).toBe(90)
    expect(parseDuration('90s')).toBe(90)
    expect(parseDuration('1.5m')).toBe(90)
    expect(parseDuration('250ms')).toBe(0.25)
    expect(parseDuration('1h')).toBe(3600)
    expect(parseDuration('0s')).toBeNull()
    expect(parseDuration('-1s')).toBeNull()
    expect(parseDuration('5 minutes')).toBeNull()
  })
})

describe('loadSpec', () => {
  let dir
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loadgen-spec-')) })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

  test('reads YAML and JSON, and names the file in errors', () => {
    fs.writeFileSync(path.join(dir, 'a.yaml'), 'seed: 3\nphases:\n  - { duration: 1s, rate: 5 }\n')
    fs.writeFileSync(path.join(dir, 'a.json'), JSON.stringify({ seed: 3, phases: [{ duration: '1s', rate: 5 }] }))
    expect(loadSpec(path.join(dir, 'a.yaml'))).toEqual(loadSpec(path.join(dir, 'a.json')))

    fs.writeFileSync(path.join(dir, 'bad.yaml'), 'phases:\n  - duration: 1\n    rate: [\n')
    expect(() => loadSpec(path.join(dir, 'bad.yaml'))).toThrow(/bad\.yaml: not valid YAML/)
    fs.writeFileSync(path.join(dir, 'bad.json'), '{ "phases": ')
    expect(() => loadSpec(path.join(dir, 'bad.json'))).toThrow(/bad\.json: not valid JSON/)
    fs.writeFileSync(path.join(dir, 'invalid.yaml'), 'phases:\n  - { duration: 1s, rate: 0 }\n')
    expect(() => loadSpec(path.join(dir, 'invalid.yaml'))).toThrow(/invalid\.yaml: invalid workload spec: phases\[0\]\.rate/)
    expect(() => loadSpec(path.join(dir, 'missing.yaml'))).toThrow(/missing\.yaml: cannot read it \(ENOENT\)/)
  })

  test('every example in loadgen/examples is valid', () => {
    const files = fs.readdirSync(EXAMPLES)
    expect(files.length).toBeGreaterThanOrEqual(8)
    for (const f of files) expect(() => loadSpec(path.join(EXAMPLES, f))).not.toThrow()
  })
})
