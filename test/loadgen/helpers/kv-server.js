'use strict'

const http = require('node:http')
const { once } = require('node:events')

/**
 * A small KV store over HTTP that keeps the last two values of each key and,
 * when `staleEvery` is set, answers every staleEvery-th GET of a key with the
 * older one: a stand-in for a cache replica that missed an invalidation. A
 * DELETE leaves the key without a value (404). `oldAnswers()`: how many GETs
 * it answered with the older value.
 */
async function startKv ({ staleEvery = 0 } = {}) {
  const data = new Map() // key -> [previous, latest]
  let gets = 0
  let oldAnswers = 0 // GETs answered with the older value
  const server = http.createServer((req, res) => {
    const key = new URL(req.url, 'http://x').searchParams.get('key')
    if (req.method === 'PUT') {
      const chunks = []
      req.on('data', (c) => chunks.push(c))
      req.on('end', () => {
        const [, latest] = data.get(key) || []
        data.set(key, [latest, Buffer.concat(chunks)])
        res.writeHead(204).end()
      })
      return
    }
    if (req.method === 'DELETE') {
      const [, latest] = data.get(key) || []
      data.set(key, [latest, undefined])
      return res.writeHead(204).end()
    }
    const pair = data.get(key)
    if (!pair || pair[1] === undefined) return res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}')
    const old = staleEvery > 0 && ++gets % staleEvery === 0 && pair[0] !== undefined
    if (old) oldAnswers++
    res.writeHead(200).end(old ? pair[0] : pair[1])
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { url: `http://127.0.0.1:${server.address().port}`, oldAnswers: () => oldAnswers, close: () => new Promise((resolve) => server.close(resolve)) }
}

module.exports = { startKv }
