'use strict'

const { KEYSPACE_SIZE } = require('./keyspace')
const { SliceMap } = require('./slice-map')

/**
 * Each slice's hottest key, so a split can cut a hot key out of its slice in
 * one round instead of halving the slice round after round until it is one
 * key wide (docs/algorithm.md, "Hot-key cuts").
 *
 * App servers keep, per slice, a majority vote over the slice keys (hashes)
 * of the requests they admit: the Misra-Gries summary with one counter
 * (Boyer and Moore's majority vote). It costs two typed-array slots per
 * slice and no allocation per request. Its guarantee: a key with more than
 * half of the slice's requests is the candidate at the end, and the
 * candidate's `votes` never exceed its true count. Summaries merge (across
 * report frames, across the servers of a replicated slice) and keep that
 * guarantee: same candidate, votes add; different candidates, the larger
 * keeps the difference (Agarwal et al., "Mergeable summaries", 2012).
 *
 * So `votes` is a lower bound on the hot key's requests: a split that cuts
 * a key out because its votes are half of the slice's requests never cuts
 * out a key that is not that hot.
 */

/**
 * One request for slice `i` with slice key `key`: the majority vote's step,
 * on the slice's candidate `keys[i]` (-1: none) and its `votes[i]`.
 * @param {Float64Array} keys
 * @param {Float64Array} votes
 */
function vote (keys, votes, i, key) {
  if (keys[i] === key) votes[i]++
  else if (votes[i] > 0) votes[i]--
  else {
    keys[i] = key
    votes[i] = 1
  }
}

/**
 * Two summaries of one stream's parts, merged.
 * @param {{ key: number, votes: number }|null|undefined} a
 * @param {{ key: number, votes: number }|null|undefined} b
 * @returns {{ key: number, votes: number }|null} null: no candidate
 */
function mergeVotes (a, b) {
  if (!a || !(a.votes > 0)) return b && b.votes > 0 ? { key: b.key, votes: b.votes } : null
  if (!b || !(b.votes > 0)) return { key: a.key, votes: a.votes }
  if (a.key === b.key) return { key: a.key, votes: a.votes + b.votes }
  if (a.votes === b.votes) return null
  return a.votes > b.votes ? { key: a.key, votes: a.votes - b.votes } : { key: b.key, votes: b.votes - a.votes }
}

/** A report entry's `hot` field is usable: a slice key inside the entry's range, with votes. */
function validHot (e) {
  const h = e.hot
  return Boolean(h) && Number.isInteger(h.key) && h.key >= e.start && h.key < e.end && h.key < KEYSPACE_SIZE &&
    typeof h.votes === 'number' && Number.isFinite(h.votes) && h.votes > 0
}

/**
 * Per slice of `a`, its hottest key as the strategy takes it (inputs.hotKeys):
 * the candidate of the merged summaries of every report entry whose hot key
 * falls in the slice, and the load it carries at least (hotKeysFromVotes).
 * @param {object} a a validated assignment
 * @param {{ start: number, end: number, hot?: { key: number, votes: number } }[]} entries
 * @param {ArrayLike<number>} loads per slice of `a`, in the strategy's load metric
 * @param {ArrayLike<number>} counts requests per slice of `a`
 * @returns {({ key: number, load: number }|null)[]}
 */
function hotKeysOf (a, entries, loads, counts) {
  const map = new SliceMap(a)
  const keys = new Float64Array(map.size).fill(-1)
  const votes = new Float64Array(map.size)
  for (const e of entries) {
    if (!validHot(e)) continue
    const i = map.indexOf(e.hot.key)
    const m = mergeVotes(votes[i] > 0 ? { key: keys[i], votes: votes[i] } : null, e.hot)
    keys[i] = m === null ? -1 : m.key
    votes[i] = m === null ? 0 : m.votes
  }
  return hotKeysFromVotes(keys, votes, loads, counts)
}

/**
 * inputs.hotKeys from per-slice votes (hotKeysOf's merged ones, or the
 * simulator's, which counts per slice of the current layout): a slice's
 * candidate and its load times the candidate's share of its requests (votes
 * over `counts`, at most 1), a lower bound since votes are; null for a slice
 * without a candidate or without requests.
 * @param {Float64Array} keys candidate per slice (-1: none)
 * @param {Float64Array} votes
 * @param {ArrayLike<number>} loads per slice, in the strategy's load metric
 * @param {ArrayLike<number>} counts requests per slice
 */
function hotKeysFromVotes (keys, votes, loads, counts) {
  const out = new Array(keys.length)
  for (let i = 0; i < keys.length; i++) {
    out[i] = votes[i] > 0 && keys[i] >= 0 && counts[i] > 0 ? { key: keys[i], load: loads[i] * Math.min(1, votes[i] / counts[i]) } : null
  }
  return out
}

module.exports = { vote, mergeVotes, validHot, hotKeysOf, hotKeysFromVotes }
