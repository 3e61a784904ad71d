'use strict'

const { JsonClient } = require('../core/json-client')
const { validHot } = require('../core/hot-keys')

/**
 * Collects each app server's per-range request counts and cost (busy ms)
 * (GET <controlUrl>/v1/load). Reads are not destructive: each server keeps
 * counts until the controller acknowledges the report that carried them
 * (appserver-lib/load-ledger.js), so a lost answer is read again next period
 * and nothing is lost or counted twice. A server whose collection fails has
 * *unknown* load, never zero. A report from an older app server has no
 * `cost`: its entries parse with cost 0, and its id is listed in `costless`.
 * An entry's `hot` (its slice's majority vote over request keys,
 * core/hot-keys.js) is kept when it is plausible: a key in the entry's range,
 * with no more votes than requests.
 */
class LoadCollector {
  /** @param {{ timeoutMs?: number, clusterToken?: string }} [options] clusterToken: sign every collection with it */
  constructor ({ timeoutMs = 2000, clusterToken } = {}) {
    this.http = new JsonClient({ timeoutMs, clusterToken })
    this.acks = new Map() // server id -> { instance, seq } of the last report used
  }

  /**
   * @param {Map<string, {controlUrl: string}>} servers
   * @returns {Promise<{ reports: Map<string, {start,end,count,cost}[]>, perServer: Record<string, {requests: number, cost: number}>, failed: {id, error}[], costless: string[] }>}
   *   reports: per server, counts and cost per period (divided by the periods a report spans)
   */
  async collect (servers) {
    const ids = [...servers.keys()]
    const results = await Promise.allSettled(ids.map(async (id) => {
      const ack = this.acks.get(id)
      const query = ack ? { instance: ack.instance, seq: ack.seq } : undefined
      const { data } = await this.http.get(`${servers.get(id).controlUrl}/v1/load`, { query })
      if (!data || !Array.isArray(data.entries)) throw new Error('malformed load report')
      return data
    }))
    const reports = new Map()
    const perServer = {}
    const failed = []
    const costless = []
    results.forEach((r, i) => {
      const id = ids[i]
      if (r.status !== 'fulfilled') {
        failed.push({ id, error: r.reason.code || r.reason.message })
        return
      }
      const data = r.value
      const frames = Number.isSafeInteger(data.frames) && data.frames > 0 ? data.frames : 1
      const entries = []
      let requests = 0
      let cost = 0
      let hasCost = true
      for (const e of data.entries) {
        if (!e || !Number.isFinite(e.start) || !Number.isFinite(e.end)) continue
        const n = Number.isFinite(e.count) && e.count > 0 ? e.count / frames : 0
        if (e.cost === undefined) hasCost = false
        const c = Number.isFinite(e.cost) && e.cost > 0 ? e.cost / frames : 0
        // requests that finished (and so carried their cost); older reports lack it
        // (a report without `done` predates it: its requests carried their cost)
        const d = Number.isFinite(e.done) && e.done > 0 ? e.done / frames : (e.done === undefined ? n : 0)
        if (n > 0 || c > 0 || d > 0) {
          const entry = { start: e.start, end: e.end, count: n, cost: c, done: d }
          // the slice's hottest key (core/hot-keys.js); votes per period, like the counts
          if (validHot(e) && e.hot.votes <= e.count) entry.hot = { key: e.hot.key, votes: e.hot.votes / frames }
          entries.push(entry)
          requests += n
          cost += c
        }
      }
      if (!hasCost) costless.push(id)
      reports.set(id, entries)
      perServer[id] = { requests, cost }
      if (typeof data.instance === 'string' && Number.isSafeInteger(data.seq)) this.acks.set(id, { instance: data.instance, seq: data.seq })
    })
    return { reports, perServer, failed, costless }
  }

  forget (id) {
    this.acks.delete(id)
  }

  /** Close the pool now: a collection in flight rejects. */
  async close () {
    await this.http.destroy()
  }
}

module.exports = { LoadCollector }
