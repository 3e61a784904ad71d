'use strict'

/**
 * A DynamoDB of its own for a bench run: dynalite in this process, started
 * on `start` (port 0 on 127.0.0.1). See dynalite-process.js.
 */
const { serveChild } = require('./child')
const { startDynalite } = require('../../apps/kv-cache/embedded')

let dynamo = null

serveChild({
  async start () {
    dynamo = dynamo || await startDynalite()
    return { endpoint: dynamo.endpoint }
  },
  async close () {
    if (dynamo) await dynamo.close()
    dynamo = null
  }
})
