'use strict'

const http = require('node:http')
const zlib = require('node:zlib')
const { Pusher } = require('../../controller/pusher')
const { resolveMap } = require('../../core/map-diff')
const { pollUntil } = require('../../core/poll')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { createFrontend } = require('../../frontend')

/** A member that applies what it is pushed (diffs, chains, gzipped maps) and records each push. */
async function member () {
  const m = { map: null, pushes: [], refuseDiffs: false }
  m.server = http.createServer((req, res) => {
    const chunks = []
    req.on('data', (b) => chunks.push(b))
    req.on('end', () => {
      let raw = Buffer.concat(chunks)
      if (req.headers['content-encoding'] === 'gzip') raw = zlib.gunzipSync(raw)
      const body = JSON.parse(raw)
      m.pushes.push({ kind: body.kind || 'full', steps: body.steps ? body.steps.length : 0, bytes: raw.length })
      try {
        if (m.refuseDiffs && body.kind === 'diff') throw Object.assign(new Error('base'), { code: 'CHOPPER_ERR_DIFF_BASE' })
        m.map = resolveMap(m.map, body)
      } catch (err) {
        res.writeHead(409, { 'content-type': 'application/json' })
        return res.end(JSON.stringify({ error: { code: err.code, message: err.message }, generation: m.map ? m.map.generation : 0 }))
      }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ accepted: true, generation: m.map.generation, drainedGeneration: m.map.generation }))
    })
  })
  await new Promise((resolve) => m.server.listen(0, '127.0.0.1', resolve))
  m.url = `http://127.0.0.1:${m.server.address().port}`
  return m
}

const servers = { a: { url: 'http://127.0.0.1:1' }, b: { url: 'http://127.0.0.1:2' }, c: { url: 'http://127.0.0.1:3' } }
const half = KEYSPACE_SIZE / 2
const N = 200 // slices in the second half: a map much larger than a step
/** Generation g: the first half's owner is `first`, the second half always c's, in N slices. */
const map = (g, first) => ({
  generation: g,
  servers,
  slices: [{ start: 0, end: half, servers: [first] }, ...Array.from({ length: N }, (_, i) => ({ start: half + Math.floor((i * half) / N), end: half + Math.floor(((i + 1) * half) / N), servers: ['c'] }))]
})

describe('Pusher', () => {
  let pusher
  const members = []
  afterEach(async () => {
    if (pusher) pusher.close()
    for (const m of members.splice(0)) await new Promise((resolve) => m.server.close(resolve))
  })

  test('a newcomer gets the full map, then one step a generation; a holder of an older base gets the chain of steps', async () => {
    pusher = new Pusher()
    const m = await member()
    members.push(m)
    pusher.publish(map(1, 'a'))
    pusher.addTarget('server:a', m.url)
    await pollUntil(() => m.map && m.map.generation === 1, { timeoutMs: 5000, what: 'the full map' })
    pusher.publish(map(2, 'b'))
    await pollUntil(() => m.map.generation === 2, { timeoutMs: 5000, what: 'a step' })
    expect(m.pushes.map((p) => p.kind)).toEqual(['full', 'diff'])
    // Three generations while it is away: one chain of three steps brings it up to date.
    const other = pusher.targets.get('server:a')
    pusher.removeTarget('server:a')
    for (const [g, first] of [[3, 'a'], [4, 'b'], [5, 'a']]) pusher.publish(map(g, first))
    pusher.addTarget('server:a', m.url, other.acked)
    await pollUntil(() => m.map.generation === 5, { timeoutMs: 5000, what: 'the chain' })
    expect(m.pushes[2]).toMatchObject({ kind: 'diff', steps: 3 })
    expect(m.map).toEqual(map(5, 'a'))
  })

  test('a target that refuses a diff (CHOPPER_ERR_DIFF_BASE) gets the full map next', async () => {
    pusher = new Pusher()
    const m = await member()
    members.push(m)
    pusher.publish(map(1, 'a'))
    pusher.addTarget('frontend:f', m.url)
    await pollUntil(() => m.map && m.map.generation === 1, { timeoutMs: 5000, what: 'the full map' })
    m.refuseDiffs = true
    pusher.publish(map(2, 'b'))
    await pollUntil(() => m.map.generation === 2, { timeoutMs: 5000, what: 'the full map after the refusal' })
    expect(m.pushes.map((p) => p.kind)).toEqual(['full', 'diff', 'full'])
  })

  test('with selectiveAbove targets, a generation reaches front ends and the servers it touches, not the others', async () => {
    pusher = new Pusher({ selectiveAbove: 3 })
    const [a, b, c, fe] = [await member(), await member(), await member(), await member()]
    members.push(a, b, c, fe)
    pusher.publish(map(1, 'a'))
    pusher.addTarget('server:a', a.url)
    pusher.addTarget('server:b', b.url)
    pusher.addTarget('server:c', c.url)
    pusher.addTarget('frontend:f', fe.url)
    await pollUntil(() => [a, b, c, fe].every((m) => m.map && m.map.generation === 1), { timeoutMs: 5000, what: 'everyone holds 1' })
    pusher.publish(map(2, 'b')) // the first half moves from a to b; c's half does not change
    await pollUntil(() => [a, b, fe].every((m) => m.map.generation === 2), { timeoutMs: 5000, what: 'a, b and the front end hold 2' })
    expect(c.map.generation).toBe(1)
    expect(c.pushes).toHaveLength(1)
    expect(pusher.stats.selective).toBe(1)
    // c catches up by renewal; the pusher then counts it as holding 2.
    pusher.noteHeld('server:c', 2)
    expect(pusher.laggingCount()).toBe(0)
    // One that its renewal could not bring up to date is pushed on demand.
    pusher.publish(map(3, 'a'))
    pusher.want('server:c')
    await pollUntil(() => c.map.generation === 3, { timeoutMs: 5000, what: 'the push c wanted' })
  })

  test('pushes over lease streams and by HTTP are bounded each on its own; urgent ones go first', async () => {
    // Streamed pushes are held until released: the bound, not the members, decides what is in flight.
    const held = []
    const fe = await member()
    members.push(fe)
    pusher = new Pusher({
      concurrency: 1,
      streamConcurrency: 3,
      canStream: (id) => id !== 'http',
      viaStream: (id, b) => new Promise((resolve) => held.push({ id, resolve: () => resolve({ data: { accepted: true, generation: 1 } }) }))
    })
    pusher.publish(map(1, 'a'))
    for (let i = 0; i < 6; i++) pusher.addTarget(`server:s${i}`, `http://127.0.0.1:${9000 + i}`)
    pusher.addTarget('frontend:fe', fe.url)
    expect(held.map((h) => h.id)).toEqual(['s0', 's1', 's2'])
    expect(pusher.queued).toBe(3)
    // The front end goes by HTTP meanwhile: the streamed ones do not hold its slot.
    await pollUntil(() => fe.map && fe.map.generation === 1, { timeoutMs: 5000, what: 'the front end holds 1' })
    pusher.want('server:s5') // a member that asked goes ahead of s3 and s4
    held.shift().resolve()
    await pollUntil(() => held.length === 3, { timeoutMs: 5000, what: 'the next streamed push' })
    expect(held.map((h) => h.id)).toEqual(['s1', 's2', 's5'])
    await pollUntil(() => {
      while (held.length) held.shift().resolve()
      return pusher.laggingCount() === 0
    }, { timeoutMs: 5000, what: 'every target holds 1' })
    expect(pusher.stats).toMatchObject({ pushes: 7, streamed: 6 })
    expect(pusher.inflight + pusher.inflightStreamed).toBe(0)
  })

  test('a queued push whose way changed (its stream broke) waits once, on the new way', () => {
    let streams = true
    pusher = new Pusher({ concurrency: 1, streamConcurrency: 1, canStream: () => streams, viaStream: () => new Promise(() => {}) })
    pusher.publish(map(1, 'a'))
    for (let i = 0; i < 3; i++) pusher.addTarget(`server:s${i}`, 'http://127.0.0.1:9')
    expect(pusher.queued).toBe(2) // s0 in flight over its stream; s1, s2 wait
    pusher.want('server:s2') // urgent
    streams = false // the streams broke: the next generation queues them by HTTP
    pusher.publish(map(2, 'b'))
    expect(pusher.waiting.stream.queue.size + pusher.waiting.stream.urgent.size).toBe(0)
    expect([...pusher.waiting.http.urgent]).toEqual(['server:s2'])
    expect(pusher.queued).toBe(1) // s1 took the free HTTP slot; s2 waits, urgent, once
  })

  test('a server needs the last generation that changed its slices; only front ends need every one', () => {
    pusher = new Pusher({ selectiveAbove: 1 })
    pusher.publish(map(1, 'a')) // the first map: every server needs it
    expect(['a', 'b', 'c'].map((id) => pusher.needs(id))).toEqual([1, 1, 1])
    pusher.publish(map(2, 'b')) // the first half moves from a to b: c's half does not change
    expect(['a', 'b', 'c'].map((id) => pusher.needs(id))).toEqual([2, 2, 1])
    pusher.publish(map(3, 'a'))
    expect(['a', 'b', 'c'].map((id) => pusher.needs(id))).toEqual([3, 3, 1])
    expect(pusher.needs('unknown')).toBe(3) // not in the map: the latest
    // Lagging counts what each must hold: c at 1 is not behind; a front end at 2 is.
    pusher.targets.set('server:c', { url: 'http://127.0.0.1:9', acked: 1, full: false, inflight: true, timer: null })
    pusher.targets.set('server:a', { url: 'http://127.0.0.1:9', acked: 2, full: false, inflight: true, timer: null })
    pusher.targets.set('frontend:fe', { url: 'http://127.0.0.1:9', acked: 2, full: false, inflight: true, timer: null })
    expect(pusher.lagging().map((l) => l.target).sort()).toEqual(['frontend:fe', 'server:a'])
    expect(pusher.laggingCount()).toBe(2)
    expect(pusher.ackedBy('server:c')).toBe(1)
    pusher.targets.clear()
  })

  test('full maps over gzipAbove are sent gzipped; each body is signed once for every target', async () => {
    pusher = new Pusher({ gzipAbove: 10, clusterToken: 'pusher-test-token-0123456789' })
    const [a, b] = [await member(), await member()]
    members.push(a, b)
    pusher.publish(map(1, 'a'))
    const first = pusher.bodyFor(0)
    expect(first.headers['content-encoding']).toBe('gzip')
    expect(first.headers['x-chopper-map-signature']).toMatch(/^\d+\.[A-Za-z0-9_-]{43}$/)
    expect(pusher.bodyFor(0)).toBe(first) // the same body, hashed and signed once
    pusher.addTarget('server:a', a.url)
    pusher.addTarget('server:b', b.url)
    await pollUntil(() => a.map && b.map, { timeoutMs: 5000, what: 'both hold the map' })
    expect(a.map).toEqual(map(1, 'a'))
  })

  test('diffs over gzipAbove go gzipped too, and a real front end installs them', async () => {
    const clusterToken = 'pusher-test-token-0123456789'
    pusher = new Pusher({ gzipAbove: 10, clusterToken })
    const fe = createFrontend({ port: 0, controlPort: 0, clusterToken })
    await fe.start()
    try {
      pusher.publish(map(1, 'a'))
      pusher.addTarget('frontend:f', fe.urls.controlUrl)
      await pollUntil(() => fe.table.generation === 1, { timeoutMs: 5000, what: 'the full map' })
      pusher.publish(map(2, 'b'))
      const step = pusher.bodyFor(1)
      expect(step.diff).toBe(true)
      expect(step.headers['content-encoding']).toBe('gzip')
      expect(JSON.parse(zlib.gunzipSync(step.body))).toEqual(JSON.parse(step.raw))
      await pollUntil(() => fe.table.generation === 2, { timeoutMs: 5000, what: 'the gzipped diff' })
      expect(fe.table.map.assignment).toEqual(map(2, 'b'))
      expect(pusher.stats.diffs).toBe(1)
    } finally {
      await fe.close()
    }
  })
})
