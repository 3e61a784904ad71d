'use strict'

const { sliceKey } = require('../../core/keyspace')
const { SliceMap } = require('../../core/slice-map')
const { serverLoads, imbalance, sameLayout } = require('../../core/assignment')
const { strategies } = require('../../controller/strategies')
const { vote, hotKeysOf } = require('../../core/hot-keys')

/**
 * Hot-key cuts (chopper hotKeyShare, docs/algorithm.md): the whole pipeline
 * in a closed loop, without servers. Each period the requests of a fixed key
 * set go through the slices of the current layout, each slice keeps the app
 * servers' majority vote (core/hot-keys.js `vote`, as ShardGuard does), the
 * report entries become inputs.hotKeys (`hotKeysOf`, as the controller does),
 * and chopper rebalances. 3 servers, 10 keys, 3 of them hot (100 requests a
 * period against 10), a new hot set each phase, as in scenarios 1 and 5.
 */
const servers = { a: { url: 'http://127.0.0.1:1/a' }, b: { url: 'http://127.0.0.1:1/b' }, c: { url: 'http://127.0.0.1:1/c' } }
// these tests start from the paper's layout, one slice per server (the default cuts each in 4)
const PAPER_LAYOUT = { initialSlicesPerServer: 1 }
const keys = (hotFrom) => Array.from({ length: 10 }, (_, i) => ({ key: sliceKey(`key-${i}`), weight: i >= hotFrom && i < hotFrom + 3 ? 100 : 10 }))

/** One period's loads and (withHot) hot keys: requests interleaved key by key, as they would arrive. */
function period (a, set, withHot) {
  const map = new SliceMap(a)
  const n = a.slices.length
  const loads = new Float64Array(n)
  const hk = new Float64Array(n).fill(-1)
  const hv = new Float64Array(n)
  const left = set.map((k) => k.weight)
  for (let more = true; more;) {
    more = false
    set.forEach((k, j) => {
      if (left[j] === 0) return
      left[j]--
      more = true
      const i = map.indexOf(k.key)
      loads[i]++
      vote(hk, hv, i, k.key)
    })
  }
  const entries = a.slices.map((s, i) => ({ start: s.start, end: s.end, count: loads[i], ...(hv[i] > 0 ? { hot: { key: hk[i], votes: hv[i] } } : {}) }))
  return { loads, inputs: withHot ? { hotKeys: hotKeysOf(a, entries, loads, loads) } : undefined }
}

/** Per phase: which rounds changed the layout (1) and the imbalance before each round; `layout`: initial's options. */
function run (withHot, rounds = 30, layout = PAPER_LAYOUT) {
  let a = strategies.chopper.initial(servers, layout)
  const phases = []
  for (let p = 0; p < 3; p++) {
    const set = keys(p * 3)
    const changed = []
    const imb = []
    for (let r = 0; r < rounds; r++) {
      const { loads, inputs } = period(a, set, withHot)
      imb.push(imbalance(serverLoads(a, loads)))
      const next = strategies.chopper.rebalance(a, loads, {}, inputs)
      changed.push(sameLayout(a, next) ? 0 : 1)
      a = next
    }
    phases.push({ changed, imb })
  }
  return { phases, final: a }
}

describe('hot-key cuts in a closed loop', () => {
  test('with the votes, a new hot set changes the map in at most 3 rounds, then the map settles; without, it changes every round', () => {
    const cut = run(true)
    const halve = run(false)
    // measured when written: 3, 2 and 1 rounds changed the map; the imbalance before each
    // round was below 1.25 from round 3 of the first phase (from the initial layout) and
    // from round 0 of the next two (their hot keys' slices were already cut)
    for (const [p, { changed, imb }] of cut.phases.entries()) {
      const changes = changed.reduce((x, y) => x + y, 0)
      expect(changes).toBeLessThanOrEqual(3)
      expect(changed.slice(3)).toEqual(new Array(27).fill(0)) // settled: no map for members to install
      expect(Math.max(...imb.slice(p === 0 ? 3 : 2))).toBeLessThan(1.25)
    }
    // measured when written: 30 of 30 rounds changed the map in each phase
    for (const { changed, imb } of halve.phases) {
      expect(changed.reduce((x, y) => x + y, 0)).toBeGreaterThan(20)
      expect(Math.max(...imb.slice(2))).toBeLessThan(1.25)
    }
    // each hot key of the last phase has a slice of its own
    const map = new SliceMap(cut.final)
    for (const k of keys(6).filter((x) => x.weight === 100)) {
      const s = cut.final.slices[map.indexOf(k.key)]
      expect([s.start, s.end]).toEqual([k.key, k.key + 1])
    }
    expect(cut.final.slices.length).toBeLessThan(halve.final.slices.length)
  })

  test('from the default layout (4 slices per server) the first hot set is balanced after 1 round, against 3 from the paper\'s; then the map settles', () => {
    const fine = run(true, 30, {})
    // measured when written: 1.42 before round 0, then 1.01; the paper's layout 1.42, 1.42, 1.27, then 1.01
    expect(fine.phases[0].imb[0]).toBeGreaterThan(1.25)
    for (const { changed, imb } of fine.phases) {
      expect(Math.max(...imb.slice(1))).toBeLessThan(1.25)
      expect(changed.slice(3)).toEqual(new Array(27).fill(0))
    }
    const paper = run(true, 30).phases[0].imb
    expect(Math.min(...paper.slice(0, 3))).toBeGreaterThan(1.25)
    expect(paper[3]).toBeLessThan(1.25)
  })

  test('hotKeyShare 0 turns the cuts off: the same rounds as without votes', () => {
    let a = strategies.chopper.initial(servers, PAPER_LAYOUT)
    let b = strategies.chopper.initial(servers, PAPER_LAYOUT)
    const set = keys(0)
    for (let r = 0; r < 10; r++) {
      const pa = period(a, set, true)
      const pb = period(b, set, false)
      a = strategies.chopper.rebalance(a, pa.loads, { hotKeyShare: 0 }, pa.inputs)
      b = strategies.chopper.rebalance(b, pb.loads, {}, pb.inputs)
      expect(a).toEqual(b)
    }
  })
})

describe('a round with a hot key', () => {
  test('the key is cut out before replication: replicating it costs one key, not the slice it was in', () => {
    const a = strategies.chopper.initial(servers, PAPER_LAYOUT) // 3 slices, 2 servers each
    const loads = [300, 50, 50]
    const h = a.slices[0].start + 12345
    const withKey = strategies.chopper.chopperRound(a, loads, {}, { hotKeys: [{ key: h, load: 270 }, null, null] })
    const without = strategies.chopper.chopperRound(a, loads, {})
    expect(withKey.ops[0]).toEqual({ op: 'split', start: a.slices[0].start, mid: h, end: a.slices[0].end, hotKey: h, server: a.slices[0].servers[0], load: 300 })
    const alone = withKey.assignment.slices.find((s) => s.start === h)
    expect(alone).toEqual({ start: h, end: h + 1, servers: expect.arrayContaining(['a', 'b', 'c']) })
    expect(withKey.churn.replicate).toBe(1)
    expect(without.churn.replicate).toBeGreaterThan(1e8) // a wide slice gained a server
    expect(withKey.imbalance.after).toBeLessThanOrEqual(without.imbalance.after)
  })

  test('a slice with a frozen server is not cut (its load is a stale guess)', () => {
    const a = strategies.chopper.initial(servers, PAPER_LAYOUT)
    const h = a.slices[0].start + 7
    const r = strategies.chopper.chopperRound(a, [300, 50, 50], {}, { hotKeys: [{ key: h, load: 270 }, null, null], unknownServers: [a.slices[0].servers[1]] })
    expect(r.ops.filter((o) => o.hotKey !== undefined)).toEqual([])
  })
})

describe('inputs.hotKeys validation', () => {
  const a = strategies.chopper.initial(servers, PAPER_LAYOUT)
  const loads = a.slices.map(() => 10)
  const round = (hotKeys) => () => strategies.chopper.chopperRound(a, loads, {}, { hotKeys })

  test('one entry per slice, each null or { key, load } inside its slice and its load', () => {
    expect(round(a.slices.map(() => null))).not.toThrow()
    expect(round([null])).toThrow(/invalid inputs.hotKeys: expected an array with one entry per slice \(3\), got an array of length 1/)
    expect(round('x')).toThrow(/invalid inputs.hotKeys/)
    const s = a.slices[1]
    const at = (h) => a.slices.map((_, i) => (i === 1 ? h : null))
    expect(round(at({ key: s.start, load: 10 }))).not.toThrow()
    expect(round(at({ key: s.end, load: 5 }))).toThrow(/invalid inputs.hotKeys\[1\]: expected null or \{ key, load \} with key an integer in the slice/)
    expect(round(at({ key: s.start + 0.5, load: 5 }))).toThrow(/invalid inputs.hotKeys\[1\]/)
    expect(round(at({ key: s.start, load: 11 }))).toThrow(/invalid inputs.hotKeys\[1\].load: expected a finite number in \[0, the slice's load 10\]/)
    expect(round(at({ key: s.start, load: -1 }))).toThrow(/invalid inputs.hotKeys\[1\].load/)
  })

  test('hotKeyShare is a fraction', () => {
    expect(() => strategies.chopper.chopperRound(a, loads, { hotKeyShare: 1.5 })).toThrow(/invalid chopper option hotKeyShare: expected a number in \[0, 1\]/)
  })
})
