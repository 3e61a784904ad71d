'use strict'

/**
 * Index of the last of the first `n` elements of `sorted` (ascending) that is
 * at or below `key`: the slice (or range) whose start holds `key` when
 * `sorted` holds starts beginning at 0. 0 when every element is above `key`.
 * Used on every request by the front ends' slice map (bench/lookup.js), so it
 * stays a plain loop over whatever array it is given.
 * @param {ArrayLike<number>} sorted ascending
 * @param {number} key
 * @param {number} [n] how many elements count (default: all; at least 1)
 * @returns {number}
 */
function lastAtOrBelow (sorted, key, n = sorted.length) {
  let lo = 0
  let hi = n - 1
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1
    if (sorted[mid] <= key) lo = mid
    else hi = mid - 1
  }
  return lo
}

module.exports = { lastAtOrBelow }
