'use strict'

const fc = require('fast-check')
const { KEYSPACE, DELETE, badCounter, implausibleCounter, badUrl, jsonJunk, deepValue, text } = require('./arbitraries')

/**
 * Assignments for `PUT /v1/assignment` (app servers and front ends): a valid
 * one newer than the installed map, and the same with exactly one fault from
 * the catalogue below. One fault each, applied last, so no two can cancel:
 * every faulty assignment is one the receiver must refuse (400, or 409 for a
 * stale generation) while keeping its map.
 */

const IDS = ['a', 'b', 'c', 'd', 'e']

/**
 * A valid assignment above generation `current`, over 1-4 servers (and
 * `extraIds`, e.g. the receiver's own id), with up to `maxSlices` slices.
 * @param {{ current: number, extraIds?: string[], maxSlices?: number }} ctx
 */
function validAssignment ({ current, extraIds = [], maxSlices = 24 }) {
  const ids = [...new Set([...extraIds, ...IDS])]
  return fc.record({
    bump: fc.integer({ min: 1, max: 1000 }),
    serverIds: fc.shuffledSubarray(ids, { minLength: 1, maxLength: 4 }),
    cuts: fc.uniqueArray(fc.integer({ min: 1, max: KEYSPACE - 1 }), { maxLength: maxSlices - 1 }),
    picks: fc.array(fc.array(fc.nat(), { minLength: 1, maxLength: 3 }), { minLength: maxSlices, maxLength: maxSlices }),
    port: fc.integer({ min: 1, max: 65535 }),
    epoch: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined })
  }).map(({ bump, serverIds, cuts, picks, port, epoch }) => {
    const bounds = [0, ...cuts.sort((x, y) => x - y), KEYSPACE]
    const slices = []
    for (let i = 0; i + 1 < bounds.length; i++) {
      const servers = [...new Set(picks[i].map((p) => serverIds[p % serverIds.length]))]
      slices.push({ start: bounds[i], end: bounds[i + 1], servers })
    }
    const servers = Object.fromEntries(serverIds.map((id, i) => [id, { url: `http://127.0.0.1:${((port + i) % 65535) + 1}` }]))
    const a = { generation: current + bump, slices, servers }
    if (epoch !== undefined) a.epoch = epoch
    return a
  })
}

const clone = (a) => JSON.parse(JSON.stringify(a))
const idx = (n) => fc.nat().map((x) => x % n)

/**
 * The fault catalogue. Each entry: (assignment, ctx) => arbitrary of a
 * faulty copy, or null when it does not apply to this assignment (too few
 * slices, say).
 */
const FAULTS = {
  notAnObject: () => fc.oneof(jsonJunk.filter((v) => v === null || typeof v !== 'object' || Array.isArray(v)), fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 })),
  badGeneration: (a) => fc.oneof(badCounter, fc.constant(DELETE)).map((g) => set(a, 'generation', g)),
  implausibleGeneration: (a) => implausibleCounter.map((g) => set(a, 'generation', g)),
  staleGeneration: (a, { current }) => fc.integer({ min: 1, max: Math.max(1, current) }).map((k) => set(a, 'generation', Math.max(0, current - k))),
  badEpoch: (a) => badCounter.map((e) => set(a, 'epoch', e)),
  implausibleEpoch: (a) => implausibleCounter.map((e) => set(a, 'epoch', e)),
  badServersMap: (a) => fc.oneof(fc.constantFrom(null, [], 'a', 1, true), fc.constant(DELETE), fc.constant({})).map((v) => set(a, 'servers', v)),
  badServerUrl: (a) => fc.tuple(fc.constantFrom(...Object.keys(a.servers)), fc.oneof(badUrl.filter((u) => typeof u !== 'string' || !/^https?:\/\/[\x21-\x7e]+$/.test(u)), fc.constant(DELETE))).map(([id, url]) => {
    const b = clone(a)
    if (url === DELETE) delete b.servers[id].url
    else b.servers[id].url = url
    return b
  }),
  badServerEntry: (a) => fc.tuple(fc.constantFrom(...Object.keys(a.servers)), fc.constantFrom(null, 'http://127.0.0.1:1', 1, [], true)).map(([id, v]) => {
    const b = clone(a)
    b.servers[id] = v
    return b
  }),
  emptyServerId: (a) => fc.constant(null).map(() => {
    const b = clone(a)
    b.servers[''] = { url: 'http://127.0.0.1:1' }
    return b
  }),
  badSlices: (a) => fc.oneof(fc.constantFrom(null, {}, 'slices', 0, []), fc.constant(DELETE)).map((v) => set(a, 'slices', v)),
  badSliceEntry: (a) => fc.tuple(idx(a.slices.length), fc.constantFrom(null, 0, 'x', true, [], [0, KEYSPACE])).map(([i, v]) => setSlice(a, i, () => v)),
  badBound: (a) => fc.tuple(idx(a.slices.length), fc.constantFrom('start', 'end'), fc.oneof(badCounter, fc.constantFrom(KEYSPACE + 1, 2 ** 40, DELETE))).map(([i, field, v]) => setSlice(a, i, (s) => with1(s, field, v))),
  emptyRange: (a) => fc.tuple(idx(a.slices.length), fc.nat()).map(([i, d]) => setSlice(a, i, (s) => ({ ...s, end: s.start - (d % (s.start + 1)) }))),
  gapAtStart: (a) => (a.slices[0].end < 2 ? null : fc.integer({ min: 1, max: a.slices[0].end - 1 }).map((start) => setSlice(a, 0, (s) => ({ ...s, start })))),
  shortEnd: (a) => {
    const last = a.slices[a.slices.length - 1]
    if (KEYSPACE - last.start < 2) return null
    return fc.integer({ min: last.start + 1, max: KEYSPACE - 1 }).map((end) => setSlice(a, a.slices.length - 1, (s) => ({ ...s, end })))
  },
  dropSlice: (a) => idx(a.slices.length).map((i) => {
    const b = clone(a)
    b.slices.splice(i, 1)
    return b
  }),
  duplicateSlice: (a) => idx(a.slices.length).map((i) => {
    const b = clone(a)
    b.slices.splice(i, 0, clone(a.slices[i]))
    return b
  }),
  overlap: (a) => (a.slices.length < 2
    ? null
    : fc.tuple(fc.integer({ min: 1, max: a.slices.length - 1 }), fc.nat()).map(([i, d]) => setSlice(a, i, (s) => {
      const prev = a.slices[i - 1]
      return { ...s, start: prev.start + (d % (prev.end - prev.start)) }
    }))),
  unsorted: (a) => (a.slices.length < 2
    ? null
    : fc.integer({ min: 0, max: a.slices.length - 2 }).map((i) => {
      const b = clone(a)
      ;[b.slices[i], b.slices[i + 1]] = [b.slices[i + 1], b.slices[i]]
      return b
    })),
  emptyServerList: (a) => fc.tuple(idx(a.slices.length), fc.constantFrom([], null, 'a', {}, DELETE)).map(([i, v]) => setSlice(a, i, (s) => with1(s, 'servers', v))),
  unknownServer: (a) => fc.tuple(idx(a.slices.length), fc.oneof(text(8), fc.constantFrom('zz', 'toString', '__proto__', 'constructor', 'hasOwnProperty'))).filter(([, id]) => !Object.hasOwn(a.servers, id)).map(([i, id]) => setSlice(a, i, (s) => ({ ...s, servers: [...s.servers, id] }))),
  nonStringServer: (a) => fc.tuple(idx(a.slices.length), fc.oneof(jsonJunk.filter((v) => typeof v !== 'string'), deepValue)).map(([i, v]) => setSlice(a, i, (s) => ({ ...s, servers: [v, ...s.servers] }))),
  duplicatedServer: (a) => idx(a.slices.length).map((i) => setSlice(a, i, (s) => ({ ...s, servers: [...s.servers, s.servers[0]] }))),
  badMoving: (a) => fc.tuple(idx(a.slices.length), fc.constantFrom(null, 1, 0, 'true', 'false', [], {})).map(([i, v]) => setSlice(a, i, (s) => ({ ...s, moving: v }))),
  holdersWithoutMoving: (a) => idx(a.slices.length).map((i) => setSlice(a, i, (s) => ({ ...s, holders: [s.servers[0]] }))),
  badHolders: (a) => fc.tuple(idx(a.slices.length), fc.oneof(
    fc.constantFrom([], null, 'a', {}, 0),
    fc.constant('dup'),
    fc.constant('outsider'),
    deepValue.map((d) => [d])
  )).map(([i, v]) => setSlice(a, i, (s) => {
    let holders = v
    if (v === 'dup') holders = [s.servers[0], s.servers[0]]
    if (v === 'outsider') holders = ['not-a-server-of-this-slice']
    return { ...s, moving: true, holders }
  })),
  // Many slices (bounded: what a 64 MB body limit allows is far more), the fault at the very end.
  hugeWithFault: (a, { hugeSlices = 20000 }) => fc.tuple(fc.integer({ min: 1000, max: hugeSlices }), fc.constantFrom('shortEnd', 'unknownServer', 'unsortedTail')).map(([n, how]) => {
    const id = Object.keys(a.servers)[0]
    const step = Math.floor(KEYSPACE / n)
    const slices = []
    for (let i = 0; i < n; i++) slices.push({ start: i * step, end: i === n - 1 ? KEYSPACE : (i + 1) * step, servers: [id] })
    const last = slices[n - 1]
    if (how === 'shortEnd') last.end = KEYSPACE - 1
    if (how === 'unknownServer') last.servers = ['nobody']
    if (how === 'unsortedTail') [slices[n - 2], slices[n - 1]] = [slices[n - 1], slices[n - 2]]
    return { ...a, slices }
  })
}

function set (a, field, v) {
  const b = clone(a)
  if (v === DELETE) delete b[field]
  else b[field] = v
  return b
}

function with1 (s, field, v) {
  const out = { ...s }
  if (v === DELETE) delete out[field]
  else out[field] = v
  return out
}

function setSlice (a, i, fn) {
  const b = clone(a)
  b.slices[i] = fn(b.slices[i])
  return b
}

/**
 * A faulty assignment: a valid one with one fault from FAULTS.
 * @param {{ current: number, extraIds?: string[], hugeSlices?: number }} ctx
 * @returns {fc.Arbitrary<object>} tagged with a non-enumerable `fault` name
 */
function faultyAssignment (ctx) {
  const names = Object.keys(FAULTS)
  return fc.tuple(validAssignment(ctx), fc.constantFrom(...names)).chain(([a, name]) => {
    let arb = FAULTS[name](a, ctx)
    if (arb === null) arb = FAULTS.badGeneration(a, ctx) // the fault does not apply to this layout
    return arb
  })
}

module.exports = { validAssignment, faultyAssignment, FAULTS, IDS }
