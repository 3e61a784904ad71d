'use strict'

/**
 * A DynamoDB of its own for a bench run: dynalite in this process, started
 * on `start` (port 0 on 127.0.0.1). See dynalite-process.js. `latencyMs`
 * (start's argument): every request waits this long before dynalite sees
 * it, DynamoDB's round trip from an instance rather than the loopback's.
 */
const { serveChild } = require('./child')
const { startDynalite } = require('../../apps/kv-cache/embedded')

let dynamo = null

/** Every request event on `server` reaches its listeners `ms` later. */
function delayRequests (server, ms) {
  const listeners = server.listeners('request')
  server.removeAllListeners('request')
  server.on('request', (req, res) => {
    req.pause() // its body waits with it
    setTimeout(() => {
      for (const l of listeners) l.call(server, req, res)
      req.resume()
    }, ms)
  })
}

serveChild({
  async start ({ latencyMs = 0 } = {}) {
    dynamo = dynamo || await startDynalite()
    if (latencyMs > 0) delayRequests(dynamo.server, latencyMs)
    return { endpoint: dynamo.endpoint }
  },
  async close () {
    if (dynamo) await dynamo.close()
    dynamo = null
  }
})
