'use strict'

/**
 * A round's total key churn, core/assignment.js keyChurn(input, result),
 * computed from server indices instead of the result's objects.
 *
 * Why: with a standby replica for every slice (the default) keyChurn compares
 * every slice's servers by id, and ids from outside (JSON, the controller)
 * are not the round's own strings, so each comparison reads both strings: at
 * 10,000 servers a million slices' worth, a tenth of the round. The round
 * knows every server list as indices already (the input's sets from
 * columns.js indexSets, the result's from its columns), and the input's
 * slice ends as a column: reading the input's objects again cost as much as
 * the string comparisons (a cache miss or three a slice).
 *
 * Same walk, same figure, to the last bit: both tilings are walked in key
 * order, and every pair of overlapping slices whose lists differ adds the
 * servers the result's list gains times the overlap, in the same order.
 */

/**
 * @param {Float64Array} ends per input slice, its end (the slices tile the keyspace from 0)
 * @param {Int32Array} owner per input slice, its first server's index
 * @param {{rep: Int32Array, sets: import('./columns').ReplicaSets}} input the input's lists of two or more servers
 * @param {import('./columns').Columns} c the result's slices: `rep[j]` a set in `sets`, else `src[j]`
 *   the input slice whose list it keeps, else (-1) just `owner[j]`
 * @param {import('./columns').ReplicaSets|null} sets the round's sets
 * @returns {number} keys gained, summed over servers
 */
function roundChurn (ends, owner, input, c, sets) {
  const inRep = input.rep
  const inPool = input.sets.pool
  const inOffset = input.sets.offset
  const inSize = input.sets.size
  const { n, start, end, rep, src, owner: resultOwner } = c
  const none = new Int32Array(0)
  const pool = sets ? sets.pool : none
  const offset = sets ? sets.offset : none
  const size = sets ? sets.size : none
  const one = new Int32Array(2) // a one-server list on either side: [input's, result's]
  let churn = 0
  let i = 0
  let j = 0
  while (i < ends.length && j < n) {
    const xStart = i > 0 ? ends[i - 1] : 0
    const xEnd = ends[i]
    // input slice i's list: x[xo .. xo + xn)
    let x = one
    let xo = 0
    let xn = 1
    const r = inRep[i]
    if (r >= 0) {
      x = inPool
      xo = inOffset[r]
      xn = inSize[r]
    } else {
      one[0] = owner[i]
    }
    // result slice j's list: y[yo .. yo + yn)
    let y = one
    let yo = 1
    let yn = 1
    const q = rep[j]
    const from = src[j]
    if (q >= 0) {
      y = pool
      yo = offset[q]
      yn = size[q]
    } else if (from >= 0 && inRep[from] >= 0) {
      y = inPool
      yo = inOffset[inRep[from]]
      yn = inSize[inRep[from]]
    } else {
      one[1] = from >= 0 ? owner[from] : resultOwner[j]
    }
    if (x[xo] !== y[yo] || yn > 1 || xn > 1) {
      let gained = 0
      for (let k = yo; k < yo + yn; k++) {
        let held = false
        for (let h = xo; h < xo + xn; h++) {
          if (x[h] === y[k]) {
            held = true
            break
          }
        }
        if (!held) gained++
      }
      if (gained > 0) churn += gained * Math.max(0, Math.min(xEnd, end[j]) - Math.max(xStart, start[j]))
    }
    if (xEnd <= end[j]) i++
    else j++
  }
  return churn
}

module.exports = { roundChurn }
