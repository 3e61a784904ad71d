'use strict'

const { InvalidArgumentError } = require('../../core/errors')

const IPV4 = /^\d{1,3}(?:\.\d{1,3}){3}$/
// The chains of a host's table: filtering both ways, and NAT of what it sends.
const CHAINS = Object.freeze({
  input: 'filter hook input priority 0',
  output: 'filter hook output priority 0',
  natout: 'nat hook output priority -100'
})

/**
 * Network faults between the hosts of a bench/chaos/netns.js network, as
 * nftables rules in the hosts' namespaces (one `inet chaos` table per host,
 * rewritten whole, atomically, on every change):
 *
 * - `cut(a, b)`: nothing passes between a and b, either way, on any
 *   connection, old or new.
 * - `block(from, to)`: a one-way partition. `from` cannot reach `to`:
 *   every packet of a connection `from` opened to `to` is dropped (conntrack's
 *   `ct direction original`, so connections kept alive from before are cut
 *   too, not only new ones). Connections `to` opens to `from` work both ways.
 * - `loss(host, percent, peers)`: drop that share of the packets between
 *   `host` and `peers` (host names or addresses), each way, at random
 *   (`numgen random`).
 * - `redirect(host, targets)`: new connections from `host` to an address
 *   and port go elsewhere (DNAT), for a delay proxy in the path.
 *
 * Each returns a handle whose `heal()` removes that fault alone; `healAll()`
 * removes every one.
 */
class NetRules {
  constructor (network) {
    this.network = network
    this.rules = new Map() // host -> [{ id, chain, rule }]
    this.seq = 0
  }

  cut (a, b) {
    const ipB = this.network.ip(b)
    return this.#add(a, [['output', `ip daddr ${ipB} drop`], ['input', `ip saddr ${ipB} drop`]], `cut ${a} <-> ${b}`)
  }

  block (from, to) {
    return this.#add(from, [['output', `ip daddr ${this.network.ip(to)} ct direction original drop`]], `block ${from} -> ${to}`)
  }

  loss (host, percent, peers) {
    if (!(Number.isInteger(percent) && percent > 0 && percent < 100)) throw new InvalidArgumentError(`invalid percent: expected an integer from 1 to 99, got ${JSON.stringify(percent)}`)
    if (!Array.isArray(peers) || peers.length === 0) throw new InvalidArgumentError('invalid peers: expected a list of host names or addresses')
    const set = `{ ${peers.map((p) => (IPV4.test(p) ? p : this.network.ip(p))).join(', ')} }`
    return this.#add(host, [
      ['output', `ip daddr ${set} numgen random mod 100 < ${percent} drop`],
      ['input', `ip saddr ${set} numgen random mod 100 < ${percent} drop`]
    ], `${percent}% loss ${host} <-> ${peers.join(',')}`)
  }

  /**
   * Send `host`'s new TCP connections to each `{ ip, port }` to `{ to, toPort }`
   * instead (DNAT), and reset its connections to them from before, so every
   * connection from then on takes the detour (a delay proxy).
   */
  redirect (host, targets) {
    const rules = []
    for (const t of targets) {
      rules.push(['natout', `ip daddr ${t.ip} tcp dport ${t.port} dnat ip to ${t.to}:${t.toPort}`])
      // After the DNAT only connections from before still head there.
      rules.push(['output', `ip daddr ${t.ip} tcp dport ${t.port} reject with tcp reset`])
    }
    return this.#add(host, rules, `redirect ${host} -> ${targets.map((t) => `${t.ip}:${t.port} via ${t.to}:${t.toPort}`).join(', ')}`)
  }

  async healAll () {
    const hosts = [...this.rules.keys()]
    this.rules.clear()
    for (const h of hosts) await this.#apply(h)
  }

  async #add (host, chains, what) {
    const id = ++this.seq
    const list = this.rules.get(host) || []
    for (const [chain, rule] of chains) list.push({ id, chain, rule })
    this.rules.set(host, list)
    await this.#apply(host)
    return {
      what,
      heal: async () => {
        const now = (this.rules.get(host) || []).filter((r) => r.id !== id)
        if (now.length) this.rules.set(host, now)
        else this.rules.delete(host)
        await this.#apply(host)
      }
    }
  }

  /** Replace host's table with its current rules (declared first, so the delete never fails). */
  #apply (host) {
    const list = this.rules.get(host) || []
    const chain = (name) => `  chain ${name} {\n    type ${CHAINS[name]}; policy accept;\n${list.filter((r) => r.chain === name).map((r) => `    ${r.rule}\n`).join('')}  }\n`
    const script = 'table inet chaos\ndelete table inet chaos\n' +
      (list.length ? `table inet chaos {\n${Object.keys(CHAINS).map(chain).join('')}}\n` : '')
    return this.network.nft(host, script)
  }
}

module.exports = { NetRules }
