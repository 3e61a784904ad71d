'use strict'

const http = require('node:http')
const express = require('express')
const { FifoServer, withCapacity, resolveCapacityOptions, computeServiceMs, kvServiceMs, kvOutcome, MODELS, defaults } = require('../../bench/lib/capacity')
const compute = require('../../apps/compute')
const { listen, close } = require('../../core/http')
const { call } = require('../helpers/http')
const { pollUntil } = require('../../core/poll')
const { serverTimingMs } = require('../../loadgen/server-timing')

const pollFor = (fn) => pollUntil(fn, { timeoutMs: 2000, intervalMs: 2, what: 'the modelled server to hold the requests' })

describe('FifoServer (fake clock)', () => {
  beforeEach(() => jest.useFakeTimers())
  afterEach(() => jest.useRealTimers())

  test('serves in arrival order: a short job never overtakes a long one ahead of it', async () => {
    const s = new FifoServer()
    const t0 = performance.now()
    const done = []
    const jobs = [5, 1, 3].map((ms, i) => s.serve(ms).then((r) => done.push({ i, at: performance.now() - t0, ...r })))
    await jest.advanceTimersByTimeAsync(20)
    await Promise.all(jobs)
    expect(done.map((d) => d.i)).toEqual([0, 1, 2])
    expect(done.map((d) => Math.round(d.at))).toEqual([5, 6, 9])
    expect(done.map((d) => d.waitMs)).toEqual([0, 5, 6])
  })

  test('honours the service rate: 100 jobs of 4 ms take 400 ms, 50 are done at 200 ms', async () => {
    const s = new FifoServer()
    let completed = 0
    const jobs = Array.from({ length: 100 }, () => s.serve(4).then(() => completed++))
    await jest.advanceTimersByTimeAsync(200)
    expect(completed).toBe(50)
    await jest.advanceTimersByTimeAsync(199)
    expect(completed).toBe(99)
    await jest.advanceTimersByTimeAsync(1)
    await Promise.all(jobs)
    expect(completed).toBe(100)
    expect(s.stats).toMatchObject({ served: 100, busyMs: 400, peakQueue: 100 })
  })

  test('a job enqueued late is timed from its arrival: the time the real work took is hidden in the service time', async () => {
    const s = new FifoServer()
    const arrival = performance.now()
    await jest.advanceTimersByTimeAsync(3) // the app worked for 3 ms before answering
    let doneAt = null
    const job = s.serve(5, arrival).then(() => { doneAt = performance.now() - arrival })
    await jest.advanceTimersByTimeAsync(10)
    await job
    expect(Math.round(doneAt)).toBe(5)
  })

  test('queueing delay grows without bound under overload and stays 0 below capacity', async () => {
    const waits = async (interarrivalMs) => {
      const s = new FifoServer()
      const out = []
      const jobs = []
      for (let k = 0; k < 20; k++) {
        jobs.push(s.serve(4).then((r) => out.push(r.waitMs)))
        await jest.advanceTimersByTimeAsync(interarrivalMs)
      }
      await jest.advanceTimersByTimeAsync(200)
      await Promise.all(jobs)
      return out
    }
    const over = await waits(3) // 133 % load: each arrival waits 1 ms longer than the last
    expect(over).toEqual(Array.from({ length: 20 }, (_, k) => k))
    const under = await waits(5) // 80 % load, evenly spaced: nobody waits
    expect(under.every((w) => w === 0)).toBe(true)
  })

  test('refuses past maxQueue with a 503, and flush completes everything queued', async () => {
    const s = new FifoServer({ maxQueue: 2 })
    const a = s.serve(1000)
    const b = s.serve(1000)
    await expect(s.serve(1)).rejects.toMatchObject({ status: 503, code: 'CHOPPER_ERR_UPSTREAM_UNAVAILABLE' })
    expect(s.stats.refused).toBe(1)
    s.flush()
    await expect(Promise.all([a, b])).resolves.toHaveLength(2)
    expect(s.length).toBe(0)
  })
})

describe('capacity options and service times', () => {
  test('defaults: cpu mode; ~250 req/s per modelled server for the paper workloads', () => {
    expect(defaults.mode).toBe('cpu')
    const o = resolveCapacityOptions({ mode: 'model' })
    expect(computeServiceMs(1000, o)).toBe(4)
    expect(kvServiceMs('hit', o)).toBe(3)
    expect(kvServiceMs('miss', o)).toBe(8)
    expect(kvServiceMs('write', o)).toBe(8)
    expect(0.8 * kvServiceMs('hit', o) + 0.2 * kvServiceMs('write', o)).toBeCloseTo(4)
  })

  test('bad options are refused with an error naming the option', () => {
    expect(() => resolveCapacityOptions({ mode: 'fast' })).toThrow(/capacity\.mode/)
    expect(() => resolveCapacityOptions({ kvHitMs: -1 })).toThrow(/capacity\.kvHitMs/)
    expect(() => resolveCapacityOptions({ maxQueue: 0 })).toThrow(/capacity\.maxQueue/)
    expect(() => resolveCapacityOptions({ typo: 1 })).toThrow(/capacity\.typo: unknown option/)
    expect(() => resolveCapacityOptions(null)).toThrow(/invalid capacity/)
    expect(() => withCapacity(() => {}, { app: 'nope' })).toThrow(/invalid app/)
  })

  test('KV outcome: the app\'s X-KV-Outcome header first, then what the response shows', () => {
    const res = (status, headers = {}) => ({ statusCode: status, getHeader: (h) => headers[h.toLowerCase()] })
    expect(kvOutcome({ method: 'GET' }, res(200, { 'x-kv-outcome': 'miss', 'x-chopper-cache': 'hit' }))).toBe('miss')
    expect(kvOutcome({ method: 'PUT' }, res(204, { 'x-kv-outcome': 'write' }))).toBe('write')
    expect(kvOutcome({ method: 'GET' }, res(200, { 'x-chopper-cache': 'hit' }))).toBe('hit')
    expect(kvOutcome({ method: 'GET' }, res(200))).toBe('miss')
    expect(kvOutcome({ method: 'GET' }, res(404))).toBe('miss') // a key nobody wrote: the store was read
    expect(kvOutcome({ method: 'PUT' }, res(204))).toBe('write')
    expect(kvOutcome({ method: 'PUT' }, res(421))).toBeNull() // refused: no work, no queue
    expect(kvOutcome({ method: 'GET' }, res(503))).toBeNull()
    const o = resolveCapacityOptions({ mode: 'model' })
    expect(MODELS['kv-cache'].serviceMs({ method: 'GET' }, res(200, { 'x-kv-outcome': 'hit' }), o)).toBe(3)
    expect(MODELS['kv-cache'].serviceMs({ method: 'GET' }, res(200, { 'x-kv-outcome': 'miss' }), o)).toBe(8)
    // a miss answered by a DynamoDB read another GET started made no store call of its own
    expect(kvOutcome({ method: 'GET' }, res(200, { 'x-kv-outcome': 'shared', 'x-chopper-cache': 'miss' }))).toBe('shared')
    expect(MODELS['kv-cache'].serviceMs({ method: 'GET' }, res(200, { 'x-kv-outcome': 'shared' }), o)).toBe(3)
    expect(MODELS.compute.serviceMs({ url: '/compute?key=a&n=2000' }, res(200), o)).toBe(16)
    expect(MODELS.compute.serviceMs({ url: '/compute?key=a' }, res(200), o)).toBe(4) // the app's default n
    expect(MODELS.compute.serviceMs({ url: '/compute?n=x' }, res(400), o)).toBe(0)
  })
})

describe('withCapacity: an app wrapped as one modelled FIFO server (real HTTP, real clock)', () => {
  let server
  afterEach(async () => { if (server) await close(server); server = null })

  /** Host `handler` in Express behind withCapacity; resolves the base URL. */
  async function host (handler, options) {
    const model = withCapacity(handler, options)
    const app = express()
    app.use(model.app)
    app.use((err, req, res, next) => res.status(err.status || 500).json({ error: { code: err.code, message: err.message } }))
    server = http.createServer(app)
    const port = await listen(server, 0, '127.0.0.1')
    return { url: `http://127.0.0.1:${port}`, model }
  }

  test('the compute app (work: false) answers at once; the wrapper holds each response for its service time, in arrival order', async () => {
    const instance = await compute.create(MODELS.compute.appOptions)
    const costs = []
    // 80 ms per request for n = 1000: 5 concurrent requests need >= 400 ms on one modelled server. (With 20 ms,
    // a busy CI machine once let the first answer leave before the fifth request arrived: a peak queue of 4.)
    const { url, model } = await host(instance.app, { app: 'compute', capacity: { computeMsPerMillionOps: 80 }, reportCost: (req, ms) => costs.push(ms) })
    const t0 = performance.now()
    const rs = await Promise.all(Array.from({ length: 5 }, (_, i) => call(`${url}/compute?key=k${i}&n=1000`).then((r) => ({ ...r, at: performance.now() - t0 }))))
    for (const r of rs) expect(r).toMatchObject({ status: 200, body: { n: 1000, result: null } })
    // The loop did not run: the app's own time is tiny; the modelled time is not.
    expect(Math.max(...rs.map((r) => r.body.micros))).toBeLessThan(5000)
    expect(model.stats()).toMatchObject({ served: 5, peakQueue: 5, busyMs: 400, inSystem: 0 })
    expect(costs).toEqual([80, 80, 80, 80, 80]) // the modelled service time is each request's cost, not its wait
    // One at a time: the k-th response cannot leave before k service times (the model never finishes a job early).
    const at = rs.map((r) => r.at).sort((a, b) => a - b)
    at.forEach((t, k) => expect(t).toBeGreaterThanOrEqual(80 * (k + 1) - 0.5))
    await instance.close()
  })

  test('the service rate holds under a burst: 20 requests of 10 ms take >= 200 ms, spaced by the service time', async () => {
    const { url } = await host((req, res) => res.end('ok'), { serviceMs: () => 10 })
    const t0 = performance.now()
    const at = await Promise.all(Array.from({ length: 20 }, () => call(url).then(() => performance.now() - t0)))
    at.sort((a, b) => a - b)
    expect(at[19]).toBeGreaterThanOrEqual(199)
    expect(at[9]).toBeGreaterThanOrEqual(99) // the 10th response cannot leave before 10 service times
  })

  test('KV: the service time follows X-KV-Outcome, and refusals (421) leave at once without queueing', async () => {
    const handler = (req, res) => {
      const outcome = req.query.o
      if (outcome === 'refuse') return res.status(421).json({ error: { code: 'CHOPPER_ERR_NOT_PRIMARY' } })
      res.setHeader('X-KV-Outcome', outcome)
      res.end('v')
    }
    // A miss long enough that a refusal queued behind it could not pass for one that did not, on a busy CI machine.
    const { url, model } = await host(handler, { app: 'kv-cache', capacity: { kvHitMs: 30, kvStoreMs: 450 } })
    const slow = call(`${url}/kv?o=miss`) // occupies the server for 480 ms
    const t0 = performance.now()
    const refused = await call(`${url}/kv?o=refuse`)
    expect(refused.status).toBe(421)
    expect(performance.now() - t0).toBeLessThan(300) // did not wait behind the miss
    const hit = await call(`${url}/kv?o=hit`) // behind the miss: done at >= 480 + 30 ms after the miss arrived
    expect(hit.status).toBe(200)
    expect(performance.now() - t0).toBeGreaterThanOrEqual(500)
    expect((await slow).status).toBe(200)
    expect(model.stats()).toMatchObject({ served: 2, busyMs: 510 })
  })

  test('each modelled response states its time in the server (Server-Timing: queue and service); a refusal states none', async () => {
    const handler = (req, res) => {
      if (req.query.o === 'refuse') return res.status(421).json({ error: { code: 'CHOPPER_ERR_NOT_PRIMARY' } })
      res.setHeader('X-KV-Outcome', 'hit')
      res.end('v')
    }
    const { url } = await host(handler, { app: 'kv-cache', capacity: { kvHitMs: 100 } })
    const [first, second] = await Promise.all([call(`${url}/kv?o=hit`), call(`${url}/kv?o=hit`)])
    const durs = [first, second].map((r) => serverTimingMs(r.headers['server-timing'])).sort((a, b) => a - b)
    expect(durs[0]).toBeGreaterThanOrEqual(99.5) // its service
    // the later one: the rest of the other's service (200 ms after the first arrived), less the gap
    // between the two arrivals (sent together, far under 50 ms even on a busy machine), then its own
    expect(durs[1]).toBeGreaterThanOrEqual(150)
    expect((await call(`${url}/kv?o=refuse`)).headers['server-timing']).toBeUndefined()
  })

  test('past maxQueue requests in the system, a new request gets 503 before the app runs', async () => {
    let ran = 0
    const { url, model } = await host((req, res) => { ran++; res.end('ok') }, { serviceMs: () => 100, capacity: { maxQueue: 2 } })
    const first = [call(url), call(url)]
    await pollFor(() => model.stats().inSystem === 2)
    const third = await call(url)
    expect(third.status).toBe(503)
    expect(third.body.error.code).toBe('CHOPPER_ERR_UPSTREAM_UNAVAILABLE')
    expect(ran).toBe(2)
    expect((await Promise.all(first)).map((r) => r.status)).toEqual([200, 200])
    expect(model.stats().refused).toBe(1)
  })

  test('close() releases every held response at once', async () => {
    const { url, model } = await host((req, res) => res.end('ok'), { serviceMs: () => 60000 })
    const pending = call(url)
    await pollFor(() => model.server.length === 1)
    model.close()
    expect((await pending).status).toBe(200)
  })
})
