'use strict'

const http = require('node:http')
const express = require('express')
const { createController } = require('../../controller')
const { createAppServer } = require('../../appserver-lib/index.js')
const compute = require('../../apps/compute')
const { SseHub, frame } = require('../../controller/dashboard/sse-hub')
const { listen, close } = require('../../core/http')
const { pollUntil } = require('../../core/poll')
const { call } = require('../helpers/http')

/**
 * A Server-Sent Events client over node:http: collects parsed events
 * ({ event, data }) and comment lines, and waits for them by polling.
 */
function openStream (url) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false }, (res) => {
      const stream = { res, status: res.statusCode, headers: res.headers, events: [], comments: [], body: '', ended: false }
      let buf = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => {
        stream.body += chunk
        buf += chunk
        let i
        while ((i = buf.indexOf('\n\n')) !== -1) {
          const block = buf.slice(0, i)
          buf = buf.slice(i + 2)
          const ev = { event: 'message', data: '' }
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) stream.comments.push(line)
            else if (line.startsWith('event: ')) ev.event = line.slice(7)
            else if (line.startsWith('data: ')) ev.data += line.slice(6)
          }
          if (ev.data) stream.events.push({ event: ev.event, data: JSON.parse(ev.data) })
        }
      })
      res.on('end', () => { stream.ended = true })
      res.on('error', () => { stream.ended = true })
      stream.next = (event, pred = () => true, timeoutMs = 5000) =>
        pollUntil(() => stream.events.find((e) => e.event === event && pred(e.data)), { timeoutMs, intervalMs: 10, what: `a ${event} event` })
      stream.close = () => req.destroy()
      resolve(stream)
    })
    req.on('error', reject)
  })
}

describe('controller: dashboard routes and /v1/events', () => {
  const closers = []
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c()
  })

  async function startController (options = {}) {
    // Rounds are driven by hand (runRound), so the period only has to be long.
    const controller = createController({ periodMs: 600000, startupFenceMs: 0, ...options })
    const { url } = await controller.start()
    closers.push(() => controller.close())
    return { controller, url }
  }

  async function startServer (controllerUrl, id) {
    const { app } = await compute.create()
    const s = createAppServer({ id, app, controllerUrl })
    await s.start()
    closers.push(() => s.close())
    return s
  }

  test('a snapshot first, then a round event per round and a state event on membership changes', async () => {
    // Loads in requests (20 below), not in busy ms (the default loadMetric).
    const { controller, url } = await startController({ eventCoalesceMs: 20, loadMetric: 'requests' })
    const s1 = await startServer(url, 'app-1')
    await pollUntil(() => controller.assignment && !controller.status().handoff.inProgress, { what: 'first assignment' })

    const stream = await openStream(`${url}/v1/events`)
    closers.push(() => stream.close())
    expect(stream.status).toBe(200)
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/)
    expect(stream.headers['cache-control']).toMatch(/no-cache/)
    const snap = (await stream.next('snapshot')).data
    expect(stream.events[0].event).toBe('snapshot')
    expect(snap).toMatchObject({ keyspaceSize: 2 ** 32, buckets: 256, historySize: 120, rounds: [], columns: [] })
    expect(Object.keys(snap.state.servers)).toEqual(['app-1'])
    expect(snap.state.strategyOptions).toMatchObject({ moveRatio: 1.25, mergeChurnLimit: 0.2 })
    expect(snap.state.servers['app-1']).toMatchObject({ replicas: 0, slices: 1, keyspaceShare: 1 })
    expect(snap.state).not.toHaveProperty('rounds')

    // Load on app-1, then a round: its column carries that load.
    for (let i = 0; i < 20; i++) expect((await call(`${s1.urls.url}/compute?key=k${i}&n=5`)).status).toBe(200)
    const entry = await controller.runRound()
    const round = (await stream.next('round', (d) => d.round.round === entry.round)).data
    expect(round.round).toEqual(JSON.parse(JSON.stringify(entry)))
    expect(round.column.round).toBe(entry.round)
    expect(round.column.load).toHaveLength(256)
    expect(round.column.load.reduce((a, b) => a + b, 0)).toBeCloseTo(20, 0)
    expect(round.column.servers).toEqual(['app-1'])
    expect(round.state.servers['app-1'].lastLoad).toBe(20)

    // A second server joins: one coalesced state event names it.
    await startServer(url, 'app-2')
    const state = (await stream.next('state', (d) => Object.hasOwn(d.state.servers, 'app-2'))).data
    expect(Object.keys(state.state.servers).sort()).toEqual(['app-1', 'app-2'])

    // A new client's snapshot has the round and its column.
    const late = await openStream(`${url}/v1/events`)
    closers.push(() => late.close())
    const snap2 = (await late.next('snapshot')).data
    expect(snap2.rounds.map((r) => r.round)).toEqual([entry.round])
    expect(snap2.columns.map((c) => c.round)).toEqual([entry.round])
  })

  test('heartbeats keep an idle stream alive; close() ends open streams', async () => {
    const { controller, url } = await startController({ eventHeartbeatMs: 30 })
    const stream = await openStream(`${url}/v1/events`)
    await pollUntil(() => stream.comments.length >= 2, { timeoutMs: 5000, what: 'two heartbeats' })
    expect(stream.comments[0]).toBe(': heartbeat')
    expect(stream.body.startsWith('retry: ')).toBe(true)
    await controller.close() // would hang on the open stream if it were not ended
    await pollUntil(() => stream.ended, { timeoutMs: 2000, what: 'the stream to end' })
  })

  test('at most eventClients streams: more get a JSON 503; a client that leaves frees its place', async () => {
    const { url } = await startController({ eventClients: 2 })
    const a = await openStream(`${url}/v1/events`)
    const b = await openStream(`${url}/v1/events`)
    closers.push(() => a.close(), () => b.close())
    expect([a.status, b.status]).toEqual([200, 200])
    const refused = await call(`${url}/v1/events`)
    expect(refused.status).toBe(503)
    expect(refused.headers['content-type']).toMatch(/application\/json/)
    expect(refused.body.error.code).toBe('CHOPPER_ERR_TOO_MANY_CLIENTS')
    expect(refused.headers['retry-after']).toBeDefined()

    a.close()
    const c = await pollUntil(async () => {
      const s = await openStream(`${url}/v1/events`)
      if (s.status === 200) return s
      s.close()
      return null
    }, { timeoutMs: 5000, what: 'a place to free up' })
    closers.push(() => c.close())
    await c.next('snapshot')
  })

  test('GET / redirects to the page; the page and its assets are served locally with a strict CSP', async () => {
    const { url } = await startController()
    const root = await call(`${url}/`)
    expect(root.status).toBe(302)
    expect(root.headers.location).toBe('/dashboard')
    for (const path of ['/dashboard', '/dashboard/']) {
      const page = await call(`${url}${path}`)
      expect(page.status).toBe(200)
      expect(page.headers['content-type']).toMatch(/text\/html/)
      expect(page.headers['content-security-policy']).toMatch(/default-src 'self'/)
      expect(page.body).toContain('<canvas id="heatmap"')
      // Nothing from elsewhere: every script and stylesheet is ours.
      for (const m of page.body.matchAll(/(?:src|href)="([^"]+)"/g)) expect(m[1]).toMatch(/^(\/dashboard\/|data:)/)
    }
    const js = await call(`${url}/dashboard/app.js`)
    expect(js.status).toBe(200)
    expect(js.headers['content-type']).toMatch(/javascript/)
    expect((await call(`${url}/dashboard/style.css`)).headers['content-type']).toMatch(/text\/css/)
    expect((await call(`${url}/dashboard/nope.js`)).status).toBe(404)
    // The rest of the control plane is unchanged.
    expect((await call(`${url}/healthz`)).status).toBe(200)
    expect((await call(`${url}/v1/status`)).body).toHaveProperty('rounds')
  })
})

describe('SseHub', () => {
  let server
  afterEach(async () => { await close(server) })

  test('forgets a client when its connection closes; sends nothing while nobody listens', async () => {
    const hub = new SseHub({ heartbeatMs: 60000 })
    let computed = 0
    const app = express()
    app.get('/events', (req, res) => hub.accept(req, res, () => [{ event: 'hello', data: { n: 1 } }]))
    server = http.createServer(app)
    const port = await listen(server, 0, '127.0.0.1')
    hub.broadcast('x', () => { computed++ })
    expect(computed).toBe(0)

    const s = await openStream(`http://127.0.0.1:${port}/events`)
    await s.next('hello')
    expect(hub.size).toBe(1)
    expect(hub.heartbeat).not.toBeNull()
    hub.broadcast('tick', () => ({ computed: ++computed }))
    await s.next('tick', (d) => d.computed === 1)
    s.close()
    await pollUntil(() => hub.size === 0, { timeoutMs: 2000, what: 'the hub to drop the client' })
    expect(hub.heartbeat).toBeNull() // no timer left behind
    hub.close()
  })

  test('frame() writes one event per JSON value', () => {
    expect(frame('round', { a: 'x\ny' })).toBe('event: round\ndata: {"a":"x\\ny"}\n\n')
  })
})
