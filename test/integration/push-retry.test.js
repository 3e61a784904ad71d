'use strict'

const { freePort } = require('../../core/http')
const http = require('node:http')
const { Pusher } = require('../../controller/pusher')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { pollUntil } = require('../../core/poll')

const assignment = (generation) => ({ generation, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['a'] }], servers: { a: { url: 'http://127.0.0.1:1' } } })

describe('assignment pushes', () => {
  let pusher
  let server
  afterEach(async () => {
    if (pusher) pusher.close()
    if (server) await new Promise((resolve) => server.close(resolve))
    pusher = server = null
  })

  test('a failed push is retried until the target answers, and only the newest generation is delivered', async () => {
    const port = await freePort()
    pusher = new Pusher({ minBackoffMs: 20, maxBackoffMs: 100 })
    pusher.addTarget('frontend:late', `http://127.0.0.1:${port}`)
    pusher.publish(assignment(1))
    await pollUntil(() => pusher.stats.failures >= 2, { timeoutMs: 5000, what: 'failed pushes' })
    expect(pusher.lagging()).toEqual([expect.objectContaining({ target: 'frontend:late', acked: 0 })])
    pusher.publish(assignment(2)) // superseded while the target is down

    const received = []
    server = http.createServer((req, res) => {
      let body = ''
      req.on('data', (d) => { body += d })
      req.on('end', () => { received.push(JSON.parse(body).generation); res.end('{}') })
    })
    await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve))
    await pollUntil(() => pusher.lagging().length === 0, { timeoutMs: 5000, what: 'push delivered' })
    expect(received).toEqual([2])
  })
})
