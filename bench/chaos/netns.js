'use strict'

const fs = require('node:fs')
const { spawn, execFile, execFileSync } = require('node:child_process')
const { promisify } = require('node:util')
const { InvalidArgumentError, InternalError } = require('../../core/errors')

const run = promisify(execFile)

/**
 * Test hosts in Linux network namespaces (docs/network-faults.md): one
 * namespace per host, each with a veth pair whose other end is on one
 * bridge, and one IPv4 address per host on a /24. The process that creates
 * the network stays in the root namespace and reaches every host through the
 * bridge's own address (the first of the /24). Faults are nftables rules in
 * a host's namespace (bench/chaos/net-rules.js).
 *
 * Names carry the creating process's pid (`ch<pid>-<host>`, bridge
 * `bch<pid>`, veths `vch<pid>x<n>`), so a later run can remove what a
 * killed run left behind (`sweepStale`). `close()` kills every process
 * started on a host and deletes the namespaces and the bridge; it runs on
 * process exit too, so a run that fails still leaves nothing behind.
 */

let probed = null

/**
 * Whether namespaces can be made here: `{ ok: true }`, or `{ ok: false,
 * reason }` naming what is missing (root, ip, nft, or the kernel's support).
 */
function netnsSupport () {
  if (probed) return probed
  const has = (cmd) => ['/usr/sbin', '/sbin', '/usr/bin', '/bin'].some((d) => fs.existsSync(`${d}/${cmd}`))
  if (process.platform !== 'linux') probed = { ok: false, reason: 'network namespaces need Linux' }
  else if (typeof process.getuid !== 'function' || process.getuid() !== 0) probed = { ok: false, reason: 'network namespaces need root (CI runs as root)' }
  else if (!has('ip')) probed = { ok: false, reason: '`ip` (iproute2) is not installed' }
  else if (!has('nft')) probed = { ok: false, reason: '`nft` is not installed (apt-get install nftables; .ci/run does)' }
  else {
    const name = `ch${process.pid}-probe`
    try {
      execFileSync('ip', ['netns', 'add', name], { stdio: 'pipe' })
      execFileSync('ip', ['netns', 'exec', name, 'nft', 'list', 'ruleset'], { stdio: 'pipe' })
      probed = { ok: true }
    } catch (err) {
      probed = { ok: false, reason: `ip netns does not work here: ${String(err.stderr || err.message).trim()}` }
    } finally {
      try { execFileSync('ip', ['netns', 'del', name], { stdio: 'pipe' }) } catch {}
    }
  }
  return probed
}

function alive (pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return err.code === 'EPERM'
  }
}

/** Delete namespaces and bridges left by runs whose process is gone. */
function sweepStale () {
  const gone = (pid) => Number(pid) !== process.pid && !alive(Number(pid))
  let list = ''
  try { list = execFileSync('ip', ['netns', 'list'], { stdio: 'pipe' }).toString() } catch { return }
  for (const line of list.split('\n')) {
    const m = /^(ch(\d+)-[\w-]+)/.exec(line)
    if (m && gone(m[2])) {
      killAllIn(m[1])
      del(['netns', 'del', m[1]])
    }
  }
  const links = execFileSync('ip', ['-o', 'link', 'show', 'type', 'bridge'], { stdio: 'pipe' }).toString()
  for (const m of links.matchAll(/^\d+: (bch(\d+)):/gm)) if (gone(m[2])) del(['link', 'del', m[1]])
}

function del (args) {
  try { execFileSync('ip', args, { stdio: 'pipe' }) } catch {}
}

/** SIGKILL every process inside namespace `ns`. */
function killAllIn (ns) {
  let pids = []
  try { pids = execFileSync('ip', ['netns', 'pids', ns], { stdio: 'pipe' }).toString().split(/\s+/).filter(Boolean).map(Number) } catch {}
  for (const pid of pids) {
    try { process.kill(pid, 'SIGKILL') } catch {}
  }
}

/** A /24 in 10.0.0.0/8 that no interface here uses. */
function freeSubnet () {
  const used = execFileSync('ip', ['-o', '-4', 'addr', 'show'], { stdio: 'pipe' }).toString()
  for (let i = 0; i < 64; i++) {
    const net = `10.${200 + ((process.pid + i) % 50)}.${(process.pid * 7 + i * 13) % 256}`
    if (!used.includes(` ${net}.`)) return net
  }
  throw new InternalError('no free /24 in 10.200.0.0 to 10.249.255.0')
}

/**
 * Build the network: one host per name in `hosts`.
 * @param {{ hosts: string[] }} options
 * @returns {Promise<Network>}
 */
async function createNetwork ({ hosts }) {
  const support = netnsSupport()
  if (!support.ok) throw new InternalError(`cannot build test hosts: ${support.reason}`)
  if (!Array.isArray(hosts) || hosts.length === 0 || hosts.length > 200) throw new InvalidArgumentError('invalid hosts: expected 1 to 200 host names')
  for (const h of hosts) if (!/^[a-z][a-z0-9-]{0,15}$/.test(h)) throw new InvalidArgumentError(`invalid hosts: ${JSON.stringify(h)} is not a short lower-case name`)
  sweepStale()
  const tag = process.pid
  const subnet = freeSubnet()
  const bridge = `bch${tag}`
  const network = new Network({ tag, subnet, bridge })
  process.once('exit', network.closeSync)
  try {
    await run('ip', ['link', 'add', bridge, 'type', 'bridge'])
    network.bridgeUp = true
    await run('ip', ['addr', 'add', `${subnet}.1/24`, 'dev', bridge])
    await run('ip', ['link', 'set', bridge, 'up'])
    for (const [i, name] of hosts.entries()) await network.addHost(name, i + 2)
  } catch (err) {
    network.closeSync()
    throw err
  }
  return network
}

class Network {
  constructor ({ tag, subnet, bridge }) {
    this.tag = tag
    this.subnet = subnet
    this.bridge = bridge
    this.bridgeUp = false
    this.address = `${subnet}.1` // this process, in the root namespace
    this.hosts = new Map() // name -> { name, ns, ip }
    this.children = new Set()
    this.closed = false
    this.closeSync = () => this.#teardown()
  }

  async addHost (name, n) {
    const ns = `ch${this.tag}-${name}`
    const veth = `vch${this.tag}x${n}`
    await run('ip', ['netns', 'add', ns])
    this.hosts.set(name, { name, ns, ip: `${this.subnet}.${n}` })
    await run('ip', ['link', 'add', veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns])
    await run('ip', ['link', 'set', veth, 'master', this.bridge, 'up'])
    await run('ip', ['-n', ns, 'addr', 'add', `${this.subnet}.${n}/24`, 'dev', 'eth0'])
    await run('ip', ['-n', ns, 'link', 'set', 'eth0', 'up'])
    await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up'])
    // Connection tracking from the first packet on. A namespace only tracks
    // connections once a rule there needs it, and a connection it first sees
    // mid-stream gets its direction from whichever packet comes first: a
    // member's lease stream picked up on a push from the controller would
    // count as the controller's, and `ct direction original` would not cut it.
    await this.nft(name, 'table inet conntrack {\n  chain output {\n    type filter hook output priority -300; policy accept;\n    ct state new counter\n  }\n}\n')
  }

  host (name) {
    const h = this.hosts.get(name)
    if (!h) throw new InvalidArgumentError(`unknown host ${JSON.stringify(name)}`)
    return h
  }

  ip (name) { return this.host(name).ip }

  /** Start `command` on host `name` (child_process.spawn options); killed by close(). */
  spawn (name, command, args = [], options = {}) {
    const child = spawn('ip', ['netns', 'exec', this.host(name).ns, command, ...args], options)
    this.children.add(child)
    child.once('exit', () => this.children.delete(child))
    return child
  }

  /** Run `command` on host `name` to completion; resolves { stdout, stderr }. */
  exec (name, command, args = [], options = {}) {
    return run('ip', ['netns', 'exec', this.host(name).ns, command, ...args], options)
  }

  /** Load an nftables script into host `name`'s namespace. */
  async nft (name, script) {
    const child = spawn('ip', ['netns', 'exec', this.host(name).ns, 'nft', '-f', '-'], { stdio: ['pipe', 'ignore', 'pipe'] })
    let err = ''
    child.stderr.on('data', (d) => { err += d })
    child.stdin.end(script)
    const code = await new Promise((resolve) => child.once('close', resolve))
    if (code !== 0) throw new InternalError(`nft on ${name} failed (${code}): ${err.trim()}\n${script}`)
  }

  /** Kill every process on the hosts, delete the namespaces and the bridge. */
  async close () {
    const exits = [...this.children].map((c) => new Promise((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', resolve))))
    this.#teardown()
    await Promise.race([Promise.all(exits), new Promise((resolve) => setTimeout(resolve, 2000).unref())])
  }

  #teardown () {
    if (this.closed) return
    this.closed = true
    process.removeListener('exit', this.closeSync)
    for (const c of this.children) {
      try { c.kill('SIGKILL') } catch {}
    }
    // `ip netns exec` children are the commands themselves (it execs), but a
    // command may have started others: whatever is left in a namespace goes too.
    for (const h of this.hosts.values()) killAllIn(h.ns)
    for (const h of this.hosts.values()) del(['netns', 'del', h.ns])
    if (this.bridgeUp) del(['link', 'del', this.bridge])
  }
}

module.exports = { createNetwork, netnsSupport, sweepStale, Network }
