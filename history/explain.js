'use strict'

const { PUT, GET, NULL_ID, describeValue, formatMs } = require('./model')

const NEARBY_READS = 64 // gets tried for a two-step argument when the failed one has none

/**
 * Turns the point where the search failed into something a person can check
 * by hand: a sentence built from real-time facts (X finished before the get
 * began, every write of the value finished before X began) and the slice of
 * the history around it. The search result locates the failure; the facts
 * quoted are re-derived here from the history alone, so a message never
 * claims more than the timestamps show. When no such two-step argument
 * exists (the contradiction spans several ops) the message says so.
 */

/**
 * @param {string} key
 * @param {object[]} items the key's operations (after dropping failed ones)
 * @param {{ item: object, setter: object|null, starvedValues: number[] }} stuck the deepest dead end of the search
 * @param {object[]} operations the checker's input, for clients and the quoted slice
 * @param {number} maxSliceOps
 * @returns {{ key: string, message: string, ops: object[] }}
 */
function explainViolation (key, items, stuck, operations, maxSliceOps) {
  let g = stuck.item
  let read = g.kind === GET ? explainRead(items, g) : null
  if (read === null) {
    // The search can stop at a get that is only one side of the contradiction:
    // with two reads in opposite orders either can be blamed, and a stale read
    // of an old value can make the search fail at that value's innocent early
    // readers. Another reader of the same value, or a nearby get, with a
    // two-step argument of its own makes a clearer report.
    const starved = new Map(stuck.starvedValues.map((v, i) => [v, i]))
    const distance = (it) => starved.has(it.valueId)
      ? -2 - (starved.size - starved.get(it.valueId)) // most recently starved first
      : it.valueId === g.valueId ? -1 : Math.abs(it.call - g.call)
    const others = items
      .filter((it) => it.kind === GET && it !== g)
      .sort((a, b) => distance(a) - distance(b) || b.call - a.call || a.index - b.index)
      .slice(0, NEARBY_READS)
    for (const other of others) {
      read = explainRead(items, other)
      if (read !== null) {
        g = other
        break
      }
    }
  }
  const client = (it) => `client ${String(operations[it.index].client)}`
  const span = (it) => `t=${formatMs(it.call)}–${formatMs(it.ret)}`
  const k = JSON.stringify(key)
  const required = [g]
  let start = g.call
  let message

  if (read && read.kind === 'never') {
    message = `get of key ${k} by ${client(g)} returned ${describeValue(g.value)} at ${span(g)}, but ` +
      (read.first
        ? `the first write of it began only at t=${formatMs(read.first.call)} (${client(read.first)})`
        : `${describeValue(g.value)} was never written to key ${k}`)
    if (read.first) required.push(read.first)
  } else if (read) {
    const { x, lastWriter } = read
    const v = describeValue(g.value)
    const evidence = x.kind === GET
      ? `an earlier get by ${client(x)} had already returned ${describeValue(x.value)} at t=${formatMs(x.ret)}`
      : `${x.kind === PUT ? JSON.stringify(x.value) : 'a delete'} was acknowledged at t=${formatMs(x.ret)} (${client(x)})`
    const nothing = g.value === null ? 'nothing concurrent deleted it' : `nothing concurrent wrote ${v}`
    const last = lastWriter
      ? ` (the last ${g.value === null ? 'delete' : `write of ${v}`}, by ${client(lastWriter)}, finished at t=${formatMs(lastWriter.ret)})`
      : ' (the key was never deleted)'
    message = `get of key ${k} by ${client(g)} returned ${v} at ${span(g)}, but ${evidence} and ${nothing}${last}`
    required.push(x)
    if (lastWriter) required.push(lastWriter)
    start = x.call
  } else {
    const s = stuck.setter
    const stateValue = s ? s.value : null
    message = g.kind === GET
      ? `get of key ${k} by ${client(g)} returned ${describeValue(g.value)} at ${span(g)}, but no order of the ` +
        `operations around it explains that value (the search got furthest with ${describeValue(stateValue)} in the key` +
        (s ? `, ${s.kind === PUT ? 'written' : 'deleted'} by ${client(s)} at ${span(s)})` : ')')
      : `${g.kind === PUT ? `put of ${JSON.stringify(g.value)}` : 'delete'} on key ${k} by ${client(g)} at ${span(g)} ` +
        'cannot be ordered consistently with the operations around it'
    if (s) {
      required.push(s)
      start = Math.min(start, s.call)
    }
  }
  const end = Number.isFinite(g.ret) ? g.ret : g.call
  return { key, message, ops: slice(items, required, start, end, g, operations, maxSliceOps) }
}

/**
 * The two-step argument for a get G returning v, if there is one:
 * - 'never': no write of v began before G returned;
 * - 'overwritten': some op X finished before G began, X wrote or read a value
 *   other than v, and every write of v that began before G returned had
 *   finished before X began. Then X is ordered after all of them and G after
 *   X, so G cannot return v. Unique written values make this the usual case.
 */
function explainRead (items, g) {
  const v = g.valueId
  let lastWriter = null
  let lastEnd = -Infinity // null is the initial state: "written" before everything
  let first = null
  let writers = 0
  for (const w of items) {
    if (w.kind === GET || w.valueId !== v) continue
    if (first === null || w.call < first.call) first = w
    if (w.call > g.ret) continue
    writers++
    if (w.ret > lastEnd) {
      lastEnd = w.ret
      lastWriter = w
    }
  }
  if (v !== NULL_ID && writers === 0) return { kind: 'never', first }
  if (lastEnd === Infinity) return null // an indeterminate write of v could land anywhere
  let x = null
  for (const o of items) {
    if (o === g || o.valueId === v || !(o.ret < g.call) || !(o.call > lastEnd)) continue
    // Latest evidence first; on a tie an acknowledged write reads better than a get.
    if (x === null || o.ret > x.ret || (o.ret === x.ret && x.kind === GET && o.kind !== GET)) x = o
  }
  return x ? { kind: 'overwritten', x, lastWriter } : null
}

/**
 * The required ops plus those overlapping [start, end], nearest to the failed
 * op first, at most `max`, in call order, as copies of the input with `index`.
 */
function slice (items, required, start, end, g, operations, max) {
  const chosen = new Set(required)
  const around = items
    .filter((it) => !chosen.has(it) && it.call <= end && it.ret >= start)
    .sort((a, b) => Math.abs(a.call - g.call) - Math.abs(b.call - g.call) || a.index - b.index)
  for (const it of around) {
    if (chosen.size >= max) break
    chosen.add(it)
  }
  return [...chosen]
    .sort((a, b) => a.call - b.call || a.index - b.index)
    .map((it) => ({ ...operations[it.index], index: it.index }))
}

module.exports = { explainViolation }
