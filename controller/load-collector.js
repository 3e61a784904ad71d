'use strict'

const axios = require('axios')

/**
 * Collects each app server's per-range request counts for the last period
 * (GET <controlUrl>/v1/load, which also resets the server's counters).
 */
class LoadCollector {
  constructor ({ timeoutMs = 2000 } = {}) {
    this.http = axios.create({ timeout: timeoutMs })
  }

  /**
   * @param {Map<string, {controlUrl: string}>} servers
   * @returns {Promise<{ entries: {start,end,count}[], perServer: Record<string, number>, failed: {id, error}[] }>}
   */
  async collect (servers) {
    const results = await Promise.allSettled([...servers].map(async ([id, s]) => {
      const { data } = await this.http.get(`${s.controlUrl}/v1/load`)
      if (!data || !Array.isArray(data.entries)) throw new Error('malformed load report')
      return { id, entries: data.entries }
    }))
    const entries = []
    const perServer = {}
    const failed = []
    const ids = [...servers.keys()]
    results.forEach((r, i) => {
      if (r.status === 'fulfilled') {
        let total = 0
        for (const e of r.value.entries) {
          if (Number.isFinite(e.start) && Number.isFinite(e.end) && Number.isFinite(e.count) && e.count > 0) {
            entries.push({ start: e.start, end: e.end, count: e.count })
            total += e.count
          }
        }
        perServer[ids[i]] = total
      } else {
        failed.push({ id: ids[i], error: r.reason.code || r.reason.message })
      }
    })
    return { entries, perServer, failed }
  }
}

module.exports = { LoadCollector }
