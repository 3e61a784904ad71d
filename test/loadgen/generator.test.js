'use strict'

const { PassThrough } = require('node:stream')
const { generate, payloadLines, writePayload, parsePayload } = require('../../loadgen')

const spec = {
  seed: 99,
  defaults: { keys: { count: 50 }, mix: { get: 0.7, set: 0.2, delete: 0.1 }, value: { min: 10, max: 20 } },
  phases: [
    { name: 'a', duration: '2s', rate: 100, distribution: 'uniform' },
    { name: 'b', duration: '1s', rate: 300, distribution: { type: 'zipf', s: 1 }, path: '/compute?key={key}&n=10' },
    { name: 'c', duration: 0.5, rate: 40, keys: { count: 5, prefix: 'c-' } }
  ]
}

const strip = (r) => ({ method: r.method, key: r.key, valueSize: r.valueSize, path: r.path, offsetMs: r.offsetMs })

describe('generate', () => {
  test('the same spec and seed always give the same request sequence', () => {
    const first = [...generate(spec)].map(strip)
    const second = [...generate(JSON.parse(JSON.stringify(spec)))].map(strip)
    expect(second).toEqual(first)
    expect(first).toHaveLength(200 + 300 + 20)
    const other = [...generate({ ...spec, seed: 100 })].map(strip)
    expect(other).not.toEqual(first)
  })

  test('editing one phase leaves the other phases\' sequences unchanged', () => {
    const before = generate(spec)
    const edited = generate({ ...spec, phases: [spec.phases[0], { ...spec.phases[1], rate: 123 }, spec.phases[2]] })
    expect([...edited.requests(0)].map(strip)).toEqual([...before.requests(0)].map(strip))
    expect([...edited.requests(1)].map(strip)).not.toEqual([...before.requests(1)].map(strip))
  })

  test('constant-rate schedule: request i of a phase is due at phase start + i / rate', () => {
    const w = generate(spec)
    expect(w.phases.map((p) => [p.startMs, p.durationMs, p.requests])).toEqual([[0, 2000, 200], [2000, 1000, 300], [3000, 500, 20]])
    expect(w.durationMs).toBe(3500)
    expect(w.totalRequests).toBe(520)
    const b = [...w.requests(1)]
    expect(b[0].offsetMs).toBe(2000)
    expect(b[1].offsetMs).toBeCloseTo(2000 + 1000 / 300, 9)
    expect(b[299].offsetMs).toBeCloseTo(2000 + 299 * 1000 / 300, 9)
    expect(b.every((r, i) => r.seq === i && r.phase === 1)).toBe(true)
  })

  test('get/set/delete mix, value sizes only on sets and within bounds, path template per phase', () => {
    const w = generate({ ...spec, phases: [{ ...spec.phases[0], duration: 100 }, spec.phases[1]] })
    const reqs = [...w.requests(0)]
    const share = (m) => reqs.filter((r) => r.method === m).length / reqs.length
    expect(Math.abs(share('GET') - 0.7)).toBeLessThan(0.02)
    expect(Math.abs(share('PUT') - 0.2)).toBeLessThan(0.02)
    expect(Math.abs(share('DELETE') - 0.1)).toBeLessThan(0.02)
    for (const r of reqs) {
      if (r.method === 'PUT') expect(r.valueSize >= 10 && r.valueSize <= 20).toBe(true)
      else expect(r.valueSize).toBe(0)
      expect(r.path).toBe(`/kv?key=${r.key}`)
    }
    const sizes = new Set(reqs.filter((r) => r.method === 'PUT').map((r) => r.valueSize))
    expect(sizes.size).toBe(11) // every size in [10, 20] occurs
    expect([...w.requests(1)][0].path).toMatch(/^\/compute\?key=key-\d+&n=10$/)
  })

  test('sequential visits every key in order, e.g. to preload a KV store', () => {
    const w = generate({ seed: 1, phases: [{ duration: 1, rate: 25, keys: { count: 10 }, distribution: 'sequential', mix: { set: 1 } }] })
    const keys = [...w.requests(0)].map((r) => r.key)
    expect(keys).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4].map((i) => `key-${i}`))
  })

  test('keys are URL-encoded in the path', () => {
    const w = generate({ seed: 1, phases: [{ duration: 1, rate: 50, keys: ['a b', 'x/y&z', 'ü'] }] })
    const paths = new Set([...w.requests(0)].map((r) => r.path))
    expect(paths).toEqual(new Set(['/kv?key=a%20b', '/kv?key=x%2Fy%26z', '/kv?key=%C3%BC']))
  })

  test('generated keys honour length bounds, are unique, and are the same in phases sharing a key spec', () => {
    const keys = { count: 200, prefix: 'user:', length: { min: 12, max: 20 } }
    const w = generate({ seed: 5, phases: [{ name: 'x', duration: 1, rate: 10, keys }, { name: 'y', duration: 1, rate: 10, keys }] })
    const names = Array.from({ length: 200 }, (_, i) => w.keyName(0, i))
    expect(new Set(names).size).toBe(200)
    for (const n of names) {
      expect(n.startsWith('user:')).toBe(true)
      expect(n.length >= 12 && n.length <= 20).toBe(true)
    }
    expect(Array.from({ length: 200 }, (_, i) => w.keyName(1, i))).toEqual(names)
    expect(new Set(names.map((n) => n.length)).size).toBeGreaterThan(5)
  })
})

describe('payload file', () => {
  test('round-trips: one line per request (method, key, value size) under # phase headers', () => {
    const w = generate(spec)
    const text = [...payloadLines(w)].join('\n') + '\n'
    const lines = text.split('\n')
    expect(lines[0]).toBe('# chopper-loadgen payload v1 seed=99 phases=3 requests=520')
    expect(lines[1]).toBe('# phase index=0 name=a rate=100 duration_ms=2000 requests=200 path=/kv?key={key} content_type=application/octet-stream')
    expect(lines[2]).toMatch(/^(GET|PUT|DELETE)\tkey-\d+\t\d+$/)

    const parsed = parsePayload(text)
    expect(parsed.header).toMatchObject({ seed: '99', phases: '3', requests: '520' })
    expect(parsed.phases.map((p) => [p.name, p.rate, p.requests, p.path])).toEqual([['a', 100, 200, '/kv?key={key}'], ['b', 300, 300, '/compute?key={key}&n=10'], ['c', 40, 20, '/kv?key={key}']])
    expect(parsed.requests).toEqual([...w].map((r) => ({ phase: r.phase, method: r.method, key: r.key, valueSize: r.valueSize })))
  })

  test('a subset of phases, streamed with backpressure', async () => {
    const w = generate({ ...spec, phases: [{ ...spec.phases[0], rate: 20000 }, spec.phases[1]] })
    const out = new PassThrough({ highWaterMark: 1024 })
    let text = ''
    out.on('data', (c) => { text += c })
    // 40000 lines are several 64 KiB chunks against a 1 KiB high-water mark.
    const { requests } = await writePayload(w, out, { phases: [0] })
    out.end()
    expect(requests).toBe(40000)
    const parsed = parsePayload(text)
    expect(parsed.phases.map((p) => p.index)).toEqual([0])
    expect(parsed.requests.map((r) => r.key)).toEqual([...w.requests(0)].map((r) => r.key))
  })

  test('parsePayload rejects a malformed line with its line number', () => {
    expect(() => parsePayload('# chopper-loadgen payload v1\n# phase index=0 path=/kv?key={key}\nGET key-1\n')).toThrow('payload line 3: expected METHOD<TAB>KEY<TAB>VALUE_SIZE')
    expect(() => parsePayload('GET\tk\t0\n')).toThrow('missing "# chopper-loadgen payload" header')
  })
})
