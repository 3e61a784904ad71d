'use strict'

const axios = require('axios')

/**
 * Collects each app server's per-range request counts
 * (GET <controlUrl>/v1/load). Reads are not destructive: each server keeps
 * counts until the controller acknowledges the report that carried them
 * (appserver-lib/load-ledger.js), so a lost answer is read again next period
 * and nothing is lost or counted twice. A server whose collection fails has
 * *unknown* load, never zero.
 */
class LoadCollector {
  constructor ({ timeoutMs = 2000 } = {}) {
    this.http = axios.create({ timeout: timeoutMs })
    this.acks = new Map() // server id -> { instance, seq } of the last report used
  }

  /**
   * @param {Map<string, {controlUrl: string}>} servers
   * @returns {Promise<{ reports: Map<string, {start,end,count}[]>, perServer: Record<string, number>, failed: {id, error}[] }>}
   *   reports: per server, counts per period (divided by the periods a report spans)
   */
  async collect (servers) {
    const ids = [...servers.keys()]
    const results = await Promise.allSettled(ids.map(async (id) => {
      const ack = this.acks.get(id)
      const params = ack ? { instance: ack.instance, seq: ack.seq } : {}
      const { data } = await this.http.get(`${servers.get(id).controlUrl}/v1/load`, { params })
      if (!data || !Array.isArray(data.entries)) throw new Error('malformed load report')
      return data
    }))
    const reports = new Map()
    const perServer = {}
    const failed = []
    results.forEach((r, i) => {
      const id = ids[i]
      if (r.status !== 'fulfilled') {
        failed.push({ id, error: r.reason.code || r.reason.message })
        return
      }
      const data = r.value
      const frames = Number.isSafeInteger(data.frames) && data.frames > 0 ? data.frames : 1
      const entries = []
      let total = 0
      for (const e of data.entries) {
        if (Number.isFinite(e.start) && Number.isFinite(e.end) && Number.isFinite(e.count) && e.count > 0) {
          entries.push({ start: e.start, end: e.end, count: e.count / frames })
          total += e.count / frames
        }
      }
      reports.set(id, entries)
      perServer[id] = total
      if (typeof data.instance === 'string' && Number.isSafeInteger(data.seq)) this.acks.set(id, { instance: data.instance, seq: data.seq })
    })
    return { reports, perServer, failed }
  }

  forget (id) {
    this.acks.delete(id)
  }
}

module.exports = { LoadCollector }
