'use strict'

const http = require('node:http')
const diagnostics = require('node:diagnostics_channel')
const { FenceClient } = require('../../apps/kv-cache/fence-client')
const { listen, close } = require('../../core/http')
const { pollUntil } = require('../../core/poll')

/**
 * FenceClient's outcomes per replica, against plain HTTP servers on port 0
 * that answer as a replica would (204, 421, a 4xx refusal) or never answer
 * (a hung host). `dropped(target)` is the caller's "a newer map settled the
 * slice without this replica".
 */
describe('FenceClient outcomes', () => {
  const servers = []
  const clients = []

  /** A replica stand-in: `answer(req, res)` decides; requests are recorded. */
  async function replica (answer) {
    const seen = []
    const server = http.createServer((req, res) => {
      seen.push(req.headers['x-kv-fence'])
      req.resume()
      answer(req, res)
    })
    const port = await listen(server, 0, '127.0.0.1')
    servers.push(server)
    return { url: `http://127.0.0.1:${port}`, seen }
  }

  function client (timeoutMs = 3000) {
    const c = new FenceClient({ serverId: 'A', timeoutMs })
    clients.push(c)
    return c
  }

  const what = (dropped) => ({ key: 'k', generation: 5, fenceId: 'A:1', dropped })
  const status = (code, body = '') => (req, res) => { res.statusCode = code; res.end(body) }

  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close()
    for (const s of servers.splice(0)) {
      s.closeAllConnections() // the hung stand-ins' requests too
      await close(s)
    }
  })

  test('204 is ok and 421 is not_admitted, whatever dropped says', async () => {
    const ok = await replica(status(204))
    const refused = await replica(status(421, '{}'))
    const c = client()
    const targets = [{ id: 'B', url: ok.url }, { id: 'C', url: refused.url }]
    // A first attempt on a cold connection can outlast WATCH_MS on a slow
    // machine, and a replica still waited for is abandoned once dropped, so
    // warm both connections with a phase nobody drops.
    const warm = await c.send('hold', targets, what(() => false))
    expect(warm.ok.map((t) => t.id)).toEqual(['B'])
    const out = await c.send('hold', targets, what(() => true))
    expect(out.ok.map((t) => t.id)).toEqual(['B'])
    expect(out.notAdmitted.map((t) => t.id)).toEqual(['C'])
    expect(out.dropped).toEqual([])
    expect(out.failed).toEqual([])
  })

  test('a 4xx refusal fails the phase, unless a newer map dropped that replica', async () => {
    const r = await replica(status(401, '{"error":{"code":"CHOPPER_ERR_UNAUTHORIZED"}}'))
    const kept = await client().send('hold', [{ id: 'B', url: r.url }], what(() => false))
    expect(kept.failed).toEqual([{ target: { id: 'B', url: r.url }, reason: expect.stringMatching(/^HTTP 401/), status: 401 }])
    const gone = await client().send('hold', [{ id: 'B', url: r.url }], what((t) => t.id === 'B'))
    expect(gone.dropped.map((t) => t.id)).toEqual(['B'])
    expect(gone.failed).toEqual([])
  })

  test('a replica that never answers is abandoned once it is dropped, long before the timeout', async () => {
    const hung = await replica(() => {}) // holds the request open
    let droppedNow = false
    const started = Date.now()
    const sending = client(10000).send('release', [{ id: 'B', url: hung.url }], what(() => droppedNow))
    await pollUntil(() => hung.seen.length > 0, { timeoutMs: 5000, intervalMs: 5, what: 'the release to reach the replica' })
    expect(hung.seen).toEqual(['release'])
    droppedNow = true
    const out = await sending
    expect(out.dropped.map((t) => t.id)).toEqual(['B'])
    expect(Date.now() - started).toBeLessThan(5000) // the phase's timeout is 10 s
  })

  test('a hung replica nobody dropped fails at the timeout; one with no known URL fails unless dropped', async () => {
    const hung = await replica(() => {})
    const out = await client(300).send('hold', [{ id: 'B', url: hung.url }, { id: 'C' }], what(() => false))
    expect(out.failed.map((f) => f.target.id)).toEqual(['B', 'C'])
    expect(out.failed[1].reason).toMatch(/no URL known for server C/)
    const none = await client(300).send('hold', [{ id: 'C' }], what(() => true))
    expect(none.dropped.map((t) => t.id)).toEqual(['C'])
  })

  test('an answer that has begun is read to the end even if the replica is dropped meanwhile', async () => {
    // The newer map arrives the moment the client has the answer's head
    // (core/upstream-h1.js publishes it before the handler reads it), not when
    // the replica writes it: on a busy machine the head can take longer than
    // WATCH_MS to arrive, and a replica dropped before its answer began is
    // rightly abandoned.
    let droppedNow = false
    const onHeaders = () => { droppedNow = true }
    diagnostics.subscribe('chopper:upstream:headers', onHeaders)
    try {
      const slow = await replica((req, res) => {
        res.writeHead(421, { 'content-type': 'application/json' })
        res.write('{"error":')
        setTimeout(() => res.end('{"code":"CHOPPER_ERR_NOT_OWNER"}}'), 150) // several WATCH_MS periods to finish
      })
      const out = await client().send('hold', [{ id: 'B', url: slow.url }], what(() => droppedNow))
      expect(droppedNow).toBe(true)
      expect(out.notAdmitted.map((t) => t.id)).toEqual(['B'])
      expect(out.dropped).toEqual([])
    } finally {
      diagnostics.unsubscribe('chopper:upstream:headers', onHeaders)
    }
  })

  test('a pool left without connections (its replica gone) is closed when a fence goes to a new origin', async () => {
    const c = client()
    const gone = await replica(status(204))
    expect((await c.send('hold', [{ id: 'B', url: gone.url }], what(() => false))).ok.map((t) => t.id)).toEqual(['B'])
    const server = servers.pop()
    server.closeAllConnections()
    await close(server)
    const old = c.pools.get(gone.url)
    await pollUntil(() => old.all.size === 0, { what: 'the gone replica\'s connection to close' })
    const next = await replica(status(204))
    expect((await c.send('hold', [{ id: 'B', url: next.url }], what(() => false))).ok.map((t) => t.id)).toEqual(['B'])
    expect([...c.pools.keys()]).toEqual([next.url])
    expect(old.closed).toBe(true)
  })

  test('an unknown phase is refused', async () => {
    await expect(client().send('commit', [], what(() => false))).rejects.toMatchObject({ code: 'CHOPPER_ERR_INVALID_ARG' })
  })
})
