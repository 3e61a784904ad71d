#!/usr/bin/env node
'use strict'

// Lookup time per key on a slice map with 100k slices (binary search over a
// Uint32Array of starts), and the full front-end path: fingerprint32 + lookup.
// Usage: node bench/lookup.js [--slices N] [--lookups N]

const { parseArgs } = require('node:util')
const { SliceMap } = require('../core/slice-map')
const { sliceKey, KEYSPACE_SIZE } = require('../core/keyspace')

const { values } = parseArgs({ options: { slices: { type: 'string', default: '100000' }, lookups: { type: 'string', default: '2000000' } } })
const nSlices = Number(values.slices)
const nLookups = Number(values.lookups)

let seed = 7
const rand = () => { seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0; return seed }

const servers = {}
for (let i = 0; i < 100; i++) servers[`s${i}`] = { url: `http://10.0.0.${i}:9000` }
const ids = Object.keys(servers)
const step = KEYSPACE_SIZE / nSlices
const slices = []
for (let i = 0; i < nSlices; i++) slices.push({ start: Math.floor(i * step), end: Math.floor((i + 1) * step), servers: [ids[i % ids.length]] })
const map = new SliceMap({ generation: 1, slices, servers })

const keys = new Uint32Array(nLookups)
for (let i = 0; i < nLookups; i++) keys[i] = rand()
const appKeys = Array.from({ length: 100000 }, (_, i) => `user-${i}`)

function time (label, n, fn) {
  const runs = []
  for (let r = 0; r < 5; r++) {
    const t0 = process.hrtime.bigint()
    fn()
    runs.push(Number(process.hrtime.bigint() - t0) / n)
  }
  runs.sort((a, b) => a - b)
  console.log(`${label.padEnd(38)} median ${runs[2].toFixed(1)} ns/key  (min ${runs[0].toFixed(1)}, max ${runs[4].toFixed(1)})`)
  return runs[2]
}

let sink = 0
console.log(`slice map: ${nSlices} slices, ${ids.length} servers; ${nLookups} lookups per run, 5 runs`)
time('indexOf (binary search)', nLookups, () => { for (let i = 0; i < nLookups; i++) sink += map.indexOf(keys[i]) })
time('ownerOf (binary search + owner)', nLookups, () => { for (let i = 0; i < nLookups; i++) sink += map.ownerOf(keys[i]).length })
time('fingerprint32 + ownerOf (front-end path)', appKeys.length * 10, () => {
  for (let r = 0; r < 10; r++) for (let i = 0; i < appKeys.length; i++) sink += map.ownerOf(sliceKey(appKeys[i])).length
})
if (sink === -1) console.log(sink)
