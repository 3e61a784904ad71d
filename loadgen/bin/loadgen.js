#!/usr/bin/env node
'use strict'

/**
 * loadgen: validate a workload spec, write its wrk payload, or drive it.
 * Exit codes: 0 ok, 1 the run failed (e.g. target unreachable), 2 bad usage or spec.
 */
const fs = require('node:fs')
const path = require('node:path')
const { parseArgs } = require('node:util')
const pino = require('pino')
const { ChopperError } = require('../../core/errors')
const { loadSpec, generate, run, writePayload, formatSummary, formatPlan } = require('..')

const USAGE = `Usage:
  loadgen validate <spec>                   check a spec; print each phase's plan and top keys
  loadgen generate <spec> [-o payload.txt]  write the request sequence for wrk2-scripts/payload.lua
        [--phase NAME|INDEX]...             only these phases (repeatable; default all)
  loadgen run <spec> --target URL           drive the workload and measure it
        [--target URL]...                   more front ends; requests rotate over them
        [-o result.json]                    result file (default: <spec name>.result.json)
        [--connections N]                   sockets per target (default 64)
        [--max-in-flight N]                 outstanding request cap (default 4096)
        [--timeout-ms N]                    per-request timeout (default 10000)
        [--lag-threshold-ms N]              late-send threshold (default 50)
        [--servers id,id,...]               server ids expected to serve (idle ones count in imbalance)
        [--closed-loop]                     wrk-style closed loop, NOT corrected for coordinated omission
        [--check-stale-reads]               KV: tag written values and count GETs that returned an overwritten one
        [--no-progress] [--quiet] [--log-level LEVEL]

Specs are JSON or YAML; see loadgen/README.md.`

const OPTIONS = {
  output: { type: 'string', short: 'o' },
  phase: { type: 'string', multiple: true },
  target: { type: 'string', short: 't', multiple: true },
  connections: { type: 'string' },
  'max-in-flight': { type: 'string' },
  'timeout-ms': { type: 'string' },
  'lag-threshold-ms': { type: 'string' },
  servers: { type: 'string' },
  'closed-loop': { type: 'boolean' },
  'check-stale-reads': { type: 'boolean' },
  'no-progress': { type: 'boolean' },
  quiet: { type: 'boolean', short: 'q' },
  'log-level': { type: 'string' },
  help: { type: 'boolean', short: 'h' }
}

class UsageError extends Error {}

async function main (argv) {
  let parsed
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true })
  } catch (err) {
    throw new UsageError(err.message)
  }
  const { values: flags, positionals } = parsed
  if (flags.help || positionals.length === 0) {
    process.stdout.write(USAGE + '\n')
    return 0
  }
  const [command, specFile, ...extra] = positionals
  if (!['validate', 'generate', 'run'].includes(command)) throw new UsageError(`unknown command ${JSON.stringify(command)}`)
  if (!specFile) throw new UsageError(`${command}: missing <spec> file`)
  if (extra.length) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`)

  const spec = loadSpec(specFile)
  const workload = generate(spec)

  if (command === 'validate') {
    process.stdout.write(`${specFile}: valid\n${formatPlan(workload)}\n`)
    return 0
  }

  if (command === 'generate') {
    const phases = flags.phase ? flags.phase.map((p) => phaseIndex(workload, p)) : undefined
    const out = flags.output ? fs.createWriteStream(flags.output) : process.stdout
    const { requests } = await writePayload(workload, out, { phases })
    if (flags.output) {
      await new Promise((resolve, reject) => out.end((err) => (err ? reject(err) : resolve())))
      if (!flags.quiet) process.stderr.write(`wrote ${requests} requests to ${flags.output}\n`)
    }
    return 0
  }

  if (!flags.target) throw new UsageError('run: --target URL is required (e.g. --target http://127.0.0.1:8080)')
  const logger = pino({ level: flags['log-level'] || 'warn', base: { component: 'loadgen-cli' } }, pino.destination(2))
  const controller = new AbortController()
  let interrupts = 0
  const onSigint = () => {
    if (++interrupts > 1) process.exit(130)
    process.stderr.write('\nstopping: finishing in-flight requests (Ctrl-C again to quit now)\n')
    controller.abort()
  }
  process.on('SIGINT', onSigint)
  const output = flags.output || `${path.basename(specFile).replace(/\.(ya?ml|json)$/i, '')}.result.json`
  try {
    const result = await run(workload, {
      target: flags.target.length === 1 ? flags.target[0] : flags.target,
      mode: flags['closed-loop'] ? 'closed' : 'open',
      checkStaleReads: Boolean(flags['check-stale-reads']),
      ...intFlag(flags, 'connections', 'connections'),
      ...intFlag(flags, 'max-in-flight', 'maxInFlight'),
      ...intFlag(flags, 'timeout-ms', 'timeoutMs'),
      ...intFlag(flags, 'lag-threshold-ms', 'lagThresholdMs'),
      servers: flags.servers ? flags.servers.split(',').map((s) => s.trim()).filter(Boolean) : [],
      progress: flags['no-progress'] || flags.quiet ? false : 'auto',
      progressStream: process.stderr,
      signal: controller.signal,
      logger
    })
    fs.writeFileSync(output, JSON.stringify(result, null, 2) + '\n')
    if (!flags.quiet) process.stdout.write(formatSummary(result) + `\n\nresult written to ${output}\n`)
    return 0
  } finally {
    process.off('SIGINT', onSigint)
  }
}

function phaseIndex (workload, p) {
  const byName = workload.phases.find((ph) => ph.name === p)
  if (byName) return byName.index
  if (/^\d+$/.test(p) && Number(p) < workload.phases.length) return Number(p)
  throw new UsageError(`--phase ${p}: no such phase (have ${workload.phases.map((ph) => `${ph.index}:${ph.name}`).join(', ')})`)
}

function intFlag (flags, name, option) {
  if (flags[name] === undefined) return {}
  if (!/^\d+$/.test(flags[name])) throw new UsageError(`--${name}: expected a non-negative integer, got ${JSON.stringify(flags[name])}`)
  return { [option]: Number(flags[name]) }
}

main(process.argv.slice(2)).then((code) => { process.exitCode = code }, (err) => {
  if (err instanceof UsageError) {
    process.stderr.write(`loadgen: ${err.message}\n\n${USAGE}\n`)
    process.exitCode = 2
  } else if (err instanceof ChopperError) {
    process.stderr.write(`loadgen: ${err.message} [${err.code}]\n`)
    process.exitCode = err.code === 'CHOPPER_ERR_INVALID_ARG' ? 2 : 1
  } else {
    process.stderr.write(`loadgen: ${err.stack || err}\n`)
    process.exitCode = 1
  }
})
