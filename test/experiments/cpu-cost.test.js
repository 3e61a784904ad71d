'use strict'

const { spawn } = require('node:child_process')
const { cpuSnapshot, cpuCost, machineLoad } = require('../../bench/experiments/cpu-cost')

describe('cpu-cost: CPU per response by part', () => {
  test('the router is the SUT tree less its app servers and store; each part per response in µs', () => {
    const before = { tree: 1000, apps: 600, store: 100, client: 50 }
    const after = { tree: 3000, apps: 1800, store: 300, client: 250 }
    // router: (3000 - 1800 - 300) - (1000 - 600 - 100) = 600 ms over 2000 responses = 300 µs
    expect(cpuCost(before, after, 2000)).toEqual({ routerUs: 300, appUs: 600, storeUs: 100, clientUs: 100 })
  })

  test('a part that could not be read, or no responses, gives null rather than a wrong figure', () => {
    const before = { tree: null, apps: 600, store: 0, client: 50 }
    const after = { tree: 3000, apps: 1800, store: 0, client: 250 }
    expect(cpuCost(before, after, 2000)).toEqual({ routerUs: null, appUs: 600, storeUs: 0, clientUs: 100 })
    expect(cpuCost({ ...before, tree: 1000 }, { ...after, apps: null }, 2000)).toEqual({ routerUs: null, appUs: null, storeUs: 0, clientUs: 100 })
    expect(cpuCost({ ...before, tree: 1000 }, after, 0)).toEqual({ routerUs: null, appUs: null, storeUs: null, clientUs: null })
  })

  test('machine load: cores kept busy at the achieved rate, and past 80 % of the cores the run is marked saturated', () => {
    const cost = { routerUs: 400, appUs: 1800, storeUs: 200, clientUs: 300 } // 2,700 µs per response
    expect(machineLoad(cost, 675, 2)).toEqual({ cores: 1.82, machineShare: 0.911, saturated: true })
    expect(machineLoad(cost, 300, 2)).toEqual({ cores: 0.81, machineShare: 0.405, saturated: false })
    expect(machineLoad({ ...cost, appUs: null }, 675, 2)).toBeNull()
    expect(machineLoad(cost, 0, 2)).toBeNull()
  })

  ;(process.platform === 'linux' ? test : test.skip)('cpuSnapshot reads a real process: its CPU time grows while it works, and a gone pid reads null', async () => {
    const code = 'process.on("message", (m) => { const end = Date.now() + m; while (Date.now() < end); process.send("done") })'
    const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] })
    const exited = new Promise((resolve) => child.once('exit', resolve))
    try {
      const processes = { sut: child.pid, appServers: {} }
      const before = cpuSnapshot(processes)
      expect(before.tree).toBeGreaterThanOrEqual(0)
      const done = new Promise((resolve) => child.once('message', resolve))
      child.send(300) // busy for 300 ms of CPU
      await done
      const after = cpuSnapshot(processes)
      expect(after.tree - before.tree).toBeGreaterThanOrEqual(200) // clock ticks are 10 ms
      expect(cpuCost(before, after, 100).routerUs).toBeGreaterThanOrEqual(2000)
    } finally {
      child.kill()
    }
    await exited
    expect(cpuSnapshot({ sut: child.pid, appServers: {} }).tree).toBeNull()
  })
})
