'use strict'

const net = require('node:net')
const { execFileSync } = require('node:child_process')
const { createNetwork, netnsSupport } = require('../../bench/chaos/netns')
const { NetRules } = require('../../bench/chaos/net-rules')
const { pollUntil } = require('../../core/poll')

// Test hosts in network namespaces, and partitions between them. Needs root,
// iproute2 and nftables (CI has all three: .ci/run installs nftables).
const support = netnsSupport()
if (!support.ok) process.stderr.write(`test/chaos/netns.test.js skipped: ${support.reason}\n`)
const describeNetns = support.ok ? describe : describe.skip

// A server on every host, port 7000, that answers each line with "<host> <line>"
// (a line starting "later" a second later, as a push from the server);
// and a client that keeps one connection and reports what each line gets.
const SERVER = `
const host = process.argv[1]
require('node:net').createServer((s) => {
  s.setEncoding('utf8')
  s.on('data', (d) => {
    for (const l of d.split('\\n').filter(Boolean)) {
      if (l.startsWith('later')) setTimeout(() => s.write(host + ' ' + l + '\\n'), 1000)
      else s.write(host + ' ' + l + '\\n')
    }
  })
  s.on('error', () => {})
}).listen(7000, process.argv[2], () => process.stdout.write('ready\\n'))
`
/** One connection attempt from `host` to `ip`:7000 with `ms` to answer: the answer, or the error's code. */
async function reach (network, host, ip, ms = 400) {
  const script = `const s = require('node:net').connect(7000, '${ip}'); const t = setTimeout(() => { console.log('TIMEOUT'); process.exit(0) }, ${ms});
s.on('data', (d) => { console.log(String(d).trim()); process.exit(0) }); s.on('error', (e) => { console.log(e.code); process.exit(0) }); s.write('ping\\n')`
  const { stdout } = await network.exec(host, process.execPath, ['-e', script])
  return stdout.trim()
}

describeNetns('bench/chaos/netns: hosts in network namespaces, and partitions between them', () => {
  let network
  let rules
  beforeAll(async () => {
    network = await createNetwork({ hosts: ['a', 'b', 'c'] })
    rules = new NetRules(network)
    for (const h of ['a', 'b', 'c']) {
      const child = network.spawn(h, process.execPath, ['-e', SERVER, h, network.ip(h)], { stdio: ['ignore', 'pipe', 'inherit'] })
      await new Promise((resolve) => child.stdout.once('data', resolve))
    }
  }, 30000)
  afterAll(async () => {
    if (!network) return
    const names = [...network.hosts.values()].map((h) => h.ns)
    await network.close()
    const left = execFileSync('ip', ['netns', 'list']).toString()
    for (const ns of names) expect(left).not.toContain(ns)
    expect(execFileSync('ip', ['link', 'show']).toString()).not.toContain(network.bridge)
  })
  afterEach(() => rules && rules.healAll())

  test('one address per host: each reaches the others and the root namespace reaches each', async () => {
    expect(new Set([...network.hosts.values()].map((h) => h.ip)).size).toBe(3)
    expect(await reach(network, 'a', network.ip('b'))).toBe('b ping')
    expect(await reach(network, 'b', network.ip('c'))).toBe('c ping')
    expect(await reach(network, 'c', network.ip('a'))).toBe('a ping')
    const answer = await new Promise((resolve, reject) => {
      const s = net.connect(7000, network.ip('b'))
      s.once('data', (d) => { resolve(String(d).trim()); s.destroy() })
      s.once('error', reject)
      s.write('root\n')
    })
    expect(answer).toBe('b root')
  })

  test('cut: nothing passes between two hosts, either way; a third still reaches both; heal restores it', async () => {
    const cut = await rules.cut('a', 'b')
    expect(await reach(network, 'a', network.ip('b'))).toBe('TIMEOUT')
    expect(await reach(network, 'b', network.ip('a'))).toBe('TIMEOUT')
    expect(await reach(network, 'c', network.ip('a'))).toBe('a ping')
    expect(await reach(network, 'a', network.ip('c'))).toBe('c ping')
    await cut.heal()
    expect(await reach(network, 'a', network.ip('b'))).toBe('b ping')
  })

  test('block: a one-way partition cuts what a opens to b (a kept-alive connection too), not what b opens to a', async () => {
    // A connection a opened before the fault: it must stop carrying data as well.
    const script = `const s = require('node:net').connect(7000, '${network.ip('b')}'); s.setEncoding('utf8')
s.on('data', (d) => process.stdout.write(d)); process.stdin.on('data', (d) => s.write(d))`
    const kept = network.spawn('a', process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] })
    let got = ''
    kept.stdout.on('data', (d) => { got += d })
    kept.stdin.write('one\n')
    await pollUntil(() => got.includes('b one'), { timeoutMs: 5000, what: 'the kept connection to answer' })
    // The first packet after the rule is b's (a push): the connection is still a's, so a's next line is cut.
    kept.stdin.write('later\n')
    const block = await rules.block('a', 'b')
    await pollUntil(() => got.includes('b later'), { timeoutMs: 5000, what: 'the push from b' })
    expect(await reach(network, 'a', network.ip('b'))).toBe('TIMEOUT')
    expect(await reach(network, 'b', network.ip('a'))).toBe('a ping')
    kept.stdin.write('two\n')
    expect(await reach(network, 'c', network.ip('b'))).toBe('b ping') // a bounded wait for 'two' to have been lost
    expect(got).not.toContain('b two')
    await block.heal()
    // TCP retransmits what was dropped once the path is back.
    await pollUntil(() => got.includes('b two'), { timeoutMs: 10000, what: 'the kept connection to recover' })
    kept.kill()
  }, 20000)

  test('loss: a share of the packets between two hosts is dropped at random', async () => {
    await rules.loss('a', 50, ['b'])
    const { stdout } = await network.exec('a', 'nft', ['list', 'table', 'inet', 'chaos'])
    expect(stdout).toMatch(/numgen random mod 100 < 50 .*drop/)
    await rules.healAll()
    const after = await network.exec('a', 'nft', ['list', 'ruleset'])
    expect(after.stdout).not.toContain('chaos')
  })
})
