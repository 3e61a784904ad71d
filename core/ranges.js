'use strict'

/**
 * Helpers over sorted lists of half-open ranges `{start, end}`.
 * Used to tell an app server which ranges it gained or lost between two
 * assignments (onAcquire / onRelease) and to spread load reports over slices.
 */

/** Sort and coalesce adjacent/overlapping ranges. */
function normalize (ranges) {
  const sorted = ranges.filter((r) => r.end > r.start).map((r) => ({ start: r.start, end: r.end }))
  sorted.sort((a, b) => a.start - b.start)
  const out = []
  for (const r of sorted) {
    const last = out[out.length - 1]
    if (last && r.start <= last.end) last.end = Math.max(last.end, r.end)
    else out.push(r)
  }
  return out
}

/** a \ b for normalized range lists. */
function subtract (a, b) {
  const out = []
  let j = 0
  for (const r of a) {
    let start = r.start
    while (j < b.length && b[j].end <= start) j++
    let k = j
    while (k < b.length && b[k].start < r.end) {
      if (b[k].start > start) out.push({ start, end: b[k].start })
      start = Math.max(start, b[k].end)
      k++
    }
    if (start < r.end) out.push({ start, end: r.end })
  }
  return out
}

/** Length of the overlap of two ranges. */
function overlap (a, b) {
  return Math.max(0, Math.min(a.end, b.end) - Math.max(a.start, b.start))
}

/** Total length of a range list. */
function totalLength (ranges) {
  let n = 0
  for (const r of ranges) n += r.end - r.start
  return n
}

/** True when `key` lies in one of the normalized `ranges`. */
function contains (ranges, key) {
  let lo = 0
  let hi = ranges.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1
    if (key < ranges[mid].start) hi = mid - 1
    else if (key >= ranges[mid].end) lo = mid + 1
    else return true
  }
  return false
}

module.exports = { normalize, subtract, overlap, totalLength, contains }
