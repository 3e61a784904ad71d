'use strict'

const { InvalidArgumentError } = require('../../core/errors')

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
 *   `host` and `peers`, each way, at random (`numgen random`).
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
    if (!Array.isArray(peers) || peers.length === 0) throw new InvalidArgumentError('invalid peers: expected a list of host names')
    const set = `{ ${peers.map((p) => this.network.ip(p)).join(', ')} }`
    return this.#add(host, [
      ['output', `ip daddr ${set} numgen random mod 100 < ${percent} drop`],
      ['input', `ip saddr ${set} numgen random mod 100 < ${percent} drop`]
    ], `${percent}% loss ${host} <-> ${peers.join(',')}`)
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
    const chain = (name) => `  chain ${name} {\n    type filter hook ${name} priority 0; policy accept;\n${list.filter((r) => r.chain === name).map((r) => `    ${r.rule}\n`).join('')}  }\n`
    const script = 'table inet chaos\ndelete table inet chaos\n' +
      (list.length ? `table inet chaos {\n${chain('input')}${chain('output')}}\n` : '')
    return this.network.nft(host, script)
  }
}

module.exports = { NetRules }
