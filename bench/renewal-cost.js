'use strict'

/**
 * What one lease renewal costs the controller, in CPU µs: over a lease
 * stream (core/lease-stream.js, what members use), over HTTP
 * (`POST /v1/servers/:id/lease`), and beside what the same request costs a
 * bare node:http server that answers a fixed body (the floor of Node's HTTP
 * on this machine). A child process keeps `--members` connections (streams,
 * or keep-alive HTTP) and sends `--rate` signed renewals a second for
 * `--seconds`, each reporting the current generation; the controller (in
 * this process, `--members` members registered, leases long enough to need
 * no other renewal) and the bare server are measured in turn, `--rounds`
 * times, by process.cpuUsage().
 *
 *   node bench/renewal-cost.js [--members 1000] [--rate 2000] [--seconds 5] [--rounds 3] [--modes stream,http,bare]
 *
 * A script, not a test: it prints figures and asserts nothing.
 */

const http = require('node:http')
const { fork } = require('node:child_process')
const { parseArgs } = require('node:util')
const { createController } = require('../controller')
const { JsonClient } = require('../core/json-client')
const { LeaseStream } = require('../core/lease-stream')
const { pollUntil } = require('../core/poll')

const TOKEN = 'renewal-cost-bench-token-0123456789'

if (process.argv[2] === '--child') {
  // The load: `rate` renewals a second spread over `members` ids, each its own connection.
  const [mode, url, members, rate, seconds, generation] = process.argv.slice(3).map((x, i) => (i < 2 ? x : Number(x)))
  const report = { generation, drainedGeneration: generation }
  const renewals = mode === 'stream'
    ? Array.from({ length: members }, (_, i) => {
      const stream = new LeaseStream({ url, id: `m${i}`, clusterToken: TOKEN, timeoutMs: 10000 })
      return () => stream.renew(report)
    })
    : Array.from({ length: members }, (_, i) => {
      const client = new JsonClient({ clusterToken: TOKEN, connections: 1, timeoutMs: 10000 })
      return () => client.post(`${url}/v1/servers/m${i}/lease`, report)
    })
  let sent = 0
  let failed = 0
  // Connect first (one renewal each, in batches), outside the measurement:
  // a stream's upgrade, like a keep-alive connection, is paid once per member.
  const warm = async () => {
    for (let i = 0; i < members; i += 100) await Promise.all(renewals.slice(i, i + 100).map((r) => r().catch(() => {})))
  }
  warm().then(() => {
    process.send('ready')
    process.once('message', run)
  })
  const run = () => {
    const t0 = Date.now()
    const tick = setInterval(() => {
      const due = Math.floor(((Date.now() - t0) / 1000) * rate)
      while (sent < due) {
        const i = sent % members
        sent++
        renewals[i]().catch(() => { failed++ })
      }
      if (Date.now() - t0 >= seconds * 1000) {
        clearInterval(tick)
        setTimeout(() => process.send({ sent, failed }), 500)
      }
    }, 5)
  }
} else {
  main().catch((err) => { console.error(err); process.exitCode = 1 })
}

/**
 * Until no push has gone out for a second and no member lags: a member's first
 * renewal over a new stream can bring it a push (its map as of that renewal),
 * which is not renewal cost.
 */
async function quiet (controller) {
  let last = -1
  let since = 0
  await pollUntil(() => {
    const { lagging, pushes } = controller.stats()
    if (pushes.messages !== last || lagging > 0) {
      last = pushes.messages
      since = Date.now()
    }
    return Date.now() - since >= 1000
  }, { timeoutMs: 120000, intervalMs: 100, what: 'pushes to stop and no member to lag' })
}

async function main () {
  const { values } = parseArgs({ options: { members: { type: 'string', default: '1000' }, rate: { type: 'string', default: '2000' }, seconds: { type: 'string', default: '5' }, rounds: { type: 'string', default: '3' }, modes: { type: 'string', default: 'stream,http,bare' } } })
  const [members, rate, seconds, rounds] = ['members', 'rate', 'seconds', 'rounds'].map((k) => Number(values[k]))
  const controller = createController({ periodMs: 3600000, leaseMs: 3600000, largeLeaseMs: 3600000, startupFenceMs: 0, clusterToken: TOKEN })
  await controller.start()
  const reg = new JsonClient({ clusterToken: TOKEN, connections: 64, timeoutMs: 30000 })
  const sink = http.createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json' }); res.end('{"accepted":true,"generation":0,"drainedGeneration":0}') }) })
  await new Promise((resolve) => sink.listen(0, '127.0.0.1', resolve))
  const sinkUrl = `http://127.0.0.1:${sink.address().port}`
  for (let i = 0; i < members; i += 256) {
    await Promise.all(Array.from({ length: Math.min(256, members - i) }, (_, k) => reg.post(`${controller.url}/v1/servers`, { id: `m${i + k}`, url: `http://127.0.0.1:${20000 + i + k}`, controlUrl: sinkUrl, generation: 0 })))
  }
  await controller.settled(60000)
  // and every member holds the map its lease asks for: pushes still going out would count as renewal cost
  await pollUntil(() => controller.stats().lagging === 0, { timeoutMs: 120000, intervalMs: 50, what: 'every member to hold its map' })
  // The floor: a bare server answering a renewal-sized body.
  const answer = Buffer.from(JSON.stringify({ lease: { leaseMs: 2500, renewMs: 1000, minGeneration: controller.stats().generation } }))
  const bare = http.createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': answer.length }); res.end(answer) }) })
  await new Promise((resolve) => bare.listen(0, '127.0.0.1', resolve))
  const bareUrl = `http://127.0.0.1:${bare.address().port}`
  const generation = controller.stats().published
  const rows = { stream: [], http: [], bare: [] }
  const kernel = { stream: [], http: [], bare: [] } // system CPU: reads, writes and loopback delivery
  for (let r = 0; r < rounds; r++) {
    for (const [name, url] of [['stream', controller.url], ['http', controller.url], ['bare', bareUrl]].filter(([n]) => values.modes.split(',').includes(n))) {
      const child = fork(__filename, ['--child', name === 'stream' ? 'stream' : 'http', url, members, rate, seconds, generation])
      await new Promise((resolve) => child.once('message', resolve)) // connected
      if (name !== 'bare') await quiet(controller)
      const before = name === 'bare' ? 0 : controller.stats().renewals
      const pushes = controller.stats().pushes.messages
      const c0 = process.cpuUsage()
      child.send('go')
      const { sent, failed } = await new Promise((resolve) => child.once('message', resolve))
      const cpu = process.cpuUsage(c0)
      child.kill()
      const answered = name === 'bare' ? sent - failed : controller.stats().renewals - before
      rows[name].push((cpu.user + cpu.system) / answered)
      kernel[name].push(cpu.system / answered)
      const pushed = controller.stats().pushes.messages - pushes // 0 unless a member fell behind: its pushes would count here
      console.log(`${name}: ${sent} sent, ${failed} failed, ${answered} answered, ${((cpu.user + cpu.system) / answered).toFixed(1)} µs CPU each (${(cpu.system / answered).toFixed(1)} in the kernel), ${pushed} pushes meanwhile`)
    }
  }
  const med = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1]
  const [st, ht, ba] = [med(rows.stream) || NaN, med(rows.http) || NaN, med(rows.bare) || NaN]
  console.log(`\nmedian µs of CPU per renewal at ${rate}/s over ${members} connections: lease stream ${st.toFixed(1)}, HTTP ${ht.toFixed(1)}, bare node:http ${ba.toFixed(1)}`)
  console.log(`of which in the kernel (median): lease stream ${(med(kernel.stream) ?? NaN).toFixed(1)}, HTTP ${(med(kernel.http) ?? NaN).toFixed(1)}, bare node:http ${(med(kernel.bare) ?? NaN).toFixed(1)}`)
  console.log(`ratios: stream/HTTP ${(st / ht).toFixed(2)}, stream/bare ${(st / ba).toFixed(2)}, HTTP/bare ${(ht / ba).toFixed(2)}`)
  await reg.destroy()
  await controller.close()
  bare.close()
  sink.close()
}
