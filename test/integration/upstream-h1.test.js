'use strict'

const net = require('node:net')
const http = require('node:http')
const { UpstreamPool } = require('../../core/upstream-h1')
const { listen, close } = require('../../core/http')
const { pollUntil } = require('../../core/poll')
const { createBlackhole } = require('../helpers/blackhole')

/** One request through `pool`, collected: status, raw headers, body, or the error. */
function fetchVia (pool, { method = 'GET', path = '/', headers = [], body = null, pauseFirst = false } = {}) {
  return new Promise((resolve) => {
    const out = { status: 0, headers: [], body: '', error: null, resumes: 0, paused: false, duringPause: 0 }
    let resume = null
    pool.dispatch({ method, path, headers, body }, {
      onConnect (abort) { out.abort = abort },
      onHeaders (status, raw, res) {
        out.status = status
        out.headers = raw
        resume = res
        return true
      },
      onData (chunk) {
        if (out.paused) out.duringPause++
        out.body += chunk.toString('latin1')
        if (pauseFirst && out.resumes === 0) { // the client cannot take more: the pool must wait for resume()
          out.resumes++
          out.paused = true
          setImmediate(() => { out.paused = false; resume() })
          return false
        }
        return true
      },
      onComplete () { resolve(out) },
      onError (err) { out.error = err; resolve(out) }
    })
  })
}

/** A raw TCP server that answers each request head with `answer(head, socket, n)` (n counts requests on the connection). */
async function rawServer (answer) {
  const stats = { connections: 0, requests: [] }
  const server = net.createServer((socket) => {
    stats.connections++
    let buf = ''
    let n = 0
    socket.setEncoding('latin1')
    socket.on('error', () => {})
    socket.on('data', (d) => {
      buf += d
      let end
      while ((end = buf.indexOf('\r\n\r\n')) !== -1) {
        const head = buf.slice(0, end)
        buf = buf.slice(end + 4)
        stats.requests.push(head)
        answer(head, socket, n++)
      }
    })
  })
  const port = await listen(server, 0, '127.0.0.1')
  return { server, stats, origin: `http://127.0.0.1:${port}` }
}

/**
 * An upstream handler that echoes each request's path, but holds the answer
 * to `/first` until `release()`: the only connection stays busy meanwhile.
 */
function holdFirst () {
  const held = { release: null }
  held.handler = (head, socket) => {
    const path = head.split(' ')[1]
    const answer = () => socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${path.length}\r\n\r\n${path}`)
    if (path === '/first') held.release = answer
    else answer()
  }
  return held
}

describe('core/upstream-h1: the keep-alive client for bodiless requests', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  async function setup (answer, poolOptions = {}) {
    const s = await rawServer(answer)
    closers.push(() => { s.server.closeAllConnections?.(); return close(s.server) })
    const pool = new UpstreamPool(s.origin, { connections: 4, timeoutMs: 30000, ...poolOptions })
    closers.push(() => pool.destroy())
    return { ...s, pool }
  }

  test('sends one head with Host and the given headers; reads Content-Length, chunked (extensions, trailers) and HEAD answers; reuses the connection', async () => {
    const { pool, stats } = await setup((head, socket) => {
      const path = head.split(' ')[1]
      if (path === '/length') socket.write('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: 1\r\n\r\nhel')
      if (path === '/length') socket.write('lo')
      if (path === '/chunked') socket.write('HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n1')
      if (path === '/chunked') socket.write('0\r\n0123456789abcdef\r\n0\r\nX-Trailer: t\r\n\r\n')
      if (path === '/head') socket.write('HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n')
      if (path === '/empty') socket.write('HTTP/1.1 204 No Content\r\n\r\n')
      if (path === '/continue') socket.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')
    })
    const a = await fetchVia(pool, { path: '/length', headers: ['x-chopper-generation', '7', 'x-forwarded-for', '1.2.3.4'] })
    expect(a).toMatchObject({ status: 200, body: 'hello', error: null })
    expect(a.headers).toEqual(['Content-Length', '5', 'X-A', '1'])
    expect(stats.requests[0]).toBe(`GET /length HTTP/1.1\r\nhost: ${pool.host}\r\nx-chopper-generation: 7\r\nx-forwarded-for: 1.2.3.4`)
    const b = await fetchVia(pool, { path: '/chunked' })
    expect(b).toMatchObject({ status: 201, body: 'abc0123456789abcdef', error: null })
    expect(await fetchVia(pool, { method: 'HEAD', path: '/head' })).toMatchObject({ status: 200, body: '', error: null })
    expect(await fetchVia(pool, { path: '/empty' })).toMatchObject({ status: 204, body: '', error: null })
    expect(await fetchVia(pool, { path: '/continue' })).toMatchObject({ status: 200, body: 'ok', error: null })
    expect(stats.connections).toBe(1) // every answer ended cleanly: one connection throughout
  })

  test('a body to the end of the connection; Connection: close and HTTP/1.0 are not reused; the server\'s keep-alive timeout is respected', async () => {
    const { pool, stats } = await setup((head, socket) => {
      const path = head.split(' ')[1]
      if (path === '/eof') socket.end('HTTP/1.1 200 OK\r\n\r\nuntil the end')
      if (path === '/close') socket.write('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nc')
      if (path === '/old') socket.write('HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\no')
      if (path === '/ka') socket.write('HTTP/1.1 200 OK\r\nKeep-Alive: timeout=1\r\nContent-Length: 1\r\n\r\nk')
    })
    expect(await fetchVia(pool, { path: '/eof' })).toMatchObject({ status: 200, body: 'until the end', error: null })
    expect(await fetchVia(pool, { path: '/close' })).toMatchObject({ status: 200, body: 'c' })
    expect(await fetchVia(pool, { path: '/old' })).toMatchObject({ status: 200, body: 'o' })
    expect(stats.connections).toBe(3)
    // timeout=1: reusable for less than 0 s (the pool keeps a second's margin), so never reused.
    await fetchVia(pool, { path: '/ka' })
    await fetchVia(pool, { path: '/ka' })
    expect(stats.connections).toBe(5)
  })

  test('a malformed answer fails the request with a protocol error and the connection is dropped', async () => {
    const answers = {
      '/garbage': 'SMTP ready\r\n\r\n',
      '/both': 'HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n',
      '/gzip': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n',
      '/size': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      '/crlf': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naXX',
      '/lengths': 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab',
      // Header injection toward the client: a bare LF, a bare CR, an obs-fold, a name that is no token.
      '/lf': 'HTTP/1.1 200 OK\r\nX-A: a\nSet-Cookie: evil=1\r\nContent-Length: 0\r\n\r\n',
      '/cr': 'HTTP/1.1 200 OK\r\nX-A: a\rSet-Cookie: evil=1\r\nContent-Length: 0\r\n\r\n',
      '/fold': 'HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n',
      '/name': 'HTTP/1.1 200 OK\r\nBad Name: a\r\nContent-Length: 0\r\n\r\n',
      // A status of three digits and nothing else: Number() reads '2e2' as 200 and '1e2' as 100.
      '/exp': 'HTTP/1.1 2e2 OK\r\nContent-Length: 0\r\n\r\n',
      '/exp1': 'HTTP/1.1 1e2 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n',
      '/four': 'HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n',
      '/hex': 'HTTP/1.1 0x1 OK\r\nContent-Length: 0\r\n\r\n'
    }
    const { pool, stats } = await setup((head, socket) => socket.write(answers[head.split(' ')[1]]))
    for (const path of Object.keys(answers)) {
      const r = await fetchVia(pool, { path })
      expect([path, r.error && r.error.code]).toEqual([path, 'CHOPPER_ERR_UPSTREAM_PROTOCOL'])
    }
    expect(stats.connections).toBe(Object.keys(answers).length)
    // Bytes after a complete answer: that answer stands, the connection (out of step) is not reused.
    answers['/extra'] = 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab'
    expect(await fetchVia(pool, { path: '/extra' })).toMatchObject({ status: 200, body: 'a', error: null })
    await pollUntil(() => pool.all.size === 0, { what: 'the connection to be dropped' })
  })

  test('refused, closed before the answer, silent past the timeout, and aborted: errors with the codes the proxy acts on', async () => {
    const refused = new UpstreamPool('http://127.0.0.1:1', { connections: 1, timeoutMs: 30000 })
    closers.push(() => refused.destroy())
    expect((await fetchVia(refused)).error.code).toBe('ECONNREFUSED')

    const { pool } = await setup((head, socket) => {
      const path = head.split(' ')[1]
      if (path === '/drop') socket.destroy()
      if (path === '/half') { socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc'); socket.destroy() }
      // '/silent' gets no answer
      if (path === '/slowbody') socket.write('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc')
    }, { timeoutMs: 200 })
    expect((await fetchVia(pool, { path: '/drop' })).error.code).toBe('UND_ERR_SOCKET')
    const half = await fetchVia(pool, { path: '/half' })
    expect([half.status, half.body, half.error.code]).toEqual([200, 'abc', 'UND_ERR_SOCKET'])
    const t0 = Date.now()
    expect((await fetchVia(pool, { path: '/silent' })).error.code).toBe('UND_ERR_HEADERS_TIMEOUT')
    expect(Date.now() - t0).toBeGreaterThanOrEqual(200)
    expect((await fetchVia(pool, { path: '/slowbody' })).error.code).toBe('UND_ERR_BODY_TIMEOUT')
  })

  test('a status line without a reason phrase is read; a status code is three digits exactly', async () => {
    const { pool } = await setup((head, socket) => socket.write(head.includes('/bare') ? 'HTTP/1.1 204\r\n\r\n' : 'HTTP/1.1 599 Whatever\r\nContent-Length: 0\r\n\r\n'))
    expect(await fetchVia(pool, { path: '/bare' })).toMatchObject({ status: 204, error: null })
    expect(await fetchVia(pool, { path: '/599' })).toMatchObject({ status: 599, error: null })
  })

  test('a request header that is not a valid field is never written: UND_ERR_INVALID_ARG, and the connection stays good', async () => {
    const { pool, stats } = await setup((head, socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'))
    const bad = [
      ['x-a', 'v\r\nx-injected: 1'], // a CRLF would start a header (or a request) of its own
      ['x-a', 'v\nx'],
      ['x-a', 'v\u0000'],
      ['x-a', 'caf\u20ac'], // not latin1: written as latin1 it would be another byte
      ['x a', 'v'],
      ['x-a\r\nx-b', 'v'],
      ['', 'v'],
      ['x-a', 5]
    ]
    for (const header of bad) {
      const r = await fetchVia(pool, { path: '/bad', headers: header })
      expect([header, r.error && r.error.code]).toEqual([header, 'UND_ERR_INVALID_ARG'])
    }
    expect(stats.requests).toEqual([])
    expect(await fetchVia(pool, { path: '/good', headers: ['x-a', 'v \t\u00e9'] })).toMatchObject({ status: 200, error: null })
    expect(stats.requests).toHaveLength(1)
    expect(stats.connections).toBe(1)
  })

  test('a host that drops SYNs fails the request with UND_ERR_CONNECT_TIMEOUT after connectTimeoutMs, not the answer timeout', async () => {
    const hole = await createBlackhole()
    closers.push(() => hole.close())
    const pool = new UpstreamPool(hole.origin, { connections: 2, timeoutMs: 20000, connectTimeoutMs: 300 })
    closers.push(() => pool.destroy())
    const t0 = Date.now()
    const r = await fetchVia(pool, { method: 'PUT', path: '/k', headers: ['content-length', '1'], body: Buffer.from('x') })
    expect(r.error.code).toBe('UND_ERR_CONNECT_TIMEOUT')
    expect(Date.now() - t0).toBeGreaterThanOrEqual(300)
    expect(Date.now() - t0).toBeLessThan(5000)
    await pollUntil(() => pool.all.size === 0, { what: 'the connection to be dropped' })
  })

  test('a request aborted while it waited for a connection is never sent, and the connection stays in use', async () => {
    const held = holdFirst()
    const { pool, stats } = await setup(held.handler, { connections: 1 })
    const first = fetchVia(pool, { path: '/first' })
    await pollUntil(() => held.release, { what: 'the first request to arrive' })
    // The second waits for the only connection; its client leaves before it gets one.
    const gone = new Promise((resolve) => {
      pool.dispatch({ method: 'DELETE', path: '/gone', headers: [], body: null }, {
        onConnect (abort) { abort() }, // what ForwardHandler does when its response is already destroyed
        onHeaders () { return true },
        onData () { return true },
        onComplete () { resolve('completed') },
        onError (err) { resolve(err.code) }
      })
    })
    const third = fetchVia(pool, { path: '/third' })
    held.release()
    expect((await first).body).toBe('/first')
    expect(await gone).toBe('UND_ERR_ABORTED')
    expect((await third).body).toBe('/third')
    expect(stats.requests.map((h) => h.split(' ').slice(0, 2).join(' '))).toEqual(['GET /first', 'GET /third'])
    expect(stats.connections).toBe(1)
  })

  test('close() (a server that left the map) still sends the requests waiting for a connection, as undici does; destroy() fails them', async () => {
    const held = holdFirst()
    const { pool, stats } = await setup(held.handler, { connections: 1 })
    const first = fetchVia(pool, { path: '/first' })
    await pollUntil(() => held.release, { what: 'the first request to arrive' })
    const queued = fetchVia(pool, { method: 'PUT', path: '/queued', headers: ['content-length', '1'], body: Buffer.from('x') })
    pool.close()
    expect((await fetchVia(pool, { path: '/late' })).error.code).toBe('UND_ERR_DESTROYED') // nothing new after close()
    held.release()
    expect((await first).body).toBe('/first')
    // Failed unsent with a code the proxy reads as "may have been sent", a write became a 503 WRITE_INDETERMINATE.
    expect(await queued).toMatchObject({ status: 200, body: '/queued', error: null })
    expect(stats.requests.map((h) => h.split(' ').slice(0, 2).join(' '))).toEqual(['GET /first', 'PUT /queued'])
    await pollUntil(() => pool.all.size === 0, { what: 'the connection to close once the queue drained' })

    const other = await setup((head, socket) => { if (head.includes('/answer')) socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n') }, { connections: 1 })
    const stuck = fetchVia(other.pool, { path: '/never' })
    await pollUntil(() => other.stats.requests.length === 1, { what: 'the first request to arrive' })
    const waiting = fetchVia(other.pool, { path: '/answer' })
    other.pool.destroy()
    expect((await stuck).error.code).toBe('UND_ERR_DESTROYED')
    expect((await waiting).error.code).toBe('UND_ERR_DESTROYED')
  })

  test('a body paused for a slow client longer than the timeout is not cut off', async () => {
    const big = 'y'.repeat(300000)
    const { pool } = await setup((head, socket) => socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${big.length}\r\n\r\n${big}`), { timeoutMs: 100 })
    const r = await new Promise((resolve) => {
      const out = { body: 0, error: null }
      let resume = null
      pool.dispatch({ method: 'GET', path: '/', headers: [], body: null }, {
        onConnect () {},
        onHeaders (status, raw, res) { resume = res; return true },
        onData (chunk) {
          out.body += chunk.length
          if (out.body === chunk.length) { // after the first chunk: a client that reads nothing for 3 timeouts
            const t0 = Date.now()
            pollUntil(() => Date.now() - t0 >= 300, { what: 'three timeouts to pass', intervalMs: 20 }).then(() => resume())
            return false
          }
          return true
        },
        onComplete () { resolve(out) },
        onError (err) { out.error = err; resolve(out) }
      })
    })
    expect(r).toEqual({ body: big.length, error: null })
  })

  test('an abort ends only its own request; more requests than connections wait their turn; backpressure pauses the socket', async () => {
    const big = 'x'.repeat(200000)
    const { pool, stats } = await setup((head, socket) => {
      const path = head.split(' ')[1]
      if (path === '/hang') return
      if (path === '/big') return socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${big.length}\r\n\r\n${big}`)
      setImmediate(() => socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${path.length}\r\n\r\n${path}`))
    }, { connections: 2 })
    let abort = null
    const hung = new Promise((resolve) => {
      pool.dispatch({ method: 'GET', path: '/hang', headers: [], body: null }, {
        onConnect (a) { abort = a },
        onHeaders () { return true },
        onData () { return true },
        onComplete () { resolve('completed') },
        onError (err) { resolve(err.code) }
      })
    })
    const many = await Promise.all(Array.from({ length: 6 }, (_, i) => fetchVia(pool, { path: `/r${i}` })))
    expect(many.map((r) => r.body)).toEqual(['/r0', '/r1', '/r2', '/r3', '/r4', '/r5'])
    expect(stats.connections).toBe(2) // one hung, one served all six in turn
    abort()
    expect(await hung).toBe('UND_ERR_ABORTED')
    abort() // late: nothing else is affected
    expect((await fetchVia(pool, { path: '/after' })).body).toBe('/after')

    const r = await fetchVia(pool, { path: '/big', pauseFirst: true })
    expect(r.body.length).toBe(big.length)
    expect(r.resumes).toBe(1)
    expect(r.duringPause).toBe(0) // nothing was delivered between "cannot take more" and resume()
  })

  test('against Node\'s own http server: many keep-alive requests, answers byte for byte', async () => {
    const server = http.createServer((req, res) => {
      const n = Number(new URL(req.url, 'http://x').searchParams.get('n'))
      if (n % 2) res.setHeader('content-length', String(n))
      res.end('z'.repeat(n)) // odd: Content-Length; even: chunked
    })
    const port = await listen(server, 0, '127.0.0.1')
    closers.push(() => close(server))
    const pool = new UpstreamPool(`http://127.0.0.1:${port}`, { connections: 3, timeoutMs: 30000 })
    closers.push(() => pool.destroy())
    const sizes = Array.from({ length: 60 }, (_, i) => (i * 7919) % 70000)
    const rs = await Promise.all(sizes.map((n) => fetchVia(pool, { path: `/?n=${n}` })))
    expect(rs.map((r) => r.error)).toEqual(sizes.map(() => null))
    expect(rs.map((r) => r.body.length)).toEqual(sizes)
    expect(pool.all.size).toBeLessThanOrEqual(3)
  })

  test('a body read whole (a Buffer) follows its head, framed by the request\'s Content-Length: Node\'s server reads every byte, on reused connections', async () => {
    const server = http.createServer((req, res) => {
      const chunks = []
      req.on('data', (c) => chunks.push(c))
      req.on('end', () => {
        const got = Buffer.concat(chunks)
        res.setHeader('content-length', String(got.length))
        res.end(got) // echo
      })
    })
    const port = await listen(server, 0, '127.0.0.1')
    closers.push(() => close(server))
    const pool = new UpstreamPool(`http://127.0.0.1:${port}`, { connections: 2, timeoutMs: 30000 })
    closers.push(() => pool.destroy())
    const sizes = Array.from({ length: 40 }, (_, i) => (i * 4099) % 60000)
    const bodies = sizes.map((n, i) => Buffer.alloc(n, String.fromCharCode(97 + (i % 26))))
    const rs = await Promise.all(bodies.map((b, i) => fetchVia(pool, { method: 'PUT', path: `/?i=${i}`, headers: ['content-length', String(b.length)], body: b })))
    expect(rs.map((r) => r.error)).toEqual(sizes.map(() => null))
    expect(rs.map((r) => r.body)).toEqual(bodies.map((b) => b.toString('latin1')))
    expect(pool.all.size).toBeLessThanOrEqual(2)
  })
})
