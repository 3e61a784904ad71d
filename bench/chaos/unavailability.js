'use strict'

const { isSuccess } = require('./load')

/**
 * The unavailability window of each key in a phase: the longest run of its
 * requests (load and probes, in the order they were sent) that failed or
 * were held longer than `heldMs`, from the first one's send to the last
 * one's answer. A key with no such request has no window. Returns the worst
 * key and its window, how many keys had one, and their median.
 *
 * @param {object[]} records the phase's request records (bench/chaos/load.js)
 * @param {{ heldMs?: number }} [options] a request answered later than this counts as held (default 1000 ms)
 * @returns {{ maxMs: number|null, key: string|null, keys: number, p50Ms: number|null }}
 */
function unavailability (records, { heldMs = 1000 } = {}) {
  const byKey = new Map()
  for (const r of records) {
    if (!byKey.has(r.key)) byKey.set(r.key, [])
    byKey.get(r.key).push(r)
  }
  const windows = []
  for (const [key, list] of byKey) {
    list.sort((a, b) => a.call - b.call)
    let start = null
    let end = 0
    let worst = 0
    for (const r of list) {
      const ret = r.ret === null ? r.call : r.ret
      const bad = !isSuccess(r) || ret - r.call > heldMs
      if (bad) {
        if (start === null) start = r.call
        end = Math.max(end, ret)
        worst = Math.max(worst, end - start)
      } else if (start !== null) {
        start = null // served again: the run is over
        end = 0
      }
    }
    if (worst > 0) windows.push({ key, ms: worst })
  }
  if (windows.length === 0) return { maxMs: null, key: null, keys: 0, p50Ms: null }
  windows.sort((a, b) => a.ms - b.ms)
  const top = windows[windows.length - 1]
  return { maxMs: Math.round(top.ms), key: top.key, keys: windows.length, p50Ms: Math.round(windows[Math.floor((windows.length - 1) / 2)].ms) }
}

module.exports = { unavailability }
