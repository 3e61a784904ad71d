'use strict'

const { startAppProcesses } = require('../../bench/lib/app-process')
const { call } = require('../helpers/http')
const { alive } = require('../helpers/process')

describe('app servers in processes of their own (bench/lib/app-process.js)', () => {
  let servers = []
  afterEach(async () => { await Promise.all(servers.splice(0).map((s) => s.close())) })

  test('each app server is a separate process, serves through the capacity model, and is gone after close', async () => {
    servers = await startAppProcesses('compute', ['app-1', 'app-2'], { capacity: { mode: 'model', computeMsPerMillionOps: 10 }, enforceOwnership: false })
    const pids = servers.map((s) => s.pid)
    expect(new Set([...pids, process.pid]).size).toBe(3)
    for (const s of servers) {
      const r = await call(`${s.url}/compute?key=a&n=1000`)
      expect(r.status).toBe(200)
      expect(r.headers['x-served-by']).toBe(s.id)
      expect(r.body).toMatchObject({ n: 1000, result: null }) // the loop did not run: the model supplied the time
      const stats = await s.stats()
      expect(stats.pid).toBe(s.pid)
      expect(stats.capacity).toMatchObject({ served: 1, busyMs: 10 })
      expect(stats.cache).toBeNull()
    }
    await Promise.all(servers.splice(0).map((s) => s.close()))
    for (const pid of pids) expect(alive(pid)).toBe(false)
  })
})
