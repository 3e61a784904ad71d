'use strict'

const net = require('node:net')
const { freePorts, listen, close } = require('../../core/http')

// core/http.js freePorts(): ports for several children at once. Each probe stays
// bound until all are, so the answers are distinct by construction (one
// freePort() after another can return the same port: seen in CI, EADDRINUSE).
describe('freePorts(count)', () => {
  test('answers count distinct ports, each free to listen on once it returns', async () => {
    const ports = await freePorts(8)
    expect(ports).toHaveLength(8)
    expect(new Set(ports).size).toBe(8)
    for (const p of ports) expect(Number.isInteger(p) && p > 0 && p < 65536).toBe(true)
    const servers = []
    try {
      for (const p of ports) {
        const s = net.createServer()
        servers.push(s)
        expect(await listen(s, p, '127.0.0.1')).toBe(p)
      }
    } finally {
      for (const s of servers) if (s.listening) await close(s)
    }
  })

  test('zero ports is an empty list', async () => {
    expect(await freePorts(0)).toEqual([])
  })
})
