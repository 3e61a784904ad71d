'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile, spawnSync } = require('node:child_process')
const { promisify } = require('node:util')
const { startLocalCluster } = require('../../cluster/local-cluster')
const { sliceKey } = require('../../core/keyspace')
const { SliceMap } = require('../../core/slice-map')
const { generate, writePayload, parsePayload, run } = require('../../loadgen')

// Drives a real local cluster (controller, one front end, three compute app
// servers). The strategy is the static consistent-hash one, so every key has
// one owner for the whole test and the expected per-server counts can be
// computed from the assignment.
const SCRIPT = path.join(__dirname, '../../wrk2-scripts/payload.lua')
const hasWrk = spawnSync('wrk', ['-v']).error?.code !== 'ENOENT'
if (!hasWrk) console.warn('SKIPPING the wrk test: `wrk` is not on PATH (CI installs it with apt-get install -y wrk)')

let cluster
let dir
let owners // server id -> two keys it owns

beforeAll(async () => {
  cluster = await startLocalCluster({ app: 'compute', frontends: 1, servers: 3, strategy: 'consistent-hash', periodMs: 60000, port: 0 })
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'loadgen-wrk-'))
  const map = new SliceMap(cluster.controller.controller.assignment)
  owners = {}
  for (let i = 0; Object.values(owners).filter((k) => k.length === 2).length < 3; i++) {
    const key = `k${i}`
    const owner = map.ownerOf(sliceKey(key))
    owners[owner] = owners[owner] || []
    if (owners[owner].length < 2) owners[owner].push(key)
  }
})

afterAll(async () => {
  if (cluster) await cluster.close()
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
})

// Weights giving the three servers 50 %, 30 % and 20 % of requests: distinct
// enough that a mix-up of X-Served-By counts cannot pass.
function weightedSpec (rate, duration) {
  const [a, b, c] = Object.keys(owners).sort()
  const weights = { [owners[a][0]]: 5, [owners[a][1]]: 5, [owners[b][0]]: 3, [owners[b][1]]: 3, [owners[c][0]]: 2, [owners[c][1]]: 2 }
  return {
    spec: {
      seed: 21,
      phases: [{ duration, rate, keys: Object.keys(weights), distribution: { type: 'weights', weights }, mix: { get: 1 }, path: '/compute?key={key}&n=1' }]
    },
    ownerOf: (key) => [a, b, c].find((s) => owners[s].includes(key))
  }
}

;(hasWrk ? test : test.skip)('Debian wrk replays a payload with payload.lua and prints the per-server counts from X-Served-By', async () => {
  const { spec, ownerOf } = weightedSpec(200, 10) // 2000 payload lines
  const file = path.join(dir, 'payload.txt')
  const out = fs.createWriteStream(file)
  await writePayload(generate(spec), out)
  await new Promise((resolve) => out.end(resolve))

  const { stdout } = await promisify(execFile)('wrk', ['-t2', '-c4', '-d2s', '-s', SCRIPT, cluster.frontends[0].url, '--', file, '2'], { timeout: 30000 })
  const line = stdout.split('\n').find((l) => l.startsWith('CHOPPER_WRK_RESULT '))
  expect(line).toBeDefined()
  const r = JSON.parse(line.slice('CHOPPER_WRK_RESULT '.length))

  expect(r.threads).toBe(2)
  expect(r.declaredThreads).toBe(2)
  expect(r.responses).toBeGreaterThan(100)
  expect(r.status).toEqual({ '2xx': r.responses })
  expect(Object.keys(r.servedBy).sort()).toEqual(cluster.servers.map((s) => s.id).sort())
  expect(Object.values(r.servedBy).reduce((a, b) => a + b)).toBe(r.responses)
  for (const k of ['p50', 'p90', 'p99', 'p99.9', 'max']) expect(r.latencyMs[k]).toBeGreaterThan(0)

  // Thread t replays payload lines t, t+2, ... (wrk's start-up check request() call consumes thread 0's
  // first line), so its r_t responses are for the next r_t of its lines, give or take the requests still
  // in flight when wrk stopped (at most 2 per thread: -c4 over -t2).
  const { requests } = parsePayload(fs.readFileSync(file, 'utf8'))
  expect(r.perThread).toHaveLength(2)
  for (const th of r.perThread) {
    const mine = requests.filter((_, i) => i % 2 === th.index)
    const expected = {}
    const start = th.index === 0 ? 1 : 0
    for (let i = 0; i < th.responses; i++) {
      const owner = ownerOf(mine[(start + i) % mine.length].key)
      expected[owner] = (expected[owner] || 0) + 1
    }
    for (const [server, n] of Object.entries(expected)) {
      expect(Math.abs((th.servedBy[server] || 0) - n)).toBeLessThanOrEqual(2)
    }
  }
  // The weights give ~50/30/20 %, so a mix-up between servers could not pass the check above.
  const shares = Object.values(r.servedBy).map((n) => n / r.responses).sort()
  expect(shares[2] - shares[0]).toBeGreaterThan(0.2)
  expect(r.imbalance).toBeCloseTo(Math.max(...Object.values(r.servedBy)) / (r.responses / 3), 3)
  // The human-readable report is there too.
  expect(stdout).toMatch(/chopper payload\.lua: \d+ responses/)
  expect(stdout).toMatch(/served by: {2}app-1 \d+/)
})

test('loadgen run against the cluster: every key is served by its owner, counts and imbalance match', async () => {
  const { spec, ownerOf } = weightedSpec(300, 1.5)
  const result = await run(spec, { target: cluster.frontends[0].url })
  const p = result.phases[0]
  expect(p.errorCount).toBe(0)
  expect(p.responses).toBe(450)
  expect(result.servers).toEqual(cluster.servers.map((s) => s.id).sort())
  const { servers, counts } = p.keys
  const expected = Object.fromEntries(result.servers.map((s) => [s, 0]))
  for (const [key, row] of Object.entries(counts)) {
    row.forEach((n, i) => expect(n > 0).toBe(servers[i] === ownerOf(key)))
    expected[ownerOf(key)] += row.reduce((a, b) => a + b)
  }
  expect(p.servers).toEqual(expected)
  expect(p.imbalance).toBeCloseTo(Math.max(...Object.values(expected)) / (450 / 3), 3)
})
