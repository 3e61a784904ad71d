'use strict'

const { JsonClient } = require('../core/json-client')
const { validHot } = require('../core/hot-keys')
const { MalformedBodyError } = require('../core/errors')

/**
 * How long a controller's round waits for load reports, before the request
 * timeout caps it: half a period, at least 50 ms.
 * @param {number} periodMs
 */
function roundWaitMs (periodMs) {
  return Math.max(50, Math.floor(periodMs / 2))
}

/**
 * Collects each app server's per-range request counts and cost (busy ms):
 * over the member's lease stream when it serves load there, else by
 * GET <controlUrl>/v1/load. Reads are not destructive: each server keeps
 * counts until the controller acknowledges the report that carried them
 * (appserver-lib/load-ledger.js), so a lost answer is read again next period
 * and nothing is lost or counted twice. A server whose collection fails has
 * *unknown* load, never zero. A report from an older app server has no
 * `cost`: its entries parse with cost 0, and its id is listed in `costless`.
 * An entry's `hot` (its slice's majority vote over request keys,
 * core/hot-keys.js) is kept when it is plausible: a key in the entry's range,
 * with no more votes than requests.
 *
 * Slow is not failed. A round waits at most `waitMs` for the answers; a
 * server that has not answered by then is listed in `slow` (its load is
 * unknown this round) and its request stays in flight, up to `timeoutMs`.
 * The next round takes its answer if it came (a report is never lost: the
 * server kept the counts), and asks it again only once that request settled.
 * Only a request that fails (an error, or no answer within `timeoutMs`) is
 * listed in `failed`, which is what the controller counts towards eviction.
 * A busy app server's control port (a saturated machine lags every event
 * loop by hundreds of ms) is thus not mistaken for an unreachable one.
 */
const CHUNK = 128
// A server that left while its round's requests were being made: no request, no report.
const GONE = { settled: null, done: Promise.resolve() }

class LoadCollector {
  /**
   * @param {{ timeoutMs?: number, waitMs?: number, clusterToken?: string }} [options]
   *   timeoutMs: a collection that has not answered by then has failed;
   *   waitMs (default timeoutMs): how long one round waits for the answers;
   *   clusterToken: sign every collection with it
   */
  constructor ({ timeoutMs = 2000, waitMs = timeoutMs, clusterToken } = {}) {
    this.http = new JsonClient({ timeoutMs, clusterToken })
    this.waitMs = Math.min(waitMs, timeoutMs)
    this.acks = new Map() // server id -> { instance, seq } of the last report used
    this.inFlight = new Map() // server id -> { settled: null | { ok, data?, error? }, done: Promise<void> }
    // (id, ack, timeoutMs) => Promise<report> | null: a member's report over its
    // lease stream (controller/lease-streams.js), null when it has none (HTTP then).
    this.viaStream = null
    this.stats = { stream: 0, http: 0 }
  }

  #request (id, controlUrl) {
    const ack = this.acks.get(id) // the last report used: the server may drop what it carried
    const query = ack ? { instance: ack.instance, seq: ack.seq } : undefined
    const call = { settled: null, done: null }
    const streamed = this.viaStream && this.viaStream(id, ack, this.http.timeoutMs)
    if (streamed) this.stats.stream++
    else this.stats.http++
    const report = streamed || this.http.get(`${controlUrl}/v1/load`, { query }).then(({ data }) => data)
    call.done = report.then((data) => {
      if (!data || !Array.isArray(data.entries)) throw new MalformedBodyError('malformed load report: expected { entries: [...] }')
      call.settled = { ok: true, data }
    }).catch((err) => {
      call.settled = { ok: false, err }
    })
    return call
  }

  /**
   * @param {Map<string, {controlUrl: string}>} servers
   * @returns {Promise<{ reports: Map<string, {start,end,count,cost}[]>, perServer: Record<string, {requests: number, cost: number}>, failed: {id, err}[], slow: string[], costless: string[] }>}
   *   reports: per server, counts and cost per period (divided by the periods a report spans);
   *   slow: no answer within waitMs, its request still in flight (neither reported nor failed)
   */
  async collect (servers) {
    const ids = [...servers.keys()]
    const calls = []
    for (let i = 0; i < ids.length; i++) {
      // Thousands of signed requests made in one go hold the event loop for
      // most of a second, and renewals with it: a turn of the loop every CHUNK.
      if (i > 0 && i % CHUNK === 0) await new Promise((resolve) => setImmediate(resolve))
      const id = ids[i]
      const server = servers.get(id)
      if (!server) {
        calls.push(GONE) // left while the requests were being made
        continue
      }
      let call = this.inFlight.get(id)
      if (!call) this.inFlight.set(id, (call = this.#request(id, server.controlUrl)))
      calls.push(call)
    }
    const all = Promise.all(calls.map((c) => c.done))
    if (this.waitMs >= this.http.timeoutMs) {
      await all // every call settles within its timeout: no call is left slow
    } else {
      let timer
      await Promise.race([all, new Promise((resolve) => { timer = setTimeout(resolve, this.waitMs) })])
      clearTimeout(timer)
    }
    const reports = new Map()
    const perServer = {}
    const failed = []
    const slow = []
    const costless = []
    calls.forEach((call, i) => {
      const id = ids[i]
      if (call === GONE) return
      if (!call.settled) {
        slow.push(id) // still in flight: a later round takes its answer
        return
      }
      this.inFlight.delete(id)
      if (!call.settled.ok) {
        failed.push({ id, err: call.settled.err })
        return
      }
      const data = call.settled.data
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
    return { reports, perServer, failed, slow, costless }
  }

  /** Drop a server's ack and any collection of it in flight (its answer is ignored). */
  forget (id) {
    this.acks.delete(id)
    this.inFlight.delete(id)
  }

  /** Close the pool now: a collection in flight rejects. */
  async close () {
    await this.http.destroy()
  }
}

module.exports = { LoadCollector, roundWaitMs }
