'use strict'

const http = require('node:http')
const express = require('express')
const { FifoServer, createCapacity, resolveCapacityOptions, computeServiceMs, kvServiceMs, defaults } = require('../../apps/capacity')
const compute = require('../../apps/compute')
const { listen, close } = require('../../core/http')
const { call } = require('../helpers/http')

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
  })

  test('cpu mode models nothing', async () => {
    const c = createCapacity()
    expect(c.modelled).toBe(false)
    await expect(c.serve(1e9)).resolves.toBeUndefined()
  })
})

describe('compute app with a modelled capacity (real HTTP, real clock)', () => {
  let server
  afterEach(async () => { await close(server) })

  test('requests queue FIFO on the modelled server instead of running the loop', async () => {
    // 20 ms per request for n = 1000: 5 concurrent requests need >= 100 ms on one modelled server.
    const app = express()
    const instance = await compute.create({ capacity: { mode: 'model', computeMsPerMillionOps: 20 } })
    app.use(instance.app)
    server = http.createServer(app)
    const port = await listen(server, 0, '127.0.0.1')
    const t0 = performance.now()
    const rs = await Promise.all(Array.from({ length: 5 }, (_, i) => call(`http://127.0.0.1:${port}/compute?key=k${i}&n=1000`)))
    const elapsed = performance.now() - t0
    for (const r of rs) expect(r).toMatchObject({ status: 200, body: { n: 1000, modelled: true, result: null } })
    expect(elapsed).toBeGreaterThanOrEqual(99)
    expect(instance.capacity.server.stats).toMatchObject({ served: 5, peakQueue: 5, busyMs: 100 })
    // Whichever arrived last waited behind at least three others (arrivals are a few ms apart).
    expect(Math.max(...rs.map((r) => r.body.micros))).toBeGreaterThanOrEqual(80000)
    await instance.close()
  })
})
