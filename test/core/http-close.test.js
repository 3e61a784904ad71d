'use strict'

const http = require('node:http')
const { listen, close } = require('../../core/http')
const { pollUntil } = require('../../core/poll')

// core/http.js close(): Node's server.close() drops only the keep-alive sockets
// idle at that moment. A socket serving a request then stays open, and a client
// that keeps using it (a member renewing its lease every 150 ms) kept the
// close from ever ending.
describe('close(server)', () => {
  test('resolves while a keep-alive client keeps sending requests on one socket, and lets the request in flight finish', async () => {
    let inFlight = null
    const server = http.createServer((req, res) => {
      if (req.url === '/slow') {
        inFlight = res
        setTimeout(() => res.end('slow done'), 100)
        return
      }
      res.end('ok')
    })
    const port = await listen(server, 0, '127.0.0.1')
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    const get = (path) => new Promise((resolve) => {
      const req = http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (d) => { body += d })
        res.on('end', () => resolve(body))
      })
      req.on('error', (err) => resolve(err.code))
    })
    const slow = get('/slow') // in flight when close() begins
    await pollUntil(() => inFlight !== null, { what: 'the slow request to reach the server' })
    const state = { stop: false }
    const renewals = (async () => { while (!state.stop) await get('/renew') })() // queued behind it on the one socket, then back to back
    const t0 = performance.now()
    const closed = close(server)
    let timer
    const outcome = await Promise.race([
      closed.then(() => 'closed'),
      new Promise((resolve) => { timer = setTimeout(() => resolve('still open after 3 s'), 3000) })
    ])
    clearTimeout(timer)
    state.stop = true
    expect(outcome).toBe('closed')
    expect(performance.now() - t0).toBeLessThan(3000)
    expect(await slow).toBe('slow done') // the request in flight was answered, not cut
    await renewals
    agent.destroy()
  })
})
