'use strict'

/**
 * Time `body(n)` (a loop of n operations that returns a sink value) over
 * `runs` runs after one warm-up, in ns per operation.
 * @returns {{ medianNs: number, minNs: number, maxNs: number, iterations: number, runs: number }}
 */
function nsPerOp (body, iterations, runs = 5) {
  let sink = body(Math.max(1, Math.floor(iterations / 10))) // warm-up: let the JIT settle
  const times = []
  for (let r = 0; r < runs; r++) {
    const t0 = process.hrtime.bigint()
    sink += body(iterations)
    times.push(Number(process.hrtime.bigint() - t0) / iterations)
  }
  times.sort((a, b) => a - b)
  if (sink === 0.5) console.log(sink) // keeps the loops observable
  return { medianNs: times[Math.floor(runs / 2)], minNs: times[0], maxNs: times[runs - 1], iterations, runs }
}

/** `count` distinct ASCII keys of exactly `length` characters, from a seeded generator. */
function keysOfLength (length, count, seed = 1) {
  const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_'
  let s = seed >>> 0
  const next = () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return s }
  const keys = new Array(count)
  for (let i = 0; i < count; i++) {
    let k = ''
    for (let j = 0; j < length; j++) k += alphabet[next() >>> 26]
    keys[i] = k
  }
  return keys
}

module.exports = { nsPerOp, keysOfLength }
