'use strict'

const { InvalidArgumentError } = require('../../core/errors')

/**
 * The dashboard at scale: what the live feed (GET /v1/events) sends instead of
 * one row per member once a cluster is large. Pure functions over the plain
 * objects the controller builds (its state(), round entries, heatmap columns
 * and the snapshot); no I/O, no clock.
 *
 * At or under `rowsAbove` entries a part passes through unchanged (the same
 * object), so small clusters keep today's full rows. Above it:
 *   state.servers    (id -> row)          becomes state.serverSummary
 *   state.frontends  (id -> row)          becomes state.frontendSummary
 *   state.pushes.lagging, state.handoff.waitingFor   keep `top` entries, plus a count
 *   round.perServer, perServerRequests, perServerCost   become round.summary
 *   column.servers   (every primary)      only the servers that own a bucket
 * The summary sits beside the maps rather than inside them: a member may be
 * called "summary" (ids are [A-Za-z0-9._-]{1,128}), so a key in an id-keyed
 * map could not say which form it is. The map's absence does.
 *
 * Every list is capped (`top`) and every histogram has at most `bins` bins,
 * so an event's size does not grow with the member count (the bound is
 * stated and measured in test/dashboard/state-summary.test.js).
 */

/** Every option and its default. */
const defaults = Object.freeze({
  rowsAbove: 50, // more members than this: a summary instead of a row each
  top: 10, // rows in each list (hottest, coolest, flagged, lagging, waiting for)
  bins: 10 // bins of each histogram
})

const checks = {
  rowsAbove: (v) => Number.isInteger(v) && v >= 0,
  top: (v) => Number.isInteger(v) && v >= 0 && v <= 1000,
  bins: (v) => Number.isInteger(v) && v >= 1 && v <= 100
}
const expected = { rowsAbove: 'an integer >= 0', top: 'an integer from 0 to 1000', bins: 'an integer from 1 to 100' }

function resolveOptions (options = {}) {
  const o = { ...defaults, ...options }
  for (const k of Object.keys(checks)) {
    if (!checks[k](o[k])) throw new InvalidArgumentError(`invalid ${k}: expected ${expected[k]}, got ${JSON.stringify(o[k])}`)
  }
  return o
}

/**
 * The controller's state() as the dashboard receives it: unchanged (the same
 * object) when no part has more than `rowsAbove` entries.
 * @param {object} state what controller state() returns
 * @param {{rowsAbove?: number, top?: number, bins?: number}} [options]
 * @returns {object} `state`, or a copy with the large parts summarized:
 *   `serverSummary` (see serverSummary) replaces `servers`;
 *   `frontendSummary: { count, lagging, behind: [{ id, push }] }` replaces `frontends`;
 *   `pushes.lagging` keeps `top` targets (retrying first) and `pushes.laggingCount` counts all;
 *   `handoff.waitingFor` keeps `top` servers and `handoff.waitingForCount` counts all
 */
function summarizeState (state, options) {
  const o = resolveOptions(options)
  if (!state || typeof state !== 'object') return state
  const serverIds = state.servers ? Object.keys(state.servers) : []
  const frontendIds = state.frontends ? Object.keys(state.frontends) : []
  const lagging = state.pushes && Array.isArray(state.pushes.lagging) ? state.pushes.lagging : []
  const waiting = state.handoff && state.handoff.waitingFor ? Object.keys(state.handoff.waitingFor) : []
  const big = (n) => n > o.rowsAbove
  if (!big(serverIds.length) && !big(frontendIds.length) && !big(lagging.length) && !big(waiting.length)) return state

  const out = { ...state }
  if (big(serverIds.length)) {
    delete out.servers
    out.serverSummary = serverSummary(state.servers, serverIds, o)
  }
  if (big(frontendIds.length)) {
    delete out.frontends
    const rows = frontendIds.map((id) => ({ id, push: state.frontends[id].push || null }))
    const behind = rows.filter((r) => r.push && r.push.lagging)
    out.frontendSummary = { count: rows.length, lagging: behind.length, behind: first(behind, byPushTrouble, o.top) }
  }
  if (big(lagging.length)) {
    const byTarget = (a, b) => byPushTrouble({ id: a.target, push: a }, { id: b.target, push: b })
    // ?? keeps the count when an already summarized state is summarized again
    out.pushes = { ...state.pushes, lagging: first(lagging, byTarget, o.top), laggingCount: state.pushes.laggingCount ?? lagging.length }
  }
  if (big(waiting.length)) {
    const kept = waiting.sort(compareIds).slice(0, o.top)
    out.handoff = {
      ...state.handoff,
      waitingFor: Object.fromEntries(kept.map((id) => [id, state.handoff.waitingFor[id]])),
      waitingForCount: state.handoff.waitingForCount ?? waiting.length
    }
  }
  return out
}

/**
 * The app servers in a bounded size.
 * @returns {{count: number, draining: number, loadUnknown: number, lagging: number,
 *   slices: number, meanLoad: number|null,
 *   hottest: object[], coolest: object[], flagged: object[],
 *   loadHistogram: {edges: number[], counts: number[]}, sliceHistogram: {edges: number[], counts: number[]}}}
 *   Rows are { id, load, slices, replicas, keyspaceShare, generation, push,
 *   draining, loadUnknown, collectionFailures, leaseRemainingMs }, `load`
 *   being last round's in the loadMetric, null when unknown.
 *   hottest: highest load first, over servers with a known load;
 *   coolest: lowest first, over those not draining (a draining server is cool
 *   because it is leaving); flagged: load unknown, then push lagging, then
 *   draining. Ties go to the lower id. `meanLoad` and `loadHistogram` are over
 *   servers with a known load, `sliceHistogram` over all.
 */
function serverSummary (servers, ids, o) {
  const rows = ids.map((id) => serverRow(id, servers[id]))
  const known = rows.filter((r) => r.load !== null)
  const hot = (a, b) => b.load - a.load || compareIds(a.id, b.id)
  const cool = (a, b) => a.load - b.load || compareIds(a.id, b.id)
  const trouble = (r) => (r.loadUnknown ? 0 : r.push && r.push.lagging ? 1 : 2)
  const loadSum = known.reduce((a, r) => a + r.load, 0)
  return {
    count: rows.length,
    draining: rows.filter((r) => r.draining).length,
    loadUnknown: rows.filter((r) => r.loadUnknown).length,
    lagging: rows.filter((r) => r.push && r.push.lagging).length,
    slices: rows.reduce((a, r) => a + r.slices, 0),
    meanLoad: known.length ? round3(loadSum / known.length) : null,
    hottest: first(known, hot, o.top),
    coolest: first(known.filter((r) => !r.draining), cool, o.top),
    flagged: first(rows.filter((r) => r.loadUnknown || r.draining || (r.push && r.push.lagging)), (a, b) => trouble(a) - trouble(b) || compareIds(a.id, b.id), o.top),
    loadHistogram: histogram(known.map((r) => r.load), o.bins),
    sliceHistogram: histogram(rows.map((r) => r.slices), o.bins, { integer: true })
  }
}

function serverRow (id, m) {
  const known = !m.loadUnknown && typeof m.lastLoad === 'number'
  return {
    id,
    load: known ? m.lastLoad : null,
    slices: m.slices || 0,
    replicas: m.replicas || 0,
    keyspaceShare: Number((m.keyspaceShare || 0).toPrecision(6)), // the page shows a percentage
    generation: m.generation,
    push: m.push || null,
    draining: Boolean(m.draining),
    loadUnknown: Boolean(m.loadUnknown),
    collectionFailures: m.collectionFailures || 0,
    leaseRemainingMs: m.leaseRemainingMs
  }
}

/**
 * One round entry as the dashboard receives it: unchanged (the same object)
 * with at most `rowsAbove` servers in `perServer`.
 * @param {object} entry a round entry (controller runRound)
 * @param {{rowsAbove?: number, top?: number, bins?: number}} [options]
 * @returns {object} `entry`, or a copy without perServer, perServerRequests and
 *   perServerCost, `unknown` cut to `top` ids, and
 *   `summary: { count, loadUnknown, meanLoad, hottest, coolest, loadHistogram }`:
 *   rows { id, load, requests, cost }, over the servers whose load is known
 *   this round (ties to the lower id)
 */
function summarizeRound (entry, options) {
  const o = resolveOptions(options)
  if (!entry || !entry.perServer) return entry
  const ids = Object.keys(entry.perServer)
  if (ids.length <= o.rowsAbove) return entry
  const { perServer, perServerRequests = {}, perServerCost = {}, ...rest } = entry
  const unknownIds = Array.isArray(entry.unknown) ? entry.unknown : []
  const unknown = new Set(unknownIds)
  const rows = ids.filter((id) => !unknown.has(id)).map((id) => ({
    id,
    load: perServer[id],
    requests: perServerRequests[id] ?? null,
    cost: perServerCost[id] ?? null
  }))
  return {
    ...rest,
    unknown: unknownIds.slice(0, o.top),
    summary: {
      count: ids.length,
      loadUnknown: ids.filter((id) => unknown.has(id)).length,
      meanLoad: rows.length ? round3(rows.reduce((a, r) => a + r.load, 0) / rows.length) : null,
      hottest: first(rows, (a, b) => b.load - a.load || compareIds(a.id, b.id), o.top),
      coolest: first(rows, (a, b) => a.load - b.load || compareIds(a.id, b.id), o.top),
      loadHistogram: histogram(rows.map((r) => r.load), o.bins)
    }
  }
}

/**
 * One heatmap column (keyspace-view.js keyspaceColumn) as the dashboard
 * receives it: its `servers` lists every primary, so past `rowsAbove` of them
 * only those owning at least one bucket are kept (at most `buckets`), `owner`
 * renumbered to match and `serverCount` saying how many there were. Buckets,
 * loads and `moved` are unchanged.
 * @param {{servers: string[], owner: number[]}} column
 * @param {{rowsAbove?: number}} [options]
 */
function summarizeColumn (column, options) {
  const o = resolveOptions(options)
  if (!column || !Array.isArray(column.servers) || column.servers.length <= o.rowsAbove) return column
  const renumber = new Int32Array(column.servers.length).fill(-1)
  for (const i of column.owner) if (i >= 0) renumber[i] = 0
  const servers = []
  for (let i = 0; i < renumber.length; i++) {
    if (renumber[i] === 0) {
      renumber[i] = servers.length
      servers.push(column.servers[i])
    }
  }
  return { ...column, servers, owner: column.owner.map((i) => (i >= 0 ? renumber[i] : i)), serverCount: column.servers.length }
}

/**
 * The first event (controller dashboardSnapshot): its state, rounds and
 * columns summarized as above. Only the newest round keeps its hottest and
 * coolest lists; older ones keep counts and histograms (the page draws their
 * imbalance, churn and generation, never their per-server loads).
 * @param {{state: object, rounds: object[], columns: object[]}} snapshot
 * @param {{rowsAbove?: number, top?: number, bins?: number}} [options]
 */
function summarizeSnapshot (snapshot, options) {
  const o = resolveOptions(options)
  if (!snapshot || typeof snapshot !== 'object') return snapshot
  const rounds = Array.isArray(snapshot.rounds) ? snapshot.rounds : []
  const older = { ...o, top: 0 }
  return {
    ...snapshot,
    state: summarizeState(snapshot.state, o),
    rounds: rounds.map((r, i) => summarizeRound(r, i === rounds.length - 1 ? o : older)),
    columns: Array.isArray(snapshot.columns) ? snapshot.columns.map((c) => summarizeColumn(c, o)) : snapshot.columns
  }
}

/**
 * Equal-width bins from the least value to the greatest: bin i counts the
 * values v with edges[i] <= v < edges[i + 1], the last bin also v equal to
 * its upper edge. With `integer`, edges are integers and the last edge may
 * pass the greatest value (bins of whole slices). No values: no bins.
 * @param {number[]} values
 * @param {number} bins at most this many bins
 * @returns {{edges: number[], counts: number[]}} edges.length === counts.length + 1
 */
function histogram (values, bins, { integer = false } = {}) {
  if (!values.length) return { edges: [], counts: [] }
  let lo = Infinity
  let hi = -Infinity
  for (const v of values) {
    if (v < lo) lo = v
    if (v > hi) hi = v
  }
  const edges = []
  if (integer) {
    const width = Math.max(1, Math.ceil((hi - lo + 1) / bins))
    const n = Math.ceil((hi - lo + 1) / width)
    for (let i = 0; i <= n; i++) edges.push(lo + i * width)
  } else if (hi === lo) {
    edges.push(lo, hi)
  } else {
    // Three decimals keep the edges short on the wire; bins follow the rounded edges.
    for (let i = 0; i < bins; i++) edges.push(round3(lo + ((hi - lo) * i) / bins))
    edges.push(hi)
  }
  const n = edges.length - 1
  const counts = new Array(n).fill(0)
  const width = (edges[n] - edges[0]) / n
  for (const v of values) {
    let i = width > 0 ? Math.min(n - 1, Math.floor((v - edges[0]) / width)) : 0
    while (i > 0 && v < edges[i]) i--
    while (i < n - 1 && v >= edges[i + 1]) i++
    counts[i]++
  }
  return { edges, counts }
}

// Retrying pushes first (failures), then the furthest behind; then by id.
function byPushTrouble (a, b) {
  return (b.push.failures || 0) - (a.push.failures || 0) || a.push.acked - b.push.acked || compareIds(a.id, b.id)
}

/** The first `n` of `list` in `order`, without reordering `list`. */
function first (list, order, n) {
  return n === 0 ? [] : list.slice().sort(order).slice(0, n)
}

function compareIds (a, b) {
  return a < b ? -1 : a > b ? 1 : 0
}

function round3 (v) {
  return Math.round(v * 1000) / 1000
}

module.exports = { summarizeState, summarizeRound, summarizeColumn, summarizeSnapshot, histogram, defaults }
