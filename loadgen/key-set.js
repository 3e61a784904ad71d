'use strict'

const { createRng, deriveSeed } = require('./prng')

const FILLER = 'abcdefghijklmnopqrstuvwxyz0123456789'

/**
 * The keys one phase draws from, addressed by index [0, count).
 *
 * Generated keys are `prefix + index`, so they are unique and readable. With
 * length bounds, each key is padded (`key-7_x3k9...`) to a length drawn
 * uniformly from the bounds. The padding is seeded by (seed, prefix, index)
 * and not by phase, so two phases with the same key spec share the same
 * keys. That matters for cache affinity across phase changes.
 * @param {{ count: number, prefix: string, length?: { min: number, max: number } } | { list: string[] }} spec normalised keys spec
 * @param {number|string} seed
 */
function createKeySet (spec, seed) {
  if (spec.list) return listKeySet(spec.list)
  const { count, prefix, length } = spec
  const names = new Array(count)
  const name = length
    ? (i) => names[i] ?? (names[i] = paddedName(prefix, i, length, seed))
    : (i) => names[i] ?? (names[i] = prefix + i)
  let index = null
  return {
    count,
    name,
    indexOf (key) {
      if (!length) {
        // Parse instead of building a map: key sets can have millions of keys.
        if (!key.startsWith(prefix)) return -1
        const rest = key.slice(prefix.length)
        if (!/^(0|[1-9]\d*)$/.test(rest)) return -1
        const i = Number(rest)
        return i < count ? i : -1
      }
      if (!index) {
        index = new Map()
        for (let i = 0; i < count; i++) index.set(name(i), i)
      }
      return index.get(key) ?? -1
    }
  }
}

function listKeySet (list) {
  const index = new Map(list.map((k, i) => [k, i]))
  return { count: list.length, name: (i) => list[i], indexOf: (key) => index.get(key) ?? -1 }
}

function paddedName (prefix, i, { min, max }, seed) {
  const base = prefix + i
  const rng = createRng(deriveSeed(seed, 'key', prefix, i))
  const len = min + rng.int(max - min + 1)
  if (len <= base.length) return base
  let s = base + '_'
  while (s.length < len) s += FILLER[rng.int(FILLER.length)]
  return s
}

/** Length of the longest unpadded generated name, which `length.max` must allow. */
function longestBaseName (prefix, count) {
  return prefix.length + String(count - 1).length
}

module.exports = { createKeySet, longestBaseName }
