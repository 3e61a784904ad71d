'use strict'

const { InvalidAssignmentError, DiffBaseError } = require('./errors')
const { KEYSPACE_SIZE } = require('./keyspace')

/**
 * Versioned map distribution (docs/control-plane.md): a member that holds
 * generation `base` receives only what changed up to `generation`.
 *
 *   { kind: 'diff', base, generation, epoch?, servers: { set: { id: { url } }, remove: [id] },
 *     splices: [{ start, end, slices: [slice, ...] }] }
 *   or a chain of them: { kind: 'diff', base, generation, steps: [diff, ...] }
 *
 * A splice replaces the base's slices that tile [start, end) exactly (both
 * are slice boundaries of the base) with `slices`, which tile the same range.
 * Splices are sorted and do not overlap. Applying a diff to any map other
 * than generation `base` is refused (DiffBaseError, 409): the sender then
 * sends the full map. The result is an ordinary assignment, validated by
 * whoever installs it (core/assignment.js acceptsUpdate).
 */

function sameSlice (x, y) {
  if (x.start !== y.start || x.end !== y.end || !x.moving !== !y.moving) return false
  if (!sameList(x.servers, y.servers)) return false
  return sameList(x.holders || NONE, y.holders || NONE)
}

function sameList (a, b) {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

const NONE = Object.freeze([])

/**
 * The diff that turns assignment `a` into assignment `b`.
 * @param {object} a base assignment (its generation is the diff's base)
 * @param {object} b newer assignment
 * @returns {object} the diff
 */
function diffMaps (a, b) {
  const A = a.slices
  const B = b.slices
  const splices = []
  let i = 0
  let j = 0
  while (i < A.length && j < B.length) {
    if (sameSlice(A[i], B[j])) {
      i++
      j++
      continue
    }
    // A[i] and B[j] start at the same key: both lists tile the keyspace and
    // every step below ends both runs at a common boundary.
    const start = A[i].start
    const from = j
    let ea = A[i++].end
    let eb = B[j++].end
    while (ea !== eb) {
      if (ea < eb) ea = A[i++].end
      else eb = B[j++].end
    }
    const last = splices[splices.length - 1]
    if (last && last.end === start) {
      last.end = ea
      for (let k = from; k < j; k++) last.slices.push(B[k])
    } else {
      splices.push({ start, end: ea, slices: B.slice(from, j) })
    }
  }
  const set = {}
  const remove = []
  for (const id of Object.keys(b.servers)) {
    const was = a.servers[id]
    if (!was || was.url !== b.servers[id].url) set[id] = { url: b.servers[id].url }
  }
  for (const id of Object.keys(a.servers)) if (!Object.hasOwn(b.servers, id)) remove.push(id)
  const diff = { kind: 'diff', base: a.generation, generation: b.generation }
  if (b.epoch !== undefined) diff.epoch = b.epoch
  diff.servers = { set, remove }
  diff.splices = splices
  return diff
}

/** Whether a push or answer body is a diff rather than a full map. */
function isDiff (body) {
  return body !== null && typeof body === 'object' && body.kind === 'diff'
}

/**
 * Apply `diff` to `base` (an assignment); returns the new assignment. The
 * base is not modified. A diff with `steps` is a chain of diffs, one per
 * generation from `base` to `generation`, applied in turn: the sender
 * serializes each generation's step once and concatenates the steps a
 * holder of an older base needs. Throws DiffBaseError when the base
 * generation is not the diff's, InvalidAssignmentError when the diff is
 * malformed.
 */
function applyDiff (base, diff) {
  const fail = (msg) => { throw new InvalidAssignmentError('invalid diff: ' + msg) }
  if (!isDiff(diff)) fail('expected { kind: "diff", ... }')
  if (!Number.isSafeInteger(diff.base) || !Number.isSafeInteger(diff.generation)) fail('base and generation must be integers')
  if (!base || base.generation !== diff.base) {
    const err = new DiffBaseError(`diff from generation ${diff.base} does not apply to ${base ? `generation ${base.generation}` : 'no map'}: send the full map`)
    err.generation = base ? base.generation : 0
    throw err
  }
  if (diff.steps !== undefined) {
    if (!Array.isArray(diff.steps) || diff.steps.length === 0) fail('steps must be a non-empty array of diffs')
    let out = base
    for (const step of diff.steps) {
      if (!isDiff(step) || step.steps !== undefined || step.base !== out.generation) fail('each step must be a diff from the generation the previous one gave')
      out = applyDiff(out, step)
    }
    if (out.generation !== diff.generation) fail(`steps end at generation ${out.generation}, not ${diff.generation}`)
    return out
  }
  const sv = diff.servers
  if (sv === null || typeof sv !== 'object' || sv.set === null || typeof sv.set !== 'object' || Array.isArray(sv.set) || !Array.isArray(sv.remove)) fail('servers must be { set: {...}, remove: [...] }')
  if (!Array.isArray(diff.splices)) fail('splices must be an array')
  const servers = { ...base.servers }
  for (const id of sv.remove) {
    if (typeof id !== 'string') fail('servers.remove must list ids')
    delete servers[id]
  }
  for (const [id, s] of Object.entries(sv.set)) servers[id] = s
  const slices = []
  const old = base.slices
  let i = 0
  let at = 0 // keys covered so far
  for (const sp of diff.splices) {
    if (sp === null || typeof sp !== 'object' || !Array.isArray(sp.slices) || !Number.isSafeInteger(sp.start) || !Number.isSafeInteger(sp.end)) fail('a splice must be { start, end, slices }')
    if (sp.start < at || sp.end <= sp.start || sp.end > KEYSPACE_SIZE) fail(`splice [${sp.start}, ${sp.end}) out of order or out of range`)
    while (i < old.length && old[i].end <= sp.start) slices.push(old[i++])
    if (i >= old.length || old[i].start !== sp.start) fail(`splice start ${sp.start} is no slice boundary of generation ${base.generation}`)
    let covered = sp.start
    while (i < old.length && covered < sp.end) covered = old[i++].end
    if (covered !== sp.end) fail(`splice end ${sp.end} is no slice boundary of generation ${base.generation}`)
    for (const s of sp.slices) slices.push(s)
    at = sp.end
  }
  while (i < old.length) slices.push(old[i++])
  const out = { generation: diff.generation }
  if (diff.epoch !== undefined) out.epoch = diff.epoch
  out.servers = servers
  out.slices = slices
  return out
}

/**
 * The full map a push or answer body brings a holder of `current` to: the
 * body itself when it is a full map, else the diff applied to `current`.
 */
function resolveMap (current, body) {
  return isDiff(body) ? applyDiff(current, body) : body
}

module.exports = { diffMaps, applyDiff, isDiff, resolveMap }
