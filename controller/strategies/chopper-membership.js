'use strict'

const { cloneAssignment } = require('../../core/assignment')
const { checkMembershipChange, resolveInputs } = require('./inputs')
const { checkJoins, checkLeaves } = require('./batch')

/**
 * Chopper's membership changes: a joining server starts with no slices (the
 * next round's move phase hands it some), a leaving server's slices are
 * reassigned at once. Each function takes chopper's options already
 * validated (chopper.js wraps them). Neither changes the slices' key ranges,
 * so the batch forms (see ./batch.js) do a whole batch in one pass, with the
 * result of the loop of single calls.
 */

/**
 * Add a server with no slices. It is the coolest server (load 0), so the
 * next round's move phase hands it slices (within the move churn budget).
 * @param {object} assignment
 * @param {string} id
 * @param {string} url
 * @param {ArrayLike<number>} [loads] validated when given; not needed
 * @param {{unknownServers?: string[]}} [inputs] validated; not needed, since nothing moves
 */
function addServer (assignment, id, url, loads, inputs) {
  checkMembershipChange('join', assignment, id, { url, loads })
  resolveInputs(assignment, inputs)
  // cloneAssignment also re-sorts the servers object.
  return cloneAssignment({ ...assignment, servers: { ...assignment.servers, [id]: { url } } })
}

/**
 * addServer for each of `joins`, in one copy of the assignment.
 * @param {object} assignment
 * @param {Array<{id:string, url:string}>} joins
 * @param {ArrayLike<number>} [loads]
 * @param {object} [inputs]
 */
function addServers (assignment, joins, loads, inputs) {
  checkJoins(assignment, joins, loads, inputs)
  const servers = { ...assignment.servers }
  for (const { id, url } of joins) servers[id] = { url }
  return cloneAssignment({ ...assignment, servers })
}

/**
 * Remove a server and reassign its slices at once: hottest slice first, each
 * to the currently least-loaded remaining server (ties: least keyspace, then
 * id), counting each given slice towards that server's tally. Merges nothing.
 * Servers whose load is unknown receive nothing, unless every remaining
 * server is unknown. With `replicate` (the default), a slice the server
 * shares with others just loses it (its next server becomes primary if it was
 * the primary); only the slices it held alone are reassigned.
 * @param {object} assignment
 * @param {string} id
 * @param {ArrayLike<number>} [loads] per-slice loads of the last period; all zero when omitted
 * @param {{unknownServers?: string[]}} [inputs] servers whose load is unknown (may include `id`)
 * @param {boolean} replicate chopper's option
 */
function removeServer (assignment, id, loads, inputs, replicate) {
  const load = checkMembershipChange('leave', assignment, id, { loads })
  const { unknownServers } = resolveInputs(assignment, inputs)
  return removeAll(assignment, [id], load, unknownServers, replicate)
}

/**
 * removeServer for each of `ids` in turn, in one copy of the assignment.
 * @param {object} assignment
 * @param {string[]} ids
 * @param {ArrayLike<number>} [loads]
 * @param {object} [inputs] unknown servers may include leaving ones
 * @param {boolean} replicate
 */
function removeServers (assignment, ids, loads, inputs, replicate) {
  const { load, unknownServers } = checkLeaves(assignment, ids, loads, inputs)
  return removeAll(assignment, ids, load, unknownServers, replicate)
}

/**
 * The servers `ids` leave one after another. Each leave sees the tallies that
 * core/assignment.js serverLoads gives for the layout before it (with
 * `replicate`: after the leaving server is dropped from shared slices), and
 * they are kept exact between leaves: a server's tally is summed again, over
 * its slices in key order as serverLoads sums it, only when its slices or
 * their server counts changed. So a leave costs its own slices and their
 * other servers, plus one scan of the targets per reassigned slice, not a
 * copy and a tally of the whole assignment.
 */
function removeAll (assignment, ids, load, unknown, replicate) {
  const next = cloneAssignment(assignment)
  const { slices } = next
  const names = Object.keys(next.servers) // sorted by cloneAssignment: index order is id order
  const indexOf = new Map(names.map((id, s) => [id, s]))
  const m = names.length
  const holding = Array.from({ length: m }, () => []) // per server: its slices, in key order
  slices.forEach((sl, i) => { for (const id of sl.servers) holding[indexOf.get(id)].push(i) })
  const present = new Uint8Array(m).fill(1)
  const tallyLoad = new Float64Array(m)
  const tallyKeys = new Float64Array(m)
  const dirty = new Uint8Array(m).fill(1)
  const unsorted = new Uint8Array(m)
  const len = (i) => slices[i].end - slices[i].start

  /** serverLoads' figures for server s in the layout as it is now. */
  function retally (s) {
    if (unsorted[s]) holding[s].sort((a, b) => a - b)
    unsorted[s] = 0
    let sum = 0
    let keys = 0
    for (const i of holding[s]) {
      sum += (load[i] || 0) / slices[i].servers.length
      keys += len(i)
    }
    tallyLoad[s] = sum
    tallyKeys[s] = keys
    dirty[s] = 0
  }
  const retallyDirty = () => { for (let s = 0; s < m; s++) if (dirty[s] && present[s]) retally(s) }

  for (const id of ids) {
    const x = indexOf.get(id)
    present[x] = 0
    const leaving = []
    const drop = (i) => {
      const sl = slices[i]
      sl.servers = sl.servers.filter((y) => y !== id)
      for (const y of sl.servers) dirty[indexOf.get(y)] = 1 // its share grew
    }
    if (replicate) {
      // A replicated slice loses the leaving server from its set and, if that was
      // its primary, the next listed server becomes primary: it already holds the
      // slice, so this costs no churn. Only slices the server held alone move.
      for (const i of holding[x]) {
        if (slices[i].servers.length === 1) leaving.push(i)
        else drop(i)
      }
      // the remaining servers' loads with those shares respread
      retallyDirty()
    } else {
      retallyDirty() // the layout before the leave, shares and all
      for (const i of holding[x]) {
        if (slices[i].servers[0] === id) leaving.push(i)
        else drop(i) // drop it as a secondary replica
      }
    }
    // An unknown server's tally is a stale guess, so it must not look like the
    // least loaded. But the leaving server's slices must go somewhere: when every
    // remaining server is unknown, fall back to choosing among all of them.
    const remaining = []
    const known = []
    for (let s = 0; s < m; s++) {
      if (!present[s]) continue
      remaining.push(s)
      if (!unknown.has(names[s])) known.push(s)
    }
    const targets = known.length > 0 ? known : remaining
    leaving.sort((a, b) => load[b] - load[a] || len(b) - len(a) || slices[a].start - slices[b].start)
    for (const i of leaving) {
      let target = targets[0]
      for (const r of targets) {
        if (tallyLoad[r] < tallyLoad[target] || (tallyLoad[r] === tallyLoad[target] &&
          (tallyKeys[r] < tallyKeys[target] || (tallyKeys[r] === tallyKeys[target] && r < target)))) target = r
      }
      tallyLoad[target] += load[i]
      tallyKeys[target] += len(i)
      const sl = slices[i]
      const to = names[target]
      if (!sl.servers.includes(to)) {
        holding[target].push(i)
        unsorted[target] = 1
      }
      sl.servers = [to, ...sl.servers.filter((y) => y !== id && y !== to)]
      for (const y of sl.servers) dirty[indexOf.get(y)] = 1
    }
    holding[x] = []
    delete next.servers[id]
  }
  return next
}

module.exports = { addServer, addServers, removeServer, removeServers }
