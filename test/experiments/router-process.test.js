'use strict'

const { startRouterProcess } = require('../../bench/experiments/router-process')
const { alive } = require('../helpers/process')

describe('router processes (experiments, routers: separate)', () => {
  test('a controller and a front end each in a process of their own: the front end routes with the controller\'s map, and close ends both', async () => {
    const controller = await startRouterProcess('controller', { host: '127.0.0.1', port: 0, periodMs: 200, startupFenceMs: 0 })
    let fe
    try {
      fe = await startRouterProcess('frontend', { id: 'fe-1', host: '127.0.0.1', port: 0, controllerUrl: controller.url })
      expect(new Set([process.pid, controller.pid, fe.pid]).size).toBe(3)
      expect(fe.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
      const status = await controller.status()
      expect(status).toEqual(expect.objectContaining({ generation: expect.any(Number), servers: {} }))
      expect(await fe.status()).toEqual({ generation: expect.any(Number) })
    } finally {
      if (fe) await fe.close()
      await controller.close()
    }
    expect(alive(controller.pid)).toBe(false)
    expect(alive(fe.pid)).toBe(false)
  })

  test('a component that refuses its options, or a child that exits at once, makes the start reject with the reason', async () => {
    await expect(startRouterProcess('frontend', { host: '127.0.0.1', port: 0, connections: -1 })).rejects.toThrow(/start/)
    await expect(startRouterProcess('nonsense', {})).rejects.toThrow(/exited/)
  })
})
