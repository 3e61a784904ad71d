'use strict'

/**
 * What the controller writes to its state store as membership and layout
 * change faster (issue: "state saves stay bounded"). A real controller with
 * a DynamoDB state store (dynalite in its own process, `--latency-ms` per
 * request) holds `--members` protocol-level members: they register over
 * HTTP and share one sink that acknowledges every push, so only the
 * controller's saving is measured. It then makes operator moves at each
 * rate of `--rates` for `--seconds` each and reports, per rate, the changes
 * made, the saves written, and the bytes written per change and per second.
 * Saves are coalesced (controller/persistence.js), so bytes per second stay
 * bounded by the store's latency while bytes per change fall.
 *
 *   node bench/state-saves.js [--members 5000] [--rates 1,10,100,1000] [--seconds 5] [--latency-ms 5]
 *
 * A script, not a test: it prints figures and asserts nothing.
 */

const http = require('node:http')
const { parseArgs } = require('node:util')
const { createController } = require('../controller')
const { DynamoStateStore } = require('../controller/state-store')
const { JsonClient } = require('../core/json-client')
const { pollUntil } = require('../core/poll')
const { startDynaliteProcess } = require('./lib/dynalite-process')
const { KEYSPACE_SIZE } = require('../core/keyspace')
const { createRng } = require('../loadgen/prng')

const { values } = parseArgs({
  options: {
    members: { type: 'string', default: '5000' },
    rates: { type: 'string', default: '1,10,100,1000' },
    seconds: { type: 'string', default: '5' },
    'latency-ms': { type: 'string', default: '5' }
  }
})

async function main () {
  const members = Number(values.members)
  const rates = values.rates.split(',').map(Number)
  const seconds = Number(values.seconds)
  const dynamo = await startDynaliteProcess({ latencyMs: Number(values['latency-ms']) })
  // One sink acknowledges every push for every member: the members' cost is not the point.
  const sink = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const g = Number(req.headers['x-chopper-generation']) || 0
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ accepted: true, generation: g, drainedGeneration: g }))
    })
  })
  await new Promise((resolve) => sink.listen(0, '127.0.0.1', resolve))
  const sinkUrl = `http://127.0.0.1:${sink.address().port}`
  const store = new DynamoStateStore({ table: 'state-saves-bench', endpoint: dynamo.endpoint, timeoutMs: 10000 })
  // Leases far longer than the run, so members need not renew; handoff 'none', so a move needs no acknowledgement.
  const controller = createController({ store, handoff: 'none', periodMs: 3600000, leaseMs: 3600000, startupFenceMs: 0, electionLeaseMs: 60000 })
  const client = new JsonClient({ connections: 64, timeoutMs: 30000 })
  try {
    await controller.start()
    await pollUntil(() => controller.leading, { timeoutMs: 30000, what: 'the controller to lead' })
    const ids = Array.from({ length: members }, (_, i) => `m${i}`)
    const t0 = Date.now()
    for (let i = 0; i < ids.length; i += 256) {
      await Promise.all(ids.slice(i, i + 256).map((id, k) => client.post(`${controller.url}/v1/servers`, { id, url: `http://127.0.0.1:${10000 + i + k}`, controlUrl: sinkUrl, generation: 0 })))
    }
    await pollUntil(() => controller.settled(100), { timeoutMs: 120000, what: 'the joins to settle' })
    await pollUntil(() => !controller.stats().saves || controller.status().store.lastError === null, { timeoutMs: 60000, what: 'saves' })
    console.log(`${members} members registered and laid out in ${Date.now() - t0} ms; ${controller.stats().slices} slices; last save ${controller.status().store.lastBytes} bytes (gzipped)`)
    const rng = createRng(1)
    const rows = []
    for (const rate of rates) {
      const before = controller.stats().saves
      const start = Date.now()
      let changes = 0
      while (Date.now() - start < seconds * 1000) {
        const due = Math.floor(((Date.now() - start) / 1000) * rate)
        while (changes < due) {
          controller.moveSlice(rng.int(KEYSPACE_SIZE), ids[rng.int(ids.length)])
          changes++
        }
        await new Promise((resolve) => setImmediate(resolve))
      }
      const elapsed = (Date.now() - start) / 1000
      await pollUntil(() => controller.settled(100), { timeoutMs: 60000, what: 'the last save' })
      const after = controller.stats().saves
      const saves = after.saves - before.saves
      const bytes = after.bytes - before.bytes
      const row = { rate, changes, seconds: Math.round(elapsed * 10) / 10, saves, bytes, bytesPerChange: Math.round(bytes / changes), bytesPerSecond: Math.round(bytes / elapsed), savesPerSecond: Math.round((saves / elapsed) * 10) / 10 }
      rows.push(row)
      console.log(JSON.stringify(row))
    }
    console.log('\n| changes/s | changes | saves/s | KB written/s | bytes per change |\n|---|---|---|---|---|')
    for (const r of rows) console.log(`| ${r.rate} | ${r.changes} | ${r.savesPerSecond} | ${Math.round(r.bytesPerSecond / 1024)} | ${r.bytesPerChange} |`)
  } finally {
    await client.destroy()
    await controller.close()
    sink.close()
    await dynamo.close()
  }
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
