'use strict'

const net = require('node:net')
const http = require('node:http')
const { createFrontend } = require('../../frontend')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { listen, close } = require('../../core/http')
const { pollUntil } = require('../../core/poll')
const { call, putJson } = require('../helpers/http')
const { createBlackhole } = require('../helpers/blackhole')

// Raw requests against a real front end's data port (RFC 9112, RFC 9110 7.6.1),
// and an app server that drops SYNs.

/** Send `text` on a new connection; resolve with everything the front end sent, once it closes or `until` holds. */
function raw (port, text, { until = () => false, timeoutMs = 5000 } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    let got = ''
    const t0 = Date.now()
    const done = () => { clearTimeout(timer); socket.destroy(); resolve({ text: got, ms: Date.now() - t0 }) }
    const timer = setTimeout(done, timeoutMs)
    socket.setEncoding('latin1')
    socket.on('data', (d) => { got += d; if (until(got)) done() })
    socket.on('close', done)
    socket.on('error', () => {})
    socket.write(text, 'latin1')
  })
}

const answered = (text) => /\r\n\r\n/.test(text)

/** An app server (a plain http server) that echoes the request headers it saw and adds `answerHeaders`. */
async function echoServer (answerHeaders = []) {
  const server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      const body = JSON.stringify({ headers: req.headers })
      res.writeHead(200, [...answerHeaders, 'content-type', 'application/json', 'content-length', String(Buffer.byteLength(body))])
      res.end(body)
    })
  })
  const port = await listen(server, 0, '127.0.0.1')
  return { server, url: `http://127.0.0.1:${port}` }
}

describe('front end data port: HTTP/1.1 hardening', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  async function frontend (servers, options = {}, generation = 4) {
    const fe = createFrontend(options)
    await fe.start()
    closers.push(() => fe.close())
    await assign(fe, servers, generation)
    return { fe, port: Number(new URL(fe.urls.url).port) }
  }

  /** Route the whole keyspace to the first of `servers` ({ id: url }). */
  async function assign (fe, servers, generation) {
    const ids = Object.keys(servers)
    const assignment = { generation, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: [ids[0]] }], servers: Object.fromEntries(ids.map((id) => [id, { url: servers[id] }])) }
    expect((await putJson(`${fe.urls.controlUrl}/v1/assignment`, assignment)).status).toBe(200)
  }

  for (const dataServer of ['fast', 'node']) {
    test(`${dataServer} data server: two Host headers get a 400 and are not forwarded (RFC 9112 3.2)`, async () => {
      const app = await echoServer()
      closers.push(() => close(app.server))
      const { port } = await frontend({ a: app.url }, { dataServer })
      for (const text of [
        'GET /k?key=a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n',
        'GET /k?key=a HTTP/1.1\r\nhost: x\r\nX-A: 1\r\nHOST: x\r\n\r\n',
        'POST /k?key=a HTTP/1.1\r\nHost: x\r\nHost: y\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n'
      ]) {
        const r = await raw(port, text)
        expect([text, r.text.slice(0, 12)]).toEqual([text, 'HTTP/1.1 400'])
        expect(r.text).toContain('CHOPPER_ERR_MALFORMED_REQUEST')
      }
      // One Host is forwarded as ever.
      const ok = await raw(port, 'GET /k?key=a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
      expect(ok.text.slice(0, 12)).toBe('HTTP/1.1 200')
    })
  }

  test('a request whose lines end in a bare LF is answered within 1 s (a 400), whole or cut before its end', async () => {
    const app = await echoServer()
    closers.push(() => close(app.server))
    const { port } = await frontend({ a: app.url })
    for (const text of ['GET /k?key=a HTTP/1.1\nHost: x\n\n', 'GET /k?key=a HTTP/1.1\nHost: x\n', 'GET /k?key=a HTTP/1.1\r\nHost: x\n\n']) {
      const r = await raw(port, text, { until: answered, timeoutMs: 3000 })
      expect([text, r.text.slice(0, 12)]).toEqual([text, 'HTTP/1.1 400'])
      expect(r.ms).toBeLessThan(1000)
    }
  })

  test('headers named by Connection are dropped both ways (RFC 9110 7.6.1)', async () => {
    const app = await echoServer(['Connection', 'X-Internal, keep-alive', 'X-Internal', 'secret', 'X-Kept', 'yes'])
    closers.push(() => close(app.server))
    for (const dataServer of ['fast', 'node']) {
      const { port } = await frontend({ a: app.url }, { dataServer })
      const r = await raw(port, 'GET /k?key=a HTTP/1.1\r\nHost: x\r\nConnection: X-Private, close\r\nX-Private: hop\r\nX-Public: end\r\n\r\n')
      expect(r.text.slice(0, 12)).toBe('HTTP/1.1 200')
      const [head, body] = r.text.split('\r\n\r\n')
      expect(head.toLowerCase()).not.toContain('x-internal')
      expect(head.toLowerCase()).toContain('x-kept: yes')
      const seen = JSON.parse(body).headers
      expect([dataServer, seen['x-private'], seen['x-public']]).toEqual([dataServer, undefined, 'end'])
    }
  })

  for (const upstreamClient of ['chopper', 'undici']) {
    test(`${upstreamClient} client: an owner that drops SYNs costs connectTimeoutMs, and the request (a read, and a write) goes to the new owner`, async () => {
      const hole = await createBlackhole()
      closers.push(() => hole.close())
      const app = await echoServer()
      closers.push(() => close(app.server))
      // Without a connect timeout the request waits for upstreamTimeoutMs and fails 504.
      const { fe } = await frontend({ dead: hole.origin, live: app.url }, { upstreamClient, connectTimeoutMs: 300, upstreamTimeoutMs: 20000, holdMs: 5000 })
      for (const [i, method] of ['GET', 'PUT'].entries()) {
        const t0 = Date.now()
        const pending = call(`${fe.urls.url}/k?key=a`, { method, body: method === 'PUT' ? 'v' : undefined, headers: method === 'PUT' ? { 'content-type': 'text/plain' } : {} })
        // The connect timed out (counted as not sent); then the controller would move the slice: do it.
        await pollUntil(async () => (await (await fetch(`${fe.urls.url}/metrics`)).text()).match(new RegExp(`code="UND_ERR_CONNECT_TIMEOUT"} ${i + 1}`)), { timeoutMs: 5000, what: 'a connect timeout' })
        await assign(fe, { live: app.url, dead: hole.origin }, 5 + 2 * i)
        const r = await pending
        expect([method, r.status, r.headers['x-served-by']]).toEqual([method, 200, 'live'])
        expect(Date.now() - t0).toBeLessThan(5000)
        await assign(fe, { dead: hole.origin, live: app.url }, 6 + 2 * i) // back to the dead owner for the next method
      }
    }, 30000)
  }
})
