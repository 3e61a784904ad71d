'use strict'

/**
 * Brute-force linearizability for tiny histories: try every order of the ops
 * that respects real time, with each indeterminate write either placed
 * somewhere after its call or left out. Exponential, so only for differential
 * tests of the real checker on a handful of ops.
 */
function bruteForceLinearizable (operations) {
  const byKey = new Map()
  for (const o of operations) {
    if (o.ok === 'failed' || (o.ok === false && o.op === 'get')) continue
    const ret = o.ok === true ? o.ret : Infinity
    if (!byKey.has(o.key)) byKey.set(o.key, [])
    byKey.get(o.key).push({ ...o, ret, optional: o.ok === false })
  }
  for (const ops of byKey.values()) if (!search(ops, new Array(ops.length).fill(false), null)) return false
  return true
}

function search (ops, done, state) {
  const pending = ops.filter((o, i) => !done[i])
  if (pending.every((o) => o.optional)) return true
  for (let i = 0; i < ops.length; i++) {
    if (done[i]) continue
    const o = ops[i]
    // o can go next only if no other pending op had returned before o was called.
    if (ops.some((p, j) => !done[j] && j !== i && !p.optional && p.ret < o.call)) continue
    let next = state
    if (o.op === 'put') next = o.value
    else if (o.op === 'delete') next = null
    else if (o.value !== state) continue
    done[i] = true
    const ok = search(ops, done, next)
    done[i] = false
    if (ok) return true
  }
  return false
}

module.exports = { bruteForceLinearizable }
