'use strict'

/**
 * The control plane at scale: the real controller, in a process of its own,
 * against N protocol-level fake members (bench/lib/fake-members.js) spread
 * over several processes, plus fake front ends, at several N; and a row of
 * real appserver-lib members.
 *
 *   npm run bench:control-plane -- [--sizes 100,1000,5000] [--frontends 50] [--procs 3]
 *     [--steady-ms 15000] [--deadline-ms 60000] [--join-rate 50] [--batch 1000]
 *     [--real 300] [--real-procs 4] [--runs main,batch] [--controller '{"periodMs":5000}'] [--renewals stream|http]
 *     [--out bench/results] [--root <checkout>] [--quick]
 *
 * --root runs another checkout's controller and appserver-lib under this
 * bench (e.g. `git archive <commit> | tar -x -C /tmp/old` with node_modules
 * linked in), to compare commits with the same fake members.
 *
 * Per N (bench/lib/control-plane-harness.js): join time (all at once, at
 * --join-rate a second, and a burst of --batch on a settled cluster), the
 * traffic the controller sends and receives, its CPU and event-loop p99 at
 * steady state, renewal latency as members see it, lapses (members dropped
 * while alive), failover after the SIGKILL of the process holding ~10 % of the
 * members, and the bytes one slice move costs each member and front end.
 *
 * The fake members renew as appserver-lib does, over lease streams
 * (core/lease-stream.js); --renewals http has them renew by HTTP calls instead.
 * They answer pushes without verifying their signatures and run
 * no app: the figures are the controller's cost, not its members'. The fake
 * processes' own CPU is reported beside, so a saturated load generator shows.
 * Every call to the controller is signed (a 32-character cluster token).
 *
 * Writes bench/results/control-plane.{json,md,svg}. A script, not a test.
 * With CHOPPER_CONTROLLER_PROF=<dir> the controller's process writes a V8
 * CPU profile there (--cpu-prof), to see where its time went.
 */
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { parseFlags } = require('./lib/cli')
const { ensureFdLimit } = require('./lib/fd-limit')
const { killAllChildren } = require('./lib/child')
const { environment } = require('./lib/report')
const { runSize, defaults } = require('./lib/control-plane-harness')
const { runRealMembers } = require('./lib/control-plane-real')
const { writeControlPlaneResults } = require('./lib/control-plane-report')
const { InvalidArgumentError } = require('../core/errors')

const SPEC = {
  sizes: { type: 'string', default: '100,1000,5000' },
  frontends: { type: 'int', default: defaults.frontends, min: 0 },
  procs: { type: 'int', default: defaults.procs, min: 1 },
  'steady-ms': { type: 'int', default: defaults.steadyMs, min: 100 },
  'settle-ms': { type: 'int', default: defaults.settleMs, min: 0 },
  'deadline-ms': { type: 'int', default: defaults.deadlineMs, min: 1000 },
  'join-rate': { type: 'number', default: defaults.joinRate, min: 0.1 },
  batch: { type: 'int', default: defaults.batch, min: 1 },
  real: { type: 'int', default: 300, min: 0 },
  'real-procs': { type: 'int', default: 4, min: 1 },
  runs: { type: 'string', default: defaults.runs.join(',') },
  controller: { type: 'string', default: '{}' },
  renewals: { type: 'string', default: 'stream' },
  out: { type: 'string', default: path.join(__dirname, 'results') },
  root: { type: 'string', default: path.join(__dirname, '..') },
  quick: { type: 'boolean', default: false },
  help: { type: 'boolean', default: false }
}

/** --quick: a tiny run of every phase, to check the harness. */
const QUICK = { sizes: '20,50', frontends: 2, procs: 2, 'steady-ms': 2000, 'settle-ms': 500, 'deadline-ms': 30000, batch: 10, real: 12, 'real-procs': 2 }

function parse (argv) {
  const flags = parseFlags(argv, SPEC)
  if (flags.quick) {
    for (const [k, v] of Object.entries(QUICK)) if (!argv.some((a) => a === `--${k}` || a.startsWith(`--${k}=`))) flags[k] = v
  }
  const sizes = String(flags.sizes).split(',').map((s) => Number(s.trim()))
  if (sizes.length === 0 || sizes.some((n) => !Number.isInteger(n) || n < 2)) throw new InvalidArgumentError(`invalid --sizes: expected comma-separated integers >= 2, got ${JSON.stringify(flags.sizes)}`)
  const runs = String(flags.runs).split(',').map((s) => s.trim()).filter(Boolean)
  if (runs.some((r) => !['main', 'batch'].includes(r))) throw new InvalidArgumentError(`invalid --runs: expected main and/or batch, got ${JSON.stringify(flags.runs)}`)
  if (!['stream', 'http'].includes(flags.renewals)) throw new InvalidArgumentError(`invalid --renewals: expected stream or http, got ${JSON.stringify(flags.renewals)}`)
  let controller
  try {
    controller = JSON.parse(flags.controller)
  } catch {
    throw new InvalidArgumentError(`invalid --controller: expected a JSON object of createController options, got ${JSON.stringify(flags.controller)}`)
  }
  if (!controller || typeof controller !== 'object' || Array.isArray(controller)) throw new InvalidArgumentError('invalid --controller: expected a JSON object')
  return { ...flags, sizes, runs, controller }
}

/**
 * Descriptors the busiest process needs: the controller holds ~3 sockets per
 * member (its renewal in, a push and a load collection out); a fake process,
 * 4 per member it hosts (its port, the two accepted, its renewal) for under
 * half of them; a real app-server process, ~5 per member.
 */
function descriptorsNeeded (flags) {
  const n = Math.max(...flags.sizes) + flags.frontends
  return Math.max(3 * n + 1024, 5 * Math.ceil(flags.real / flags['real-procs']) + 1024)
}

/** The commit a checkout is at (a `git archive` extraction has none: its COMMIT file, else null). */
function commitOf (root) {
  try {
    return execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() + (root === path.join(__dirname, '..') && dirty(root) ? ' (with uncommitted changes)' : '')
  } catch {
    try { return fs.readFileSync(path.join(root, 'COMMIT'), 'utf8').trim() } catch { return null }
  }
}

function dirty (root) {
  return execFileSync('git', ['-C', root, 'status', '--porcelain', '--', 'controller', 'appserver-lib', 'core'], { encoding: 'utf8' }).trim() !== ''
}

async function main () {
  const flags = parse(process.argv.slice(2))
  if (flags.help) {
    const text = fs.readFileSync(__filename, 'utf8')
    console.log(text.slice(text.indexOf('/**'), text.indexOf(' */') + 3))
    return
  }
  const limit = ensureFdLimit(descriptorsNeeded(flags))
  const log = (line) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`)
  log(`open-files limit ${limit.after ? limit.after.soft : 'unknown'}${limit.raised ? ` (raised from ${limit.before.soft})` : ''}; ${os.cpus().length} x ${os.cpus()[0] ? os.cpus()[0].model : 'unknown CPU'}`)
  const env = environment()
  const results = []
  for (const n of flags.sizes) {
    results.push(await runSize(n, {
      frontends: flags.frontends,
      procs: flags.procs,
      steadyMs: flags['steady-ms'],
      settleMs: flags['settle-ms'],
      deadlineMs: flags['deadline-ms'],
      joinRate: flags['join-rate'],
      batch: flags.batch,
      runs: flags.runs,
      controllerOptions: flags.controller,
      fakeConfig: { leaseStream: flags.renewals === 'stream' },
      root: path.resolve(flags.root),
      log
    }))
  }
  let real = null
  if (flags.real > 0) {
    real = await runRealMembers({
      count: flags.real,
      procs: flags['real-procs'],
      clusterToken: defaults.clusterToken,
      controllerOptions: { ...defaults.controllerOptions, ...flags.controller },
      deadlineMs: flags['deadline-ms'],
      steadyMs: Math.min(flags['steady-ms'], 5000),
      root: path.resolve(flags.root),
      log
    })
  }
  const command = `node bench/control-plane.js ${process.argv.slice(2).join(' ')}`.trim()
  const report = { command, environment: env, commit: commitOf(path.resolve(flags.root)), options: { ...flags, out: undefined }, sizes: results, real }
  const paths = writeControlPlaneResults(flags.out, report)
  log(`wrote ${Object.values(paths).join(', ')}`)
}

process.on('SIGINT', () => {
  killAllChildren()
  process.exit(130)
})
process.on('exit', killAllChildren)

main().catch((err) => {
  console.error(err instanceof InvalidArgumentError ? err.message : err)
  killAllChildren()
  process.exit(1)
})
