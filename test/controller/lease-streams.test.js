'use strict'

const http = require('node:http')
const net = require('node:net')
const { createController } = require('../../controller')
const { ControllerClient } = require('../../core/controller-client')
const { LeaseStream } = require('../../core/lease-stream')
const { signRequest } = require('../../core/cluster-auth')
const { PROTOCOL, STREAM_NONCE_HEADER, streamKey, encodeFrame, FrameReader } = require('../../core/lease-stream-protocol')
const { pollUntil } = require('../../core/poll')
const { createAppServer } = require('../../appserver-lib')
const { call } = require('../helpers/http')

const TOKEN = 'lease-stream-test-token-0123456789'

/** A raw upgrade on a socket of our own: returns { socket, status, headers, reader } once the head is read. */
function rawUpgrade (url, path, headers) {
  const { port } = new URL(url)
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    let buf = Buffer.alloc(0)
    socket.on('error', reject)
    socket.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: Upgrade\r\nupgrade: ${PROTOCOL}\r\n` +
      Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('') + '\r\n')
    const onData = (b) => {
      buf = Buffer.concat([buf, b])
      const end = buf.indexOf('\r\n\r\n')
      if (end < 0) return
      socket.off('data', onData)
      const [statusLine, ...lines] = buf.subarray(0, end).toString('latin1').split('\r\n')
      const head = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]))
      resolve({ socket, status: Number(statusLine.split(' ')[1]), headers: head, rest: buf.subarray(end + 4) })
    }
    socket.on('data', onData)
  })
}

function closed (socket) {
  return new Promise((resolve) => (socket.destroyed ? resolve() : socket.once('close', resolve)))
}

describe('lease streams', () => {
  let controller
  let client
  const closers = []

  async function start (opts = {}) {
    controller = createController({ startupFenceMs: 0, clusterToken: TOKEN, ...opts })
    await controller.start()
    client = new ControllerClient({ controllerUrl: controller.url, clusterToken: opts.clusterToken === undefined && 'clusterToken' in opts ? undefined : TOKEN })
    closers.push(() => client.close(), () => controller.close())
  }

  async function register (id) {
    return client.registerServer({ id, url: `http://127.0.0.1:${1000 + closers.length}`, controlUrl: 'http://127.0.0.1:9' })
  }

  afterEach(async () => {
    while (closers.length) await closers.pop()()
  })

  /**
   * An older controller, or a proxy: every HTTP call answered `status` with a
   * lease, every upgrade refused 404 with error `code`. `seen` lists the calls;
   * `c` is a ControllerClient of it.
   */
  async function olderController (status, code) {
    const seen = []
    const server = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`)
      req.resume()
      req.on('end', () => {
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ lease: { leaseMs: 1500, minGeneration: 1 } }))
      })
    })
    server.on('upgrade', (req, socket) => {
      seen.push(`upgrade ${req.url}`)
      const body = JSON.stringify({ error: { code, message: 'refused' } })
      socket.end(`HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`)
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    closers.push(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve) }))
    const c = new ControllerClient({ controllerUrl: `http://127.0.0.1:${server.address().port}`, clusterToken: TOKEN })
    closers.push(() => c.close())
    return { seen, c }
  }

  test('a member renews over one stream; the answer is the HTTP renewal\'s', async () => {
    await start()
    const first = await register('a')
    const generation = first.assignment.generation
    // The registration opened the stream and went over it: no HTTP call.
    expect(client.stream.connected).toBe(true)
    expect(controller.stats()).toMatchObject({ registrations: 1, streams: { open: 1, opened: 1, registrations: 1, renewals: 0 } })
    await client.renewLease('a', { generation, drainedGeneration: generation })
    for (let i = 0; i < 5; i++) {
      const answer = await client.renewLease('a', { generation, drainedGeneration: generation })
      expect(answer.lease).toMatchObject({ leaseMs: 1500, minGeneration: generation })
      expect(answer.assignment).toBeUndefined() // it holds the current map
    }
    const stats = controller.stats()
    expect(stats.streams).toMatchObject({ open: 1, opened: 1, renewals: 6, refused: 0, broken: 0 })
    expect(stats.renewals).toBe(6)
    // Behind: the answer carries the map, as the HTTP answer does.
    const behind = await client.renewLease('a', { generation: 0, drainedGeneration: 0 })
    expect(behind.assignment.generation).toBe(generation)
    expect(controller.stats().streams.opened).toBe(1)
  })

  test('an unknown member is told 404, and re-registering lets it renew', async () => {
    await start()
    await register('a')
    const err = await client.renewLease('nobody', { generation: 0, drainedGeneration: 0 }).catch((e) => e)
    expect(err.response).toMatchObject({ status: 404, data: { error: { code: 'CHOPPER_ERR_UNKNOWN_SERVER' } } })
    // A member dropped while its stream is open gets the 404 as a frame.
    const g = controller.stats().generation
    await client.renewLease('a', { generation: g, drainedGeneration: g })
    await pollUntil(() => client.stream.connected, { timeoutMs: 5000, what: 'the stream open' })
    await client.registerServer({ id: 'b', url: 'http://127.0.0.1:1999', controlUrl: 'http://127.0.0.1:9' })
    const raw = new ControllerClient({ controllerUrl: controller.url, clusterToken: TOKEN })
    closers.push(() => raw.close())
    await raw.deregisterServer('a')
    const gone = await client.renewLease('a', { generation: g, drainedGeneration: g }).catch((e) => e)
    expect(gone.response).toMatchObject({ status: 404, data: { error: { code: 'CHOPPER_ERR_UNKNOWN_SERVER' } } })
  })

  test('an unsigned or replayed upgrade is refused', async () => {
    await start()
    await register('a')
    const path = '/v1/servers/a/lease-stream'
    const unsigned = await rawUpgrade(controller.url, path, {})
    expect(unsigned.status).toBe(401)
    unsigned.socket.destroy()
    const signed = signRequest({ token: TOKEN, method: 'GET', path })
    const ok = await rawUpgrade(controller.url, path, signed)
    expect(ok.status).toBe(101)
    expect(ok.headers[STREAM_NONCE_HEADER]).toMatch(/^[A-Za-z0-9_-]{16,64}$/)
    const replay = await rawUpgrade(controller.url, path, signed)
    expect(replay.status).toBe(403)
    ok.socket.destroy()
    replay.socket.destroy()
    expect(controller.stats().streams.refused).toBe(2)
  })

  test('a frame with a bad MAC or a seq not above the last closes the stream, unanswered', async () => {
    await start()
    const g = (await register('a')).assignment.generation
    const path = '/v1/servers/a/lease-stream'
    const open = async () => {
      const headers = signRequest({ token: TOKEN, method: 'GET', path })
      const up = await rawUpgrade(controller.url, path, headers)
      expect(up.status).toBe(101)
      const key = streamKey(TOKEN, 'a', headers['x-chopper-nonce'], up.headers[STREAM_NONCE_HEADER])
      const reader = new FrameReader({ key, direction: 'c' })
      const answers = []
      up.socket.on('data', (b) => answers.push(...reader.push(b)))
      return { ...up, key, answers }
    }
    const renewal = (seq) => JSON.stringify({ seq, generation: g, drainedGeneration: g })

    const good = await open()
    good.socket.write(encodeFrame(good.key, 'm', renewal(1)))
    await pollUntil(() => good.answers.length === 1, { timeoutMs: 5000, what: 'an answer' })
    expect(good.answers[0]).toMatchObject({ seq: 1, lease: { leaseMs: 1500 } })
    // The same frame again: a replay within the connection.
    good.socket.write(encodeFrame(good.key, 'm', renewal(1)))
    await closed(good.socket)
    expect(good.answers).toHaveLength(1)

    const forged = await open()
    forged.socket.write(encodeFrame(Buffer.alloc(32, 7), 'm', renewal(1))) // not this connection's key
    await closed(forged.socket)
    expect(forged.answers).toHaveLength(0)

    // A controller frame reflected back is not a member frame (the direction is under the MAC).
    const reflected = await open()
    reflected.socket.write(encodeFrame(reflected.key, 'c', renewal(1)))
    await closed(reflected.socket)
    expect(reflected.answers).toHaveLength(0)
    expect(controller.stats().streams.broken).toBe(3)
    expect(controller.stats().renewals).toBe(1)
  })

  test('a member refuses an answer not MACed with its connection\'s key', async () => {
    // A fake controller that upgrades and answers with a frame under another key.
    const server = http.createServer()
    const sockets = new Set()
    server.on('upgrade', (req, socket) => {
      sockets.add(socket)
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: ${PROTOCOL}\r\nconnection: Upgrade\r\n${STREAM_NONCE_HEADER}: ${'n'.repeat(24)}\r\n\r\n`)
      socket.on('data', () => socket.write(encodeFrame(Buffer.alloc(32, 1), 'c', JSON.stringify({ seq: 1, lease: { leaseMs: 60000 } }))))
      socket.on('error', () => {})
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    closers.push(() => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(resolve) }))
    const stream = new LeaseStream({ url: `http://127.0.0.1:${server.address().port}`, id: 'a', clusterToken: TOKEN, timeoutMs: 5000 })
    closers.push(() => stream.close())
    const err = await stream.renew({ generation: 1, drainedGeneration: 1 }).catch((e) => e)
    expect(err.code).toBe('CHOPPER_ERR_LEASE_STREAM')
    expect(err.message).toMatch(/bad MAC/)
  })

  test('without a token the stream runs unMACed', async () => {
    await start({ clusterToken: undefined })
    const g = (await register('a')).assignment.generation
    const answer = await client.renewLease('a', { generation: g, drainedGeneration: g })
    expect(answer.lease.minGeneration).toBe(g)
    expect(controller.stats().streams).toMatchObject({ opened: 1, registrations: 1, renewals: 1 })
  })

  test('a controller without streams, or a proxy that refuses the upgrade, is renewed over HTTP', async () => {
    // An older controller: the upgrade route does not exist (404 CHOPPER_ERR_NOT_FOUND); the lease route does.
    const { seen, c } = await olderController(200, 'CHOPPER_ERR_NOT_FOUND')
    for (let i = 0; i < 3; i++) {
      expect((await c.renewLease('a', { generation: 1, drainedGeneration: 1 })).lease.leaseMs).toBe(1500)
      await pollUntil(() => c.opening === null, { timeoutMs: 5000, what: 'the upgrade answered' })
    }
    // One upgrade tried; then HTTP only (a stream again after a minute).
    expect(seen.sort()).toEqual(['POST /v1/servers/a/lease', 'POST /v1/servers/a/lease', 'POST /v1/servers/a/lease', 'upgrade /v1/servers/a/lease-stream'])
  })

  test('a registration over the stream that is refused (another live member holds the id) cuts no one\'s stream', async () => {
    await start()
    const g = (await register('a')).assignment.generation
    expect(client.stream.connected).toBe(true)
    const other = new ControllerClient({ controllerUrl: controller.url, clusterToken: TOKEN })
    closers.push(() => other.close())
    const err = await other.registerServer({ id: 'a', url: 'http://127.0.0.1:2999', controlUrl: 'http://127.0.0.1:9' }).catch((e) => e)
    expect(err.response).toMatchObject({ status: 409, data: { error: { code: 'CHOPPER_ERR_ID_IN_USE' } } })
    expect(other.stream.connected).toBe(true) // the upgrade went through; the registration was refused
    // The live member's stream still serves it.
    await client.renewLease('a', { generation: g, drainedGeneration: g })
    expect(client.stream.connected).toBe(true)
    expect(controller.stats()).toMatchObject({ registrations: 1, streams: { opened: 2, open: 1, registrations: 1, renewals: 1 } })
  })

  test('a controller that takes no registrations over streams is registered with by HTTP', async () => {
    // An older controller: an upgrade for an id it does not know is refused (404 CHOPPER_ERR_UNKNOWN_SERVER).
    const { seen, c } = await olderController(201, 'CHOPPER_ERR_UNKNOWN_SERVER')
    const answer = await c.registerServer({ id: 'a', url: 'http://127.0.0.1:2998', controlUrl: 'http://127.0.0.1:9' })
    expect(answer.lease.leaseMs).toBe(1500)
    expect(seen).toEqual(['upgrade /v1/servers/a/lease-stream', 'POST /v1/servers'])
    // A member answer, not a refusal of streams: the next renewal tries the stream again.
    expect(c.streamRetryAt).toBe(0)
  })

  test('a broken stream is reopened by the next renewal; a newer stream replaces an older one', async () => {
    await start()
    const g = (await register('a')).assignment.generation
    const report = { generation: g, drainedGeneration: g }
    await client.renewLease('a', report)
    await pollUntil(() => client.stream.connected, { timeoutMs: 5000, what: 'our stream open' })
    // Another process renewing as `a` (a restarted member): its stream replaces ours, which the controller closes.
    const other = new ControllerClient({ controllerUrl: controller.url, clusterToken: TOKEN })
    closers.push(() => other.close())
    await other.renewLease('a', report)
    await pollUntil(() => other.stream.connected, { timeoutMs: 5000, what: 'the other stream open' })
    // Its stream serves `a` from its first answered renewal on, not from the upgrade.
    expect(client.stream.connected).toBe(true)
    await other.renewLease('a', report)
    await pollUntil(() => client.stream.socket === null, { timeoutMs: 5000, what: 'our stream closed by the controller' })
    await client.renewLease('a', report) // by HTTP, while it reopens
    await pollUntil(() => client.stream.connected, { timeoutMs: 5000, what: 'the stream reopened' })
    await client.renewLease('a', report)
    expect(controller.stats().streams).toMatchObject({ open: 1, opened: 3, broken: 0 })
    // The controller closing: the renewal fails (refused), as an HTTP one would.
    await controller.close()
    closers.splice(closers.indexOf(closers.find((f) => f.toString().includes('controller.close'))), 1)
    const err = await client.renewLease('a', report).then(() => null, (e) => e)
    expect(err).toMatchObject({ code: 'ECONNREFUSED' }) // the stream broke, and HTTP found no controller
    expect(client.stream.socket).toBeNull()
  })

  test('an app server\'s load reports go over its stream, acknowledged as over HTTP; without a stream, by HTTP', async () => {
    await start({ periodMs: 3600000 })
    const servers = []
    for (const [id, leaseStream] of [['streamed', true], ['polled', false]]) {
      const app = (req, res) => res.json({ id })
      const s = createAppServer({ id, app, controllerUrl: controller.url, clusterToken: TOKEN, leaseStream })
      await s.start()
      closers.push(() => s.close())
      servers.push({ id, s })
    }
    const owned = (id) => controller.published.slices.filter((sl) => sl.servers[0] === id).length
    await pollUntil(() => controller.stats().streams.open === 1 && !controller.stats().handoffInProgress && servers.every(({ id, s }) => owned(id) > 0 && s.guard.generation === controller.published.generation),
      { timeoutMs: 10000, what: 'both own slices, one streaming' })
    // Traffic to both: each reports what it served.
    const sent = { streamed: 0, polled: 0 }
    for (let i = 0; i < 200; i++) {
      for (const { id, s } of servers) {
        const r = await call(`${s.urls.url}/x?key=k${i}`)
        if (r.status === 200) sent[id]++
      }
    }
    expect(sent.streamed).toBeGreaterThan(0)
    expect(sent.polled).toBeGreaterThan(0)
    const round = await controller.runRound()
    expect(round.unknown).toEqual([])
    expect(controller.stats().loadCollections).toEqual({ stream: 1, http: 1 })
    expect(round.perServerRequests).toEqual(sent)
    // The report was acknowledged: the next round reads no requests twice.
    const next = await controller.runRound()
    expect(next.perServerRequests).toEqual({ streamed: 0, polled: 0 })
    expect(controller.stats().loadCollections).toEqual({ stream: 2, http: 2 })

    // Pushes: a fenced move between them revokes from one and grants to the
    // other; the streamed server takes its pushes over the stream, the other on its control port.
    const streamedBefore = controller.stats().pushes.streamed
    const messagesBefore = controller.stats().pushes.messages
    for (const [from, to] of [['streamed', 'polled'], ['polled', 'streamed']]) {
      const slice = controller.published.slices.find((sl) => sl.servers[0] === from)
      controller.moveSlice(slice.start, to)
      expect(await controller.settled(10000)).toBe(true)
      await pollUntil(() => servers.every(({ s }) => s.guard.generation === controller.published.generation), { timeoutMs: 10000, what: 'both hold the move' })
      expect(controller.published.slices.find((sl) => sl.start === slice.start).servers[0]).toBe(to)
    }
    const pushes = controller.stats().pushes
    expect(pushes.streamed - streamedBefore).toBeGreaterThanOrEqual(2) // a revoke and a grant each way, at least
    expect(pushes.messages - messagesBefore - (pushes.streamed - streamedBefore)).toBeGreaterThanOrEqual(2) // the polled one's, by HTTP
    expect(pushes.failures).toBe(0)
  })

  test('a push over the stream is applied only under the cluster\'s map signature', async () => {
    const { ShardGuard } = require('../../appserver-lib/shard-guard')
    const { RequestVerifier, signMap, hashBody } = require('../../core/cluster-auth')
    const { streamPushes } = require('../../appserver-lib/push')
    const guard = new ShardGuard({ serverId: 'a' })
    const serve = streamPushes({ guard, verifier: new RequestVerifier({ token: TOKEN }), drainTimeoutMs: 100, logger: require('../../core/logger').silent })
    const map = { generation: 7, slices: [{ start: 0, end: 2 ** 32, servers: ['a'] }], servers: { a: { url: 'http://127.0.0.1:1' } } }
    const raw = Buffer.from(JSON.stringify(map))
    const forged = await serve({ raw, signature: signMap({ token: 'not-the-cluster-token-at-all', bodyHash: hashBody(raw) }) })
    expect(forged).toMatchObject({ status: 403, body: { error: { code: 'CHOPPER_ERR_FORBIDDEN' } } })
    expect(await serve({ raw })).toMatchObject({ status: 403 })
    expect(guard.generation).toBe(0)
    const ok = await serve({ raw, signature: signMap({ token: TOKEN, bodyHash: hashBody(raw) }) })
    expect(ok).toMatchObject({ status: 200, body: { accepted: true, generation: 7 } })
    expect(guard.generation).toBe(7)
    // A diff from a base it does not hold: 409 with the generation it holds, as over HTTP.
    const diff = Buffer.from(JSON.stringify({ kind: 'diff', base: 3, generation: 9, slices: [], servers: {} }))
    expect(await serve({ raw: diff, signature: signMap({ token: TOKEN, bodyHash: hashBody(diff) }) })).toMatchObject({ status: 409, body: { error: { code: 'CHOPPER_ERR_DIFF_BASE' }, generation: 7 } })
  })

  test('a member that fails its load report over the stream has unknown load, counted toward eviction', async () => {
    await start({ periodMs: 3600000, evictAfterFailures: 2, requestTimeoutMs: 300 })
    const reports = []
    const clients = {}
    for (const [id, serveLoad] of [['good', () => ({ instance: 'i', seq: reports.push(1), frames: 1, entries: [] })], ['bad', () => { throw new Error('ledger broke') }]]) {
      const c = new ControllerClient({ controllerUrl: controller.url, clusterToken: TOKEN, serveLoad })
      closers.push(() => c.close())
      clients[id] = c
      await c.registerServer({ id, url: `http://127.0.0.1:${id === 'good' ? 1001 : 1002}`, controlUrl: 'http://127.0.0.1:9' })
    }
    const g = () => controller.stats().published
    for (const [id, c] of Object.entries(clients)) {
      await c.renewLease(id, { generation: g(), drainedGeneration: g() })
      await pollUntil(() => c.stream.connected, { timeoutMs: 5000, what: `${id}'s stream open` })
    }
    const round = await controller.runRound()
    expect(round.unknown).toEqual(['bad'])
    expect(controller.stats().loadCollections).toEqual({ stream: 2, http: 0 })
    expect(controller.status().servers.bad).toMatchObject({ loadUnknown: true, collectionFailures: 1 })
    expect(reports).toHaveLength(1)
    await controller.runRound()
    expect(controller.status().servers.bad).toBeUndefined() // evicted after two failures
    expect(controller.status().servers.good).toBeDefined()
  })

  test('a stream closed while its upgrade is on the way leaves no socket open', async () => {
    // A controller slow to answer the upgrade: the member closes meanwhile (it is shutting down).
    const server = http.createServer()
    const sockets = new Set()
    let answer
    let ended = false
    server.on('upgrade', (req, socket) => {
      sockets.add(socket)
      socket.on('error', () => {})
      socket.on('end', () => { ended = true }) // the member's side closed
      socket.on('close', () => { ended = true })
      answer = () => socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: ${PROTOCOL}\r\nconnection: Upgrade\r\n${STREAM_NONCE_HEADER}: ${'n'.repeat(24)}\r\n\r\n`)
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    closers.push(() => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(resolve) }))
    const stream = new LeaseStream({ url: `http://127.0.0.1:${server.address().port}`, id: 'a', clusterToken: TOKEN, timeoutMs: 5000 })
    const opening = stream.connect().then(() => null, (e) => e)
    await pollUntil(() => sockets.size === 1, { timeoutMs: 5000, what: 'the upgrade to arrive' })
    stream.close()
    answer()
    expect(await opening).toMatchObject({ code: 'CHOPPER_ERR_LEASE_STREAM' })
    await pollUntil(() => ended, { timeoutMs: 5000, what: 'the member to close its socket' })
    expect(stream.connected).toBe(false)
  })
})
