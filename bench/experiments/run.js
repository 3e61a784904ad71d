#!/usr/bin/env node
'use strict'

/**
 * npm run experiment -- <name> [...]   one or more scenarios
 * npm run experiments                  all of them (about 15 minutes)
 *
 * Flags: --time-scale X (multiply every phase duration), --rate-scale X
 * (every rate times X, every modelled service time over X: a slower machine),
 * --store-latency-ms N (KV: dynalite answers N ms late, as DynamoDB from an
 * instance; scaled with --rate-scale), --contenders a,b,
 * --out DIR (default bench/results), --report FILE.json (only rebuild the HTML
 * of an earlier run), --list. Writes DIR/<name>.json and .html, or
 * DIR/experiments.json and .html for --all.
 */
const fs = require('node:fs')
const path = require('node:path')
const { parseArgs } = require('node:util')
const { loadScenario, scenarioNames } = require('./scenario')
const { runScenario, environment } = require('./harness')
const { CONTENDER_NAMES } = require('./contenders')
const { renderReport, headline } = require('./report')
const { MAX_REPEATS, isRepeatCount } = require('./repeats')

const USAGE = `usage: node bench/experiments/run.js (<scenario>... | --all) [--time-scale X] [--rate-scale X] [--repeat N] [--store-latency-ms N] [--contenders ${CONTENDER_NAMES.join(',')}] [--strategy-options JSON] [--load-metric cost|requests] [--frontend-options JSON] [--app-options JSON] [--out DIR]
       node bench/experiments/run.js --report DIR/experiments.json   (rebuild the HTML)
       node bench/experiments/run.js --list`

async function main (argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      all: { type: 'boolean', default: false },
      list: { type: 'boolean', default: false },
      'time-scale': { type: 'string', default: '1' },
      'rate-scale': { type: 'string', default: '1' },
      repeat: { type: 'string', default: '1' },
      'store-latency-ms': { type: 'string' },
      contenders: { type: 'string' },
      'strategy-options': { type: 'string' },
      'load-metric': { type: 'string' },
      'frontend-options': { type: 'string' },
      'app-options': { type: 'string' },
      out: { type: 'string', default: path.join(__dirname, '..', 'results') },
      report: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false }
    }
  })
  if (values.help) return console.log(USAGE)
  if (values.list) return console.log(scenarioNames().join('\n'))
  if (values.report) {
    const doc = JSON.parse(fs.readFileSync(values.report, 'utf8'))
    doc.headline = headline(doc) // derived, so a newer report.js may add to it
    const html = values.report.replace(/\.json$/, '') + '.html'
    fs.writeFileSync(values.report, JSON.stringify(doc, null, 1) + '\n')
    fs.writeFileSync(html, renderReport(doc))
    return console.log(`wrote ${html}`)
  }
  const names = values.all ? scenarioNames() : positionals
  if (names.length === 0) throw usageError('name a scenario or pass --all')
  const timeScale = Number(values['time-scale'])
  if (!(timeScale > 0)) throw usageError(`--time-scale: expected a number > 0, got ${JSON.stringify(values['time-scale'])}`)
  const rateScale = Number(values['rate-scale'])
  if (!(rateScale > 0 && rateScale <= 1)) throw usageError(`--rate-scale: expected a number > 0 and <= 1, got ${JSON.stringify(values['rate-scale'])}`)
  const repeats = Number(values.repeat)
  if (!isRepeatCount(repeats)) throw usageError(`--repeat: expected an integer from 1 to ${MAX_REPEATS}, got ${JSON.stringify(values.repeat)}`)
  const storeLatency = values['store-latency-ms'] === undefined ? undefined : Number(values['store-latency-ms'])
  if (storeLatency !== undefined && !(storeLatency >= 0 && storeLatency <= 1000)) throw usageError(`--store-latency-ms: expected a number of ms from 0 to 1000, got ${JSON.stringify(values['store-latency-ms'])}`)
  const contenders = values.contenders ? values.contenders.split(',').map((s) => s.trim()) : CONTENDER_NAMES
  const extra = jsonObjectFlag(values, 'strategy-options')
  const frontendOptions = jsonObjectFlag(values, 'frontend-options')
  const appOptions = jsonObjectFlag(values, 'app-options') // every contender's app servers, over the scenario's
  // validate them all before running any; --strategy-options go over each scenario's chopper options
  const metric = values['load-metric']
  if (metric !== undefined && !['cost', 'requests'].includes(metric)) throw usageError(`--load-metric: expected cost or requests, got ${JSON.stringify(metric)}`)
  const scenarios = names.map((n) => loadScenario(n)).map((s) => ({
    ...s,
    experiment: { ...s.experiment, ...(storeLatency === undefined ? {} : { storeLatencyMs: storeLatency }), strategyOptions: { ...s.experiment.strategyOptions, ...extra }, ...(metric ? { loadMetric: metric } : {}), frontendOptions, appOptions: { ...s.experiment.appOptions, ...appOptions } }
  }))
  const command = ['npm run', values.all ? 'experiments' : 'experiment --', ...(values.all ? [] : names), ...(argv.filter((a) => a.startsWith('--') && a !== '--all'))].join(' ').replace(/ +/g, ' ')
  const doc = { tool: 'chopper-experiments', version: 1, command: `node bench/experiments/run.js ${argv.join(' ')}`, npmCommand: command, startedAt: new Date().toISOString(), environment: environment(), scenarios: [] }
  const t0 = Date.now()
  for (const s of scenarios) {
    doc.scenarios.push(await runScenario(s, { contenders, timeScale, rateScale, repeats, onProgress: (line) => console.error(line) }))
  }
  doc.wallS = Math.round((Date.now() - t0) / 1000)
  doc.headline = headline(doc)
  fs.mkdirSync(values.out, { recursive: true })
  const base = path.join(values.out, values.all ? 'experiments' : names.map((n) => path.basename(n, '.yaml')).join('+'))
  fs.writeFileSync(`${base}.json`, JSON.stringify(doc, null, 1) + '\n')
  fs.writeFileSync(`${base}.html`, renderReport(doc))
  console.log(`wrote ${base}.json and ${base}.html (${doc.wallS} s)`)
  for (const h of doc.headline) console.log(`${h.label}: ${h.text}`)
}

/** A flag whose value is a JSON object ({} when absent); anything else is a usage error. */
function jsonObjectFlag (values, name) {
  const text = values[name]
  if (text === undefined) return {}
  let parsed
  try {
    parsed = JSON.parse(text)
  } catch (err) {
    throw usageError(`--${name}: expected a JSON object, got ${JSON.stringify(text)}`)
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw usageError(`--${name}: expected a JSON object`)
  return parsed
}

function usageError (message) {
  const err = new Error(`${message}\n${USAGE}`)
  err.usage = true
  return err
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(err.usage ? err.message : err.stack || err.message)
    process.exit(2)
  })
}

module.exports = { main }
