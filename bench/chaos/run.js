#!/usr/bin/env node
'use strict'

// npm run chaos: the failure bench. Prints a table to stdout (progress goes to
// stderr) and writes <out>/chaos.json and <out>/chaos.md. Not a test.
const path = require('node:path')
const { parseArgs } = require('node:util')
const { runChaos, FAULT_NAMES } = require('./index')
const { formatTable, formatSteps, writeReports } = require('./report')

const USAGE = `usage: npm run chaos -- [options]
  --rate N          requests per second, open loop (default 300)
  --keys N          keys per phase (default 200)
  --put-ratio F     share of PUTs (default 0.2)
  --moves N         slice moves in the moves phase (default 1000; --quick 100)
  --redis-every N   moves between Redis restarts (default 200; --quick 25)
  --before-ms MS    steady load before each fault (default 5000; --quick 2000)
  --after-ms MS     steady load after each fault (default 5000; --quick 2000)
  --seed N          seed for keys, operations and moves (default 1)
  --only LIST       comma-separated faults: ${FAULT_NAMES.join(', ')}
  --quick           a short run for smoke-testing
  --net auto|on|off network faults on test hosts in network namespaces (default auto: where they
                    can be made, which needs root, iproute2 and nftables)
  --net-hold-ms MS  how long a partition or clock fault is held once noticed (default 5000; --quick 2000)
  --net-delay-hold-ms MS  how long the control-plane delay and loss last (default 60000; --quick 15000)
  --nemesis         a seeded random schedule of the network faults, under load: one verdict, one
                    table (a row per fault); alone, or after the faults --only lists
  --nemesis-ms MS   how long the schedule runs (default 600000; --quick 60000)
  --out DIR         where chaos.json and chaos.md go (default bench/results)
  --log-dir DIR     component logs (default: a new directory under the OS temp dir)
  negative controls (weaken the system on purpose, to check the bench catches it):
  --handoff none    controller pushes new maps without fenced handoff
  --consistency available   app servers admit without a live lease
  other settings:
  --held-reads ask|wait     kv-cache's heldReads on every app server (default wait: its own default)`

function fail (message) {
  process.stderr.write(`${message}\n${USAGE}\n`)
  process.exit(2)
}

function parse (argv) {
  let values
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        rate: { type: 'string' },
        keys: { type: 'string' },
        'put-ratio': { type: 'string' },
        moves: { type: 'string' },
        'redis-every': { type: 'string' },
        'before-ms': { type: 'string' },
        'after-ms': { type: 'string' },
        seed: { type: 'string' },
        only: { type: 'string' },
        quick: { type: 'boolean' },
        net: { type: 'string' },
        'net-hold-ms': { type: 'string' },
        'net-delay-hold-ms': { type: 'string' },
        nemesis: { type: 'boolean' },
        'nemesis-ms': { type: 'string' },
        out: { type: 'string' },
        'log-dir': { type: 'string' },
        handoff: { type: 'string' },
        consistency: { type: 'string' },
        'held-reads': { type: 'string' },
        help: { type: 'boolean', short: 'h' }
      }
    }))
  } catch (err) {
    fail(err.message)
  }
  if (values.help) {
    process.stdout.write(USAGE + '\n')
    process.exit(0)
  }
  const num = (name) => {
    if (values[name] === undefined) return undefined
    const n = Number(values[name])
    if (values[name].trim() === '' || !Number.isFinite(n)) fail(`invalid --${name}: expected a number, got ${JSON.stringify(values[name])}`)
    return n
  }
  return {
    rate: num('rate'),
    keys: num('keys'),
    putRatio: num('put-ratio'),
    moves: num('moves'),
    redisEvery: num('redis-every'),
    beforeMs: num('before-ms'),
    afterMs: num('after-ms'),
    seed: num('seed'),
    only: values.only === undefined ? undefined : values.only.split(',').map((s) => s.trim()).filter(Boolean),
    quick: values.quick || undefined,
    net: values.net === undefined ? undefined : ({ auto: 'auto', on: true, off: false })[values.net] ?? fail(`invalid --net: expected auto, on or off, got ${JSON.stringify(values.net)}`),
    netHoldMs: num('net-hold-ms'),
    netDelayHoldMs: num('net-delay-hold-ms'),
    nemesis: values.nemesis || undefined,
    nemesisMs: num('nemesis-ms'),
    logDir: values['log-dir'] && path.resolve(values['log-dir']),
    handoff: values.handoff,
    consistency: values.consistency,
    heldReads: values['held-reads'],
    out: path.resolve(values.out || path.join(__dirname, '..', 'results'))
  }
}

async function main () {
  const argv = process.argv.slice(2)
  const { out, ...options } = parse(argv)
  const command = process.env.npm_lifecycle_event === 'chaos'
    ? `npm run chaos${argv.length ? ` -- ${argv.join(' ')}` : ''}`
    : `node bench/chaos/run.js${argv.length ? ` ${argv.join(' ')}` : ''}`
  const abort = new AbortController()
  const onSignal = () => {
    if (abort.signal.aborted) {
      process.stderr.write('second interrupt: exiting now\n')
      process.exit(130)
    }
    process.stderr.write('interrupted: finishing the current step and stopping everything (Ctrl-C again to exit at once)\n')
    abort.abort()
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  let result
  try {
    result = await runChaos({ ...options, command, signal: abort.signal, progress: (msg) => process.stderr.write(`[chaos] ${msg}\n`) })
  } catch (err) {
    if (err.code === 'CHOPPER_ERR_INVALID_ARG') fail(err.message)
    process.stderr.write(`chaos bench failed: ${err.stack || err.message}\n`)
    process.exit(1)
  }
  const files = writeReports(result, out)
  process.stdout.write(`\n${formatTable(result.rows)}\n\n`)
  for (const p of result.phases) if (p.details.table) process.stdout.write(`${formatSteps(p.details.table)}\n\n`)
  process.stdout.write(`settings: leaseMs ${result.settings.controller.leaseMs}, periodMs ${result.settings.controller.periodMs}, evictAfterFailures ${result.settings.controller.evictAfterFailures}, handoff ${result.settings.controller.handoff}, consistency ${result.settings.appServer.consistency}, rate ${result.settings.load.rate}/s, ${result.settings.load.keysPerPhase} keys per phase\n`)
  process.stdout.write(`command:  ${result.command}\nwritten:  ${path.relative(process.cwd(), files.json)}, ${path.relative(process.cwd(), files.md)}\nlogs:     ${result.logDir}\n`)
  process.exitCode = result.aborted ? 130 : 0
}

main()
