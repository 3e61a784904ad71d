#!/usr/bin/env node
'use strict'

/**
 * Cluster simulator CLI (virtual time, real strategy code).
 *
 *   node sim/bin/sim.js <scenario.json|yaml> [--strategy NAME] [--servers N]
 *     [--slices-per-server K] [--period MS] [--duration S] [--seed N] [--out DIR]
 *     [--mode requests|fluid] [--arrivals poisson|constant] [--rate-scale X|auto]
 *     [--service deterministic|exponential|pareto] [--service-mean MS]
 *     [--capacity N] [--miss-cost X] [--strategy-options JSON]
 *   node sim/bin/sim.js --report [--sizes 100,1000,10000] [--out DIR]
 *
 * The input is an experiment scenario (bench/experiments/scenarios) or a bare
 * loadgen spec. For a scenario, --servers, --period and chopper's strategy
 * options default to the experiment's, and --rate-scale auto multiplies the
 * rates by servers / experiment.servers so each server sees the utilisation
 * the scenario was written for. Without --out the result JSON goes to stdout.
 */

const fs = require('node:fs')
const path = require('node:path')
const { parseArgs } = require('node:util')
const { InvalidArgumentError } = require('../../core/errors')
const { simulate, SIM_DEFAULTS } = require('../cluster')
const { readSimInput } = require('../scenario')
const { createProgress } = require('../progress')
const { renderRunReport, renderScaleReport, compactRun } = require('../report')
const { runScaleSet, SCALE_DEFAULTS, SCALE_RUNS } = require('../scale')

const RESULTS_DIR = path.join(__dirname, '..', 'results')
/** Service time per request for scenarios: bench/lib/capacity.js models a server at ~250 req/s (4 ms). */
const SCENARIO_SERVICE_MS = 4

function main (argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      strategy: { type: 'string' },
      servers: { type: 'string' },
      'slices-per-server': { type: 'string' },
      period: { type: 'string' },
      duration: { type: 'string' },
      seed: { type: 'string' },
      out: { type: 'string' },
      mode: { type: 'string' },
      arrivals: { type: 'string' },
      'rate-scale': { type: 'string' },
      service: { type: 'string' },
      'service-mean': { type: 'string' },
      capacity: { type: 'string' },
      'miss-cost': { type: 'string' },
      'strategy-options': { type: 'string' },
      report: { type: 'boolean', default: false },
      sizes: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false }
    }
  })
  if (values.help) {
    process.stdout.write(fs.readFileSync(__filename, 'utf8').split('/**')[1].split('*/')[0].replace(/^ \* ?/gm, ''))
    return 0
  }
  if (values.report) return report(values)
  if (positionals.length !== 1) throw new InvalidArgumentError('expected one scenario file (.json or .yaml); see --help')

  const input = readSimInput(positionals[0])
  const e = input.experiment
  const servers = int(values.servers, 'servers') ?? e?.servers ?? SIM_DEFAULTS.servers
  const strategy = values.strategy ?? SIM_DEFAULTS.strategy
  let strategyOptions = values['strategy-options'] !== undefined ? json(values['strategy-options'], 'strategy-options') : undefined
  if (strategyOptions === undefined && e && strategy === 'chopper') strategyOptions = e.strategyOptions
  const rateScaleArg = values['rate-scale'] ?? 'auto'
  const rateScale = rateScaleArg === 'auto' ? (e ? servers / e.servers : 1) : num(rateScaleArg, 'rate-scale')
  const server = {}
  if (values.service !== undefined || values['service-mean'] !== undefined || e) {
    server.service = { type: values.service ?? 'exponential', mean: num(values['service-mean'], 'service-mean') ?? (e ? SCENARIO_SERVICE_MS : 1) }
  }
  if (values.capacity !== undefined) server.capacity = int(values.capacity, 'capacity')
  if (values['miss-cost'] !== undefined) server.missCost = num(values['miss-cost'], 'miss-cost')
  const duration = num(values.duration, 'duration')

  const progress = createProgress(process.stderr, `${strategy} x ${servers}`)
  const result = simulate(input.workload, {
    strategy,
    strategyOptions,
    servers,
    slicesPerServer: int(values['slices-per-server'], 'slices-per-server'),
    periodMs: num(values.period, 'period') ?? e?.periodMs,
    durationMs: duration === undefined ? undefined : duration * 1000,
    seed: int(values.seed, 'seed'),
    mode: values.mode,
    arrivals: values.arrivals,
    rateScale,
    server,
    onProgress: progress.update
  })
  progress.end()
  result.input = { file: positionals[0], name: input.name }
  const command = `node sim/bin/sim.js ${argv.join(' ')}`
  if (values.out) {
    fs.mkdirSync(values.out, { recursive: true })
    const base = path.join(values.out, `${input.name}-${strategy}-${servers}`)
    fs.writeFileSync(`${base}.json`, JSON.stringify(result, null, 1) + '\n')
    fs.writeFileSync(`${base}.html`, renderRunReport(result, { command }))
    const s = result.summary
    process.stdout.write(`${base}.{json,html}: steady imbalance ${s.steadyImbalance}, recovery ${JSON.stringify(s.periodsToRecover)}, churn/round mean ${s.churnPerRound?.mean}, round p50 ${s.roundMs.p50} ms` +
      (s.latencyMs ? `, p99 ${s.latencyMs.p99} ms` : '') + '\n')
  } else {
    process.stdout.write(JSON.stringify(result, null, 1) + '\n')
  }
  return 0
}

function report (values) {
  const sizes = values.sizes ? values.sizes.split(',').map((v) => int(v, 'sizes')) : SCALE_DEFAULTS.sizes
  const out = values.out ?? RESULTS_DIR
  let bar = null
  const data = runScaleSet({
    sizes,
    runs: SCALE_RUNS,
    onProgress: (label, done, total) => {
      if (!bar) bar = { label, p: createProgress(process.stderr, label.padEnd(44)) }
      else if (bar.label !== label) { bar.p.end(); bar = { label, p: createProgress(process.stderr, label.padEnd(44)) } }
      bar.p.update(done, total)
    },
    onRun: (r) => {
      if (!process.stderr.isTTY) process.stderr.write(`${r.label} x ${r.servers}: ${r.wallSeconds} s\n`)
    }
  })
  if (bar) bar.p.end()
  const compact = {
    tool: 'chopper-sim',
    generatedBy: `npm run sim:report${values.sizes ? ` -- --sizes ${values.sizes}` : ''}`,
    notes: [
      'Fluid mode: each period, every key gets its expected request count (rate x PMF x period) with Poisson noise, added to its slice; the real strategy functions rebalance on those per-slice counts, exactly as the controller would. No per-request events, so no latency figures here (run a scenario in requests mode for those).',
      'Workload (sim/scale.js scaleSpec): 100 keys per server, 70 % of requests uniform, 30 % over a hot set of one key per server (each hot key 0.3x a server\'s mean load), a new hot set every 10 periods; 10,000 req/s per server; 100 slices per server at the start (consistent hashing: 100 vnodes). Handoff is instantaneous.',
      'Imbalance = max / mean server load in the period. Steady state = mean over the second half of each phase. Recovery = periods from the first period of a new phase until imbalance < 1.25 for 2 periods in a row ("never" = not within the phase). Churn = keyspace fraction whose owner changed in the round. Round time = wall clock of the strategy call on this machine (varies between runs).'
    ],
    settings: data.settings,
    runs: data.runs.map(compactRun)
  }
  fs.mkdirSync(out, { recursive: true })
  fs.writeFileSync(path.join(out, 'report.json'), JSON.stringify(compact) + '\n')
  fs.writeFileSync(path.join(out, 'report.html'), renderScaleReport(compact))
  process.stdout.write(`wrote ${path.join(out, 'report.json')} and report.html\n`)
  for (const r of compact.runs) {
    const s = r.summary
    process.stdout.write(`${r.label.padEnd(34)} ${String(r.servers).padStart(6)}  round p50 ${String(s.roundMs.p50).padStart(8)} ms  max ${String(s.roundMs.max).padStart(8)} ms  steady ${s.steadyImbalance}  recovery ${JSON.stringify(s.periodsToRecover)}  churn mean ${s.churnPerRound.mean} max ${s.churnPerRound.max}\n`)
  }
  return 0
}

function num (v, name) {
  if (v === undefined) return undefined
  const n = Number(v)
  if (v === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`invalid --${name}: expected a number, got ${JSON.stringify(v)}`)
  return n
}
function int (v, name) {
  const n = num(v, name)
  if (n !== undefined && !Number.isInteger(n)) throw new InvalidArgumentError(`invalid --${name}: expected an integer, got ${JSON.stringify(v)}`)
  return n
}
function json (v, name) {
  try { return JSON.parse(v) } catch { throw new InvalidArgumentError(`invalid --${name}: expected JSON, got ${JSON.stringify(v)}`) }
}

if (require.main === module) {
  try {
    process.exitCode = main(process.argv.slice(2))
  } catch (err) {
    process.stderr.write(`sim: ${err.message}\n`)
    process.exit(err instanceof InvalidArgumentError || err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? 2 : 1)
  }
}

module.exports = { main }
