'use strict'

const { GET, NULL_ID } = require('./model')

/**
 * The per-key search: Wing & Gong's depth-first search over call/return
 * entries with Lowe's cache of explored (linearized set, state) pairs, as in
 * Porcupine's checkSingle, specialised to a register. Plain Porcupine order
 * (try every callable op, earliest call first) explodes beyond about 10
 * concurrent clients on one key, because a wrong write order is only noticed
 * at some later return, after every interleaving in between has been tried.
 * Three rules cut that down without losing exactness (each is checked against
 * a brute-force search in test/history):
 *
 * 1. A callable get that matches the current state is taken at once, without
 *    branching. If any valid order continues from here, one starts with that
 *    get: nothing unlinearized returned before it was called, so moving it to
 *    the front keeps real time, and it leaves the state as it found it.
 * 2. A callable write whose value no remaining get returns ("dead") is taken
 *    at once too, when no get matches. In any valid continuation that write is
 *    followed directly by another write (no get can see its value), and the
 *    continuation's first op is a write (no callable get matches), so putting
 *    the dead write first changes nothing anyone observes.
 *    By 1 and 2, backtracking over such a commitment fails its parent too.
 * 3. No write may overwrite the current value while a get that returns it
 *    remains and no remaining write can produce it again: every continuation
 *    would fail, so the configuration fails now instead of at that get's return.
 *
 * Only writes whose value some remaining get still needs ("live") are
 * branched on, in call order. States and values are small integers (value
 * ids; null is 0). Ops are numbered in call order, so the linearized set is
 * nearly always a prefix [0, low) plus a few ops below `high`: cache entries
 * keep only the words between, and comparing two sets costs the concurrency
 * window, not the history length.
 */

/**
 * Give each distinct value a small integer id, drop indeterminate writes whose
 * value no later get observed, and number the rest in call order.
 *
 * Why dropping is exact: such a write can always be linearized last (its ret
 * is Infinity), where it affects nobody; and any order that places it earlier
 * stays valid without it, because no get can sit between it and the next write
 * (that get would have returned its value).
 * @param {object[]} items one key's ops { kind, value, call, ret } (valueId is set here)
 * @returns {object[]} a new array
 */
function prepare (items) {
  const ids = new Map([[null, NULL_ID]])
  for (const it of items) {
    let id = ids.get(it.value)
    if (id === undefined) ids.set(it.value, (id = ids.size))
    it.valueId = id
  }
  const lastRead = new Map() // valueId → latest ret of a get returning it
  for (const it of items) {
    if (it.kind === GET && !(lastRead.get(it.valueId) >= it.ret)) lastRead.set(it.valueId, it.ret)
  }
  return items
    .filter((it) => it.ret !== Infinity || lastRead.get(it.valueId) >= it.call)
    .sort((a, b) => a.call - b.call || a.index - b.index)
}

const RECENT_STARVED = 32

/** murmur3's 32-bit finalizer: Zobrist codes for ops and states. */
function fmix32 (h) {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) | 0
}

/**
 * Search one key's history (from `prepare`). Entries are numbered 2i (call of
 * op i) and 2i + 1 (its return); `head` is a sentinel. Lifting an op unlinks
 * both its entries and is undone in reverse order on backtrack (dancing links).
 * @param {object[]} items
 * @param {{ maxStepsPerKey: number, timeBudgetMs: number, now: function(): number }} o
 * @returns {{ outcome: 'ok'|'violation'|'unknown', steps: number, reason?: string,
 *   stuck?: { item: object, depth: number, setter: object|null, starvedValues: number[] } }}
 *   `stuck` is the deepest dead end: the op that could not be placed there, the
 *   write that had set the state, and the value ids most recently found still
 *   needed by a get when a write wanted to overwrite them (latest first).
 */
function searchKey (items, o) {
  const n = items.length
  if (n === 0) return { outcome: 'ok', steps: 0 }
  const m = 2 * n
  const head = m
  const time = (e) => (e & 1 ? items[e >> 1].ret : items[e >> 1].call)
  const order = Array.from({ length: m }, (_, e) => e)
  // Calls before returns on equal times, so touching intervals count as
  // concurrent: one clock reading cannot prove an op ended before another began.
  order.sort((a, b) => time(a) - time(b) || (a & 1) - (b & 1) || a - b)
  const next = new Int32Array(m + 1)
  const prev = new Int32Array(m + 1)
  let p = head
  for (const e of order) {
    next[p] = e
    prev[e] = p
    p = e
  }
  next[p] = -1
  const lift = (c) => {
    const r = c + 1
    next[prev[c]] = next[c]
    prev[next[c]] = prev[c] // a call is always followed by at least its own return
    next[prev[r]] = next[r]
    if (next[r] !== -1) prev[next[r]] = prev[r]
  }
  const unlift = (c) => {
    const r = c + 1
    if (next[r] !== -1) prev[next[r]] = r
    next[prev[r]] = r
    prev[next[c]] = c
    next[prev[c]] = c
  }

  const zobrist = new Int32Array(n)
  for (let i = 0; i < n; i++) zobrist[i] = fmix32(i + 0x9e3779b9)
  const bits = new Uint32Array((n + 31) >> 5)
  let low = 0 // every op below low is linearized, op low is not
  let high = 0 // no op at or above high is linearized
  let hash = 0
  const cache = new Map() // hash → [{ low, high, state, words }]: configurations explored
  // Adds the current configuration (with `state`) unless already explored.
  const cacheAdd = (key, state) => {
    const from = low >> 5
    const to = (high + 31) >> 5
    let bucket = cache.get(key)
    if (bucket === undefined) cache.set(key, (bucket = []))
    for (const c of bucket) {
      if (c.state !== state || c.low !== low || c.high !== high) continue
      let same = true
      for (let w = from; w < to && same; w++) same = c.words[w - from] === bits[w]
      if (same) return false
    }
    bucket.push({ low, high, state, words: bits.slice(from, to) })
    return true
  }

  const stackEntry = new Int32Array(n)
  const stackState = new Int32Array(n)
  const stackLow = new Int32Array(n)
  const stackHigh = new Int32Array(n)
  let depth = 0
  let state = NULL_ID
  // Unlinearized gets returning, and writes producing, each value id.
  const values = items.reduce((max, it) => Math.max(max, it.valueId), 0) + 1
  const readersLeft = new Int32Array(values)
  const writersLeft = new Int32Array(values)
  for (const it of items) (it.kind === GET ? readersLeft : writersLeft)[it.valueId]++
  const left = (it) => (it.kind === GET ? readersLeft : writersLeft)
  // The last-called get of each value: blamed when the value cannot be kept
  // for its readers, as the furthest reader is the likeliest culprit (a
  // planted stale read, say) and the nearer ones are usually innocent.
  const lastReader = new Int32Array(values).fill(-1)
  items.forEach((it, i) => { if (it.kind === GET) lastReader[it.valueId] = i })
  // Linearize op i (its call entry c) with the state it leaves, if that
  // configuration is new; false when it was explored before.
  const tryLinearize = (c, after) => {
    const i = c >> 1
    bits[i >> 5] ^= 1 << (i & 31)
    const savedLow = low
    const savedHigh = high
    if (i === low) while (low < n && (bits[low >> 5] & (1 << (low & 31))) !== 0) low++
    if (i >= high) high = i + 1
    if (!cacheAdd((hash ^ zobrist[i] ^ fmix32(after ^ 0x5bd1e995)) | 0, after)) {
      bits[i >> 5] ^= 1 << (i & 31)
      low = savedLow
      high = savedHigh
      return false
    }
    hash ^= zobrist[i]
    stackEntry[depth] = c
    stackState[depth] = state
    stackLow[depth] = savedLow
    stackHigh[depth++] = savedHigh
    left(items[i])[items[i].valueId]--
    state = after
    lift(c)
    return true
  }
  // Undo the last linearization; returns its call entry.
  const pop = () => {
    const c = stackEntry[--depth]
    const i = c >> 1
    bits[i >> 5] ^= 1 << (i & 31)
    hash ^= zobrist[i]
    left(items[i])[items[i].valueId]++
    state = stackState[depth]
    low = stackLow[depth]
    high = stackHigh[depth]
    unlift(c)
    return c
  }

  const timed = o.timeBudgetMs !== Infinity
  const started = timed ? o.now() : 0
  let steps = 0
  let stuck = null
  const starvedValues = [] // recent values a write was refused over, for the explanation
  let tried = -1 // the last write (op number) tried from this configuration
  const violation = () => ({ outcome: 'violation', steps, stuck: { ...stuck, starvedValues: [...new Set(starvedValues.reverse())] } })
  while (next[head] !== -1) {
    if (++steps > o.maxStepsPerKey) return { outcome: 'unknown', steps, reason: `more than ${o.maxStepsPerKey} search steps` }
    if (timed && (steps & 1023) === 0 && o.now() - started > o.timeBudgetMs) {
      return { outcome: 'unknown', steps, reason: `search took more than ${o.timeBudgetMs} ms` }
    }
    // Scan the callable ops (calls before the first pending return) for a
    // matching get, a dead write, and the next untried live write. The first
    // two can only turn up on a configuration's first visit: on a later visit
    // (after backtracking) they would have been taken the first time.
    let dead = -1
    let live = -1
    let e = next[head]
    for (; (e & 1) === 0; e = next[e]) {
      const it = items[e >> 1]
      if (it.kind === GET) {
        if (it.valueId === state) break
      } else if (readersLeft[it.valueId] === 0) {
        if (dead === -1) dead = e
      } else if (live === -1 && (e >> 1) > tried) {
        live = e
      }
    }
    // Rule 3: a write now would lose the current value for a get still to come.
    const starved = readersLeft[state] > 0 && writersLeft[state] === 0
    if ((e & 1) === 0) {
      // Rule 1. If the configuration after it was explored before, it
      // failed, and then so does this one.
      if (tryLinearize(e, state)) {
        tried = -1
        continue
      }
    } else if (dead !== -1 && !starved) {
      // Rule 2, likewise.
      if (tryLinearize(dead, items[dead >> 1].valueId)) {
        tried = -1
        continue
      }
    } else if (live !== -1 && !starved) {
      // Branch: try each live write in call order.
      if (tryLinearize(live, items[live >> 1].valueId)) tried = -1
      else tried = live >> 1
      continue
    } else {
      // The deepest dead end is where the history stops making sense: the
      // get that can no longer see its value, or else the op whose return is
      // due. A stale read of an old value makes the search fail where that
      // value was written, far from the read, so starved values are kept too.
      if (stuck === null || depth > stuck.depth) stuck = deadEnd(items, starved ? lastReader[state] : e >> 1, depth, stackEntry)
      if (starved && starvedValues[starvedValues.length - 1] !== state) {
        starvedValues.push(state)
        if (starvedValues.length > RECENT_STARVED) starvedValues.shift()
      }
    }
    // Backtrack past commitments (gets, and writes that were dead when
    // made) to the last branch, and try the next live write there.
    if (depth === 0) return violation()
    let c = pop()
    while (items[c >> 1].kind === GET || readersLeft[items[c >> 1].valueId] === 0) {
      if (depth === 0) return violation()
      c = pop()
    }
    tried = c >> 1
  }
  return { outcome: 'ok', steps }
}

/** Snapshot of a dead end: the op that could not be placed and the write that set the state. */
function deadEnd (items, op, depth, stackEntry) {
  let setter = null
  for (let d = depth - 1; d >= 0 && setter === null; d--) {
    const it = items[stackEntry[d] >> 1]
    if (it.kind !== GET) setter = it
  }
  return { item: items[op], depth, setter }
}

module.exports = { prepare, searchKey }
