#!/usr/bin/env node
'use strict'

// Where a front end's time goes: runs the front end in a child process under
// `node --cpu-prof`, drives it with wrk against the no-op backend, and prints
// the hottest functions and modules by self time (the .cpuprofile is kept for
// Chrome DevTools or speedscope). docs/frontend-performance.md says where a
// profile puts the cost ("Where the cost is") and how to run this ("Measuring").
// Usage: node bench/profile-frontend.js [--duration 5] [--connections 32] [--root DIR] [--out DIR]
//   --root: the checkout whose frontend/ is profiled (default: this one), e.g. a
//   `git worktree` of an older commit, to compare before and after.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, execFile } = require('node:child_process')
const { promisify } = require('node:util')
const { once } = require('node:events')
const { parseArgs } = require('node:util')

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '32' },
    root: { type: 'string', default: path.join(__dirname, '..') },
    out: { type: 'string', default: fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-profile-')) },
    top: { type: 'string', default: '25' }
  }
})

const CHILD = `
const { createFrontend } = require(process.argv[1] + '/frontend')
const { KEYSPACE_SIZE } = require(process.argv[1] + '/core/keyspace')
;(async () => {
  const fe = createFrontend({})
  const { url } = await fe.start()
  fe.table.set({ generation: 1, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['noop'] }], servers: { noop: { url: process.argv[2] } } })
  process.stdout.write(url + '\\n')
  process.on('SIGINT', async () => { await fe.close(); process.exit(0) })
})()
`

async function firstLine (child) {
  const [chunk] = await once(child.stdout, 'data')
  return String(chunk).trim().split('\n')[0]
}

/** Self time by function and by module, as percentages of all samples. */
function summarize (profile, top) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const hits = new Map()
  for (const s of profile.samples) hits.set(s, (hits.get(s) || 0) + 1)
  const fn = new Map()
  const mod = new Map()
  let total = 0
  for (const [id, n] of hits) {
    const { functionName, url, lineNumber } = byId.get(id).callFrame
    const where = url ? url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(frontend|core)\//, '$1/') : ''
    const name = `${functionName || '(anonymous)'} ${where}${url ? ':' + (lineNumber + 1) : ''}`.trim()
    fn.set(name, (fn.get(name) || 0) + n)
    const m = !url ? '(native, GC, idle)' : url.includes('node_modules/') ? url.split('node_modules/')[1].split('/')[0] : url.startsWith('node:') ? url.split('/').slice(0, 2).join('/') : 'chopper'
    mod.set(m, (mod.get(m) || 0) + n)
    total += n
  }
  const rows = (map) => [...map].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k, v]) => `${(100 * v / total).toFixed(1).padStart(5)}%  ${k}`)
  return { functions: rows(fn), modules: rows(mod) }
}

async function main () {
  const backend = spawn(process.execPath, [path.join(__dirname, 'noop-backend.js')], { stdio: ['ignore', 'pipe', 'inherit'] })
  const backendUrl = `http://127.0.0.1:${await firstLine(backend)}`
  const fe = spawn(process.execPath, ['--cpu-prof', `--cpu-prof-dir=${values.out}`, '-e', CHILD, path.resolve(values.root), backendUrl], { stdio: ['ignore', 'pipe', 'inherit'] })
  const url = await firstLine(fe)
  const wrk = (d) => promisify(execFile)('wrk', ['-t1', `-c${values.connections}`, `-d${d}s`, '--latency', `${url}/x?key=bench`])
  await wrk(1) // warm-up
  const { stdout } = await wrk(values.duration)
  fe.kill('SIGINT')
  await once(fe, 'exit')
  backend.kill('SIGTERM')
  const file = fs.readdirSync(values.out).filter((f) => f.endsWith('.cpuprofile')).map((f) => path.join(values.out, f))[0]
  const { functions, modules } = summarize(JSON.parse(fs.readFileSync(file, 'utf8')), Number(values.top))
  console.log(`front end from ${path.resolve(values.root)}; wrk -t1 -c${values.connections} -d${values.duration}s`)
  console.log(`${/Requests\/sec:\s+\S+/.exec(stdout)[0]}, p50 ${/^\s+50%\s+(\S+)/m.exec(stdout)[1]}, p99 ${/^\s+99%\s+(\S+)/m.exec(stdout)[1]}; load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`)
  console.log('\nself time by function (includes the warm-up):')
  for (const r of functions) console.log(r)
  console.log('\nself time by module:')
  for (const r of modules) console.log(r)
  console.log(`\nprofile: ${file}`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
