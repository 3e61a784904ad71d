'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { pollUntil } = require('../../core/poll')
const { runSize } = require('../../bench/lib/control-plane-harness')
const { ControlPlaneCluster, splitMembers } = require('../../bench/lib/control-plane-cluster')
const { writeControlPlaneResults } = require('../../bench/lib/control-plane-report')
const { readPush } = require('../../bench/lib/control-plane-fake-member')
const { Reservoir, mergedPercentiles } = require('../../bench/lib/control-plane-window')

const TOKEN = 'x'.repeat(32)

describe('control-plane bench pieces', () => {
  test('a push\'s generation comes from its headers, else its first bytes, else its body', () => {
    expect(readPush({ 'x-chopper-generation': '7', 'x-chopper-base': '5' }, Buffer.from('{}'))).toEqual({ generation: 7, base: 5, parsed: false })
    expect(readPush({}, Buffer.from('{"generation":12,"slices":[],"servers":{}}'))).toEqual({ generation: 12, base: undefined, parsed: false })
    expect(readPush({}, Buffer.from('{"kind":"diff","base":3,"generation":4,"splices":[]}'))).toEqual({ generation: 4, base: 3, parsed: false })
    // generation after a long slice list: parsed
    const late = JSON.stringify({ slices: Array.from({ length: 20 }, (_, i) => ({ start: i, end: i + 1, servers: ['a'] })), generation: 9 })
    expect(readPush({}, Buffer.from(late))).toEqual({ generation: 9, base: undefined, parsed: true })
  })

  test('the first fake process holds about 10 % of the members, the rest evenly', () => {
    expect(splitMembers(1000, 3)).toEqual([100, 450, 450])
    expect(splitMembers(20, 2)).toEqual([2, 18])
    expect(splitMembers(5000, 3).reduce((a, b) => a + b, 0)).toBe(5000)
  })

  test('latency percentiles merge samples of different sizes by weight', () => {
    const a = new Reservoir(10)
    const b = new Reservoir(1000)
    for (let i = 0; i < 1000; i++) a.record(1) // 1000 values of 1, 10 kept
    for (let i = 0; i < 20; i++) b.record(100) // 20 values of 100, all kept
    const m = mergedPercentiles([a.sample(), b.sample()])
    expect(m.count).toBe(1020)
    expect(m.p50).toBe(1)
    expect(m.p99).toBe(100) // 2 % are 100: unweighted, 20 of 30 kept values would put even p50 at 100
    expect(mergedPercentiles([a.sample()]).p99).toBe(1)
  })
})

describe('control-plane bench harness (bench/lib/control-plane-harness.js)', () => {
  test('a tiny run: every member and front end joins and acknowledges, with no lapses; the reports are written', async () => {
    const lines = []
    const r = await runSize(20, { frontends: 2, procs: 2, steadyMs: 1000, settleMs: 200, deadlineMs: 15000, runs: ['main'], log: (l) => lines.push(l) })
    const m = r.main
    expect(m.procs).toEqual([2, 18])
    expect(m.frontendRegistration.converged).toBe(true)
    expect(m.joinAtOnce).toMatchObject({ converged: true, joined: 20 })
    expect(m.joinAtOnce.held).toMatchObject({ serversHolding: 20, serversRegistered: 20, frontendsHolding: 2 })
    expect(m.joinTraffic.members.pushMessages).toBeGreaterThan(0)
    expect(m.joinTraffic.members.registrations).toBeGreaterThanOrEqual(22)
    expect(m.steady.controllerCpuPct).toBeGreaterThan(0)
    expect(m.steady.controllerEventLoopMs.p99).toBeGreaterThan(0)
    expect(m.steady.renewalLatencyMs.count).toBeGreaterThan(0)
    expect(m.steady.renewalLatencyMs.p99).toBeGreaterThan(0)
    expect(m.steady.fakeProcesses).toHaveLength(2)
    expect(m.lapsesBeforeKill).toMatchObject({ notFound: 0, localLapses: 0 })
    expect(m.lapsesBeforeKill.leaseExpiries ?? 0).toBe(0)
    expect(m.move.converged).toBe(true)
    expect(m.move.perMember.pushBytes).toBeGreaterThan(0)
    expect(m.move.perFrontend.pushBytes).toBeGreaterThan(0)
    expect(m.kill).toMatchObject({ converged: true, killed: 2 })
    expect(m.kill.dropMs).toBeLessThanOrEqual(m.kill.ackedMs)
    expect(r.lapses).toBe(0)
    expect(lines.some((l) => /join at once acknowledged/.test(l))).toBe(true)

    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'control-plane-'))
    try {
      const paths = writeControlPlaneResults(out, { command: 'test', environment: { date: 'now', cpus: 2, cpuModel: 'cpu', node: process.version, platform: 'test' }, commit: 'abc', options: {}, sizes: [r], real: null })
      expect(JSON.parse(fs.readFileSync(paths.jsonPath, 'utf8')).sizes[0].n).toBe(20)
      expect(fs.readFileSync(paths.mdPath, 'utf8')).toMatch(/\| N = 20 +\|/)
      expect(fs.readFileSync(paths.svgPath, 'utf8')).toMatch(/^<svg[^>]*>[\s\S]*<circle[\s\S]*<\/svg>\n$/)
    } finally {
      fs.rmSync(out, { recursive: true, force: true })
    }
  }, 90000)
})

describe('control plane at 300 members', () => {
  let cluster = null
  afterEach(async () => {
    if (cluster) await cluster.close()
    cluster = null
  })

  test('≥ 300 fake members joining at once are all registered and acknowledged within a deadline with no lapses', async () => {
    const servers = 300
    const frontends = 4
    cluster = await ControlPlaneCluster.start({ controllerOptions: { startupFenceMs: 0 }, clusterToken: TOKEN, procs: [150, 150] })
    await cluster.fakes[1].spawn(Array.from({ length: frontends }, (_, i) => `fe${i}`), 'frontend')
    await Promise.all(cluster.fakes.map((f, p) => f.spawn(Array.from({ length: servers / 2 }, (_, i) => `s${p}-${i}`))))
    const done = await pollUntil(async () => {
      try {
        const s = await cluster.sample({ servers, frontends })
        return s.converged ? s : undefined
      } catch {
        return undefined // the controller did not answer its stats in time: look again
      }
    }, { timeoutMs: 60000, intervalMs: 100, what: `${servers} members and ${frontends} front ends registered and acknowledged` })
    expect(done.held).toMatchObject({ serversRegistered: servers, serversHolding: servers, frontendsHolding: frontends })
    const { counters } = await cluster.fakeStats()
    const stats = (await cluster.controllerStats()).stats
    expect({ leaseExpiries: stats.leaseExpiries ?? 0, evictions: stats.evictions ?? 0, notFound: counters.renewals.notFound, localLapses: counters.localLapses })
      .toEqual({ leaseExpiries: 0, evictions: 0, notFound: 0, localLapses: 0 })
    // Each registered over the lease stream it opened, and its maps came that way: HTTP pushes went to front ends only.
    expect(stats.streams).toMatchObject({ open: servers, registrations: servers })
    expect(stats.pushes.messages - stats.pushes.streamed).toBeLessThanOrEqual(counters.pushes.frontendMessages)
  }, 120000)
})
