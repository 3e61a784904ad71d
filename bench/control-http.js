#!/usr/bin/env node
'use strict'

// The control plane's HTTP client, axios against core/json-client.js (undici),
// as the controller uses it: pushes of an assignment to an app server's
// control port. The app server (appserver-lib, no controller) runs in a
// process of its own; this process only sends. Each push carries the next
// generation, so each one is validated and installed. Alternating rounds of
// `--pushes` sequential pushes per client; medians of the CPU this process
// spent per push (user + system) and of the wall time per push.
// JsonClient is given the assignment serialized once per generation, as the
// pusher does for its targets; `--targets N` sends each generation that many
// times (one app server stands for N members), so the serialization is shared
// as it is in a cluster of N members. Writes <out>/control-http.{json,md}.
// Not a test.

const path = require('node:path')
const axios = require('axios')
const { forkChild, killAllChildren } = require('./lib/child')
const { markdownTable, environment, writeResults, fmt } = require('./lib/report')
const { parseFlags } = require('./lib/cli')
const { JsonClient, json } = require('../core/json-client')
const { KEYSPACE_SIZE } = require('../core/keyspace')

const FLAGS = {
  pushes: { type: 'int', default: 1000, min: 10 },
  targets: { type: 'int', default: 5, min: 1 },
  slices: { type: 'int', default: 40, min: 1 },
  rounds: { type: 'int', default: 5, min: 1 },
  out: { type: 'string', default: path.join(__dirname, 'results') },
  help: { type: 'boolean' }
}

const USAGE = `usage: node bench/control-http.js [options]
  --pushes N    pushes per client per round (default 1000)
  --targets N   sends of each generation (members it stands for; default 5)
  --slices N    slices in the pushed assignment (default 40)
  --rounds N    alternating rounds; medians are reported (default 5)
  --out DIR     where control-http.{json,md} go (default bench/results)`

const CHILD = path.join(__dirname, 'lib', 'hello-app-child.js')
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/** An assignment of `slices` slices over 3 servers, 2 replicas each, as a replicated layout looks. */
function assignment (generation, slices, url) {
  const ids = ['app-1', 'app-2', 'app-3']
  const list = []
  for (let i = 0; i < slices; i++) {
    list.push({ start: Math.floor(i * KEYSPACE_SIZE / slices), end: Math.floor((i + 1) * KEYSPACE_SIZE / slices), servers: [ids[i % 3], ids[(i + 1) % 3]] })
  }
  // app-1 (the child) is a replica of every slice it is not primary of, or primary: it owns something in each.
  return { generation, slices: list, servers: Object.fromEntries(ids.map((id) => [id, { url }])) }
}

const CLIENTS = {
  async axios (n, targets, slices, gen, controlUrl, url) {
    const http = axios.create({ timeout: 2000 })
    for (let i = 0; i < n; i += targets) {
      const a = assignment(gen(), slices, url)
      for (let t = 0; t < targets && i + t < n; t++) await http.put(`${controlUrl}/v1/assignment`, a)
    }
  },
  async undici (n, targets, slices, gen, controlUrl, url, client) {
    for (let i = 0; i < n; i += targets) {
      const body = json(assignment(gen(), slices, url))
      for (let t = 0; t < targets && i + t < n; t++) await client.put(`${controlUrl}/v1/assignment`, body)
    }
  }
}

async function main () {
  const opts = parseFlags(process.argv.slice(2), FLAGS)
  if (opts.help) return console.log(USAGE)
  const child = forkChild(CHILD)
  const { url, controlUrl } = await child.call('start', { mode: 'guarded' })
  // Generations only rise, whichever client pushes: a lower one would be refused as stale.
  let generation = 0
  const gen = () => ++generation
  const client = new JsonClient({ timeoutMs: 2000 })
  const names = Object.keys(CLIENTS)
  const rounds = []
  try {
    for (const name of names) await CLIENTS[name](50, opts.targets, opts.slices, gen, controlUrl, url, client) // warm both
    for (let r = 0; r < opts.rounds; r++) {
      const order = r % 2 === 0 ? names : [...names].reverse()
      const round = { round: r + 1 }
      for (const name of order) {
        const cpu0 = process.cpuUsage()
        const t0 = process.hrtime.bigint()
        await CLIENTS[name](opts.pushes, opts.targets, opts.slices, gen, controlUrl, url, client)
        const wallUs = Number(process.hrtime.bigint() - t0) / 1000 / opts.pushes
        const cpu = process.cpuUsage(cpu0)
        round[name] = { cpuUsPerPush: (cpu.user + cpu.system) / opts.pushes, wallUsPerPush: wallUs }
        console.log(`round ${r + 1} ${name.padEnd(6)} CPU ${fmt.fixed(round[name].cpuUsPerPush, 1)} µs/push, wall ${fmt.fixed(wallUs, 1)} µs/push`)
      }
      rounds.push(round)
    }
  } finally {
    await client.close()
    await child.close()
  }
  const summary = Object.fromEntries(names.map((n) => [n, {
    cpuUsPerPush: median(rounds.map((r) => r[n].cpuUsPerPush)),
    wallUsPerPush: median(rounds.map((r) => r[n].wallUsPerPush))
  }]))
  const ratio = summary.axios.cpuUsPerPush / summary.undici.cpuUsPerPush
  const md = [
    '# Control-plane HTTP: axios against core/json-client.js (undici)',
    '',
    `\`node bench/control-http.js --pushes ${opts.pushes} --targets ${opts.targets} --slices ${opts.slices} --rounds ${opts.rounds}\`: sequential pushes of a ${opts.slices}-slice assignment to one app server's control port (another process), each generation sent ${opts.targets} times; medians of ${opts.rounds} alternating rounds. CPU is the sender's alone.`,
    '',
    markdownTable(['client', 'sender CPU per push (µs)', 'wall time per push (µs)'], names.map((n) => [n, fmt.fixed(summary[n].cpuUsPerPush, 1), fmt.fixed(summary[n].wallUsPerPush, 1)])),
    '',
    `axios costs ${fmt.fixed(ratio, 2)}× the sender CPU of the undici client.`,
    ''
  ].join('\n')
  console.log('\n' + md)
  const written = writeResults(opts.out, 'control-http', { environment: environment(), options: opts, rounds, summary, axiosOverUndiciCpu: ratio }, md)
  console.log(`wrote ${written.jsonPath} and ${written.mdPath}`)
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
}).finally(() => killAllChildren())
