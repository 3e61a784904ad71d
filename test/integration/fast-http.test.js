'use strict'

const net = require('node:net')
const http = require('node:http')
const { createFastServer, parseHead, DUPLICATE_HOST } = require('../../frontend/fast-http')
const { listen, close } = require('../../core/http')
const { pollUntil } = require('../../core/poll')

/** A raw client connection: write bytes, read everything the server sends. */
function connect (port) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1')
    const conn = { socket, received: '', closed: false }
    socket.setEncoding('latin1')
    socket.on('data', (d) => { conn.received += d })
    socket.on('close', () => { conn.closed = true })
    socket.on('error', () => {})
    socket.once('connect', () => resolve(conn))
    socket.once('error', reject)
  })
}

/** Split raw HTTP/1.1 responses (Content-Length or chunked framing) out of `text`. */
function responses (text, { head = false } = {}) {
  const out = []
  let at = 0
  while (at < text.length) {
    const end = text.indexOf('\r\n\r\n', at)
    if (end === -1) break
    const lines = text.slice(at, end).split('\r\n')
    const status = Number(lines[0].split(' ')[1])
    const headers = {}
    for (const line of lines.slice(1)) {
      const c = line.indexOf(':')
      headers[line.slice(0, c).toLowerCase()] = line.slice(c + 1).trim()
    }
    let body = ''
    at = end + 4
    if (head || status === 204 || status === 304) {
      // no body
    } else if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length'])
      if (text.length < at + n) break
      body = text.slice(at, at + n)
      at += n
    } else if (headers['transfer-encoding'] === 'chunked') {
      for (;;) {
        const eol = text.indexOf('\r\n', at)
        if (eol === -1) return out
        const n = parseInt(text.slice(at, eol), 16)
        at = eol + 2
        if (n === 0) { at += 2; break }
        body += text.slice(at, at + n)
        at += n + 2
      }
    }
    out.push({ status, headers, body })
  }
  return out
}

describe('frontend/fast-http: the data port\'s own HTTP/1.1 server', () => {
  const closers = []
  afterEach(async () => { for (const c of closers.splice(0).reverse()) await c() })

  /** A fast server whose handler answers with `answer(req, res)`, and a fallback that says who answered. */
  async function setup ({ answer, ...options } = {}) {
    const seen = { fast: [], fallback: [] }
    const fallback = http.createServer((req, res) => {
      let bytes = 0
      req.on('data', (c) => { bytes += c.length })
      req.on('end', () => {
        seen.fallback.push(`${req.method} ${req.url}`)
        res.setHeader('x-by', 'fallback')
        res.end(`fallback ${req.method} ${req.url} ${bytes}`)
      })
    })
    const server = createFastServer({
      fallback,
      fallbackFor: (req) => req.url === '/reserved',
      onRequest (req, res) {
        seen.fast.push(`${req.method} ${req.url}`)
        if (answer) return answer(req, res)
        const body = `fast ${req.method} ${req.url}${req.bufferedBody ? ` ${req.bufferedBody.toString('latin1')}` : ''}`
        res.writeHead(200, ['x-by', 'fast', 'content-length', String(Buffer.byteLength(body))])
        res.end(body)
      },
      ...options
    })
    const port = await listen(server, 0, '127.0.0.1')
    closers.push(() => close(server))
    return { port, seen, server }
  }

  test('parses what it can parse exactly and leaves the rest to the fallback', () => {
    const ok = (head) => parseHead(head, null)
    const req = ok('GET /a?key=k HTTP/1.1\r\nHost: x\r\nX-Chopper-Key:  v1 \r\nConnection: keep-alive')
    expect(req).toMatchObject({ method: 'GET', url: '/a?key=k', rawHeaders: ['Host', 'x', 'X-Chopper-Key', 'v1', 'Connection', 'keep-alive'], shouldClose: false, complete: true })
    expect(ok('DELETE /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0')).toMatchObject({ bodyless: true, contentLength: 0 })
    // a body of one plain length: read whole before the request is handed over
    expect(ok('POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5')).toMatchObject({ bodyless: false, contentLength: 5, bufferedBody: null })
    expect(ok('PUT /a HTTP/1.1\r\nHost: x\r\ncontent-length:  12')).toMatchObject({ contentLength: 12 })
    expect(ok('GET / HTTP/1.1\r\nHost: x\r\nConnection: Keep-Alive, Close').shouldClose).toBe(true)
    for (const head of [
      'GET /a HTTP/1.0\r\nHost: x', // HTTP/1.0
      'GET /a HTTP/1.1', // no Host
      'GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0', // a repeated length: Node answers 400
      'POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5',
      'POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5',
      'POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: -1',
      'POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0x5',
      'POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\t', // whitespace after the digits
      'POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1234567890123456', // past a safe integer
      'POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked',
      'PUT /a HTTP/1.1\r\nHost: x\r\nExpect: 100-continue',
      'GET /a HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade',
      'GET /a HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded', // obs-fold
      'GET /a HTTP/1.1\r\nHost: x\r\nBad Name: 1',
      'GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\x01b', // a control character
      'GET /a HTTP/1.1\r\nHost: x\r\nX-A: a\rb', // a bare CR
      'GET http://x/a HTTP/1.1\r\nHost: x', // absolute form
      'GET /a b HTTP/1.1\r\nHost: x',
      'CONNECT x:443 HTTP/1.1\r\nHost: x',
      'BREW /a HTTP/1.1\r\nHost: x',
      ' GET /a HTTP/1.1\r\nHost: x'
    ]) expect([head, ok(head)]).toEqual([head, null])
  })

  test('two Hosts are refused by the parser itself (RFC 9112 3.2), however they are spelled', () => {
    for (const head of ['GET /a HTTP/1.1\r\nHost: x\r\nHost: y', 'GET /a HTTP/1.1\r\nhost: x\r\nX-A: 1\r\nHOST: x', 'POST /a HTTP/1.1\r\nHost: x\r\nHost: x\r\nContent-Length: 1']) {
      expect([head, parseHead(head, null)]).toEqual([head, DUPLICATE_HOST])
    }
  })

  test('req.headers is the object Node\'s own server builds from the same head', async () => {
    const head = 'GET /h?key=1 HTTP/1.1\r\nHost: a\r\nhost-x: 1\r\nX-Chopper-Key: k1\r\nx-chopper-key: k2\r\nContent-Type: a\r\ncontent-type: b\r\nCookie: c=1\r\ncookie: d=2\r\nSet-Cookie: s=1\r\nset-cookie: t=2\r\nAccept: x\r\nAccept: y'
    const nodeHeaders = await new Promise((resolve, reject) => {
      const s = http.createServer((req, res) => { resolve({ ...req.headers }); res.end(); s.close() })
      s.listen(0, '127.0.0.1', () => {
        const c = net.connect(s.address().port, '127.0.0.1', () => c.end(head + '\r\n\r\n'))
        c.on('error', reject)
        c.resume()
      })
    })
    expect({ ...parseHead(head, null).headers }).toEqual(nodeHeaders)
  })

  test('keep-alive and pipelined requests are answered in order on one connection', async () => {
    // The first answer is the slowest: answers must still leave in request order.
    const delays = [40, 0, 10]
    const { port, seen } = await setup({
      answer (req, res) {
        const n = Number(req.url.slice(1))
        setTimeout(() => { res.writeHead(200, ['content-length', '1']); res.end(String(n)) }, delays[n])
      }
    })
    const c = await connect(port)
    c.socket.write('GET /0 HTTP/1.1\r\nHost: x\r\n\r\nGET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n')
    const rs = await pollUntil(() => { const r = responses(c.received); return r.length === 3 && r }, { what: 'three answers' })
    expect(rs.map((r) => r.body)).toEqual(['0', '1', '2'])
    expect(seen.fast).toEqual(['GET /0', 'GET /1', 'GET /2'])
    c.socket.write('GET /1 HTTP/1.1\r\nHost: x\r\n\r\n') // the connection stays open
    await pollUntil(() => responses(c.received).length === 4, { what: 'a fourth answer' })
    expect(c.closed).toBe(false)
    c.socket.destroy()
  })

  test('thousands of pipelined requests answered at once, in one write: all answered in order; none after Connection: close', async () => {
    const { port, seen } = await setup()
    const c = await connect(port)
    const n = 5000
    let burst = ''
    for (let i = 0; i < n; i++) burst += `GET /${i} HTTP/1.1\r\nHost: x\r\n\r\n`
    c.socket.write(burst)
    const rs = await pollUntil(() => { const r = responses(c.received); return r.length === n && r }, { what: `${n} answers`, timeoutMs: 20000 })
    expect(rs.every((r, i) => r.body === `fast GET /${i}`)).toBe(true)
    expect(c.closed).toBe(false)

    const d = await connect(port)
    d.socket.write('GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\n\r\n')
    await pollUntil(() => d.closed, { what: 'the server to close after Connection: close' })
    expect(responses(d.received).map((r) => r.body)).toEqual(['fast GET /a', 'fast GET /b'])
    expect(seen.fast.slice(n)).toEqual(['GET /a', 'GET /b'])
  })

  test('a small body is read whole, across writes, and the request after it keeps its bytes', async () => {
    const { port, seen } = await setup({ maxBodySize: 8 })
    const c = await connect(port)
    c.socket.write('GET /first HTTP/1.1\r\nHost: x\r\n\r\n')
    await pollUntil(() => responses(c.received).length === 1, { what: 'the first answer' })
    c.socket.write('POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhel')
    c.socket.write('lo') // (a body that never completes is never handed over: the next test)
    // then a body and a bodyless request in one write, pipelined
    c.socket.write('PUT /q HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /after HTTP/1.1\r\nHost: x\r\n\r\n')
    const rs = await pollUntil(() => { const r = responses(c.received); return r.length === 4 && r }, { what: 'four answers' })
    expect(rs.map((r) => r.body)).toEqual(['fast GET /first', 'fast POST /p hello', 'fast PUT /q abc', 'fast GET /after'])
    expect(rs[0].headers.date).toMatch(/GMT$/) // the fast path dates its answers as Node does
    // a body over maxBodySize: the connection goes to the fallback, with every byte
    c.socket.write('POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789GET /then HTTP/1.1\r\nHost: x\r\n\r\n')
    const more = await pollUntil(() => { const r = responses(c.received); return r.length === 6 && r }, { what: 'six answers' })
    expect(more.slice(4).map((r) => r.body)).toEqual(['fallback POST /big 10', 'fallback GET /then 0'])
    expect(seen.fallback).toEqual(['POST /big', 'GET /then'])
    c.socket.destroy()
  })

  test('a body that never completes closes the connection at the head\'s deadline, unanswered', async () => {
    const { port, seen } = await setup({ headersTimeout: 100 })
    const c = await connect(port)
    c.socket.write('PUT /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123')
    await pollUntil(() => c.closed, { timeoutMs: 5000, what: 'the connection to close' })
    expect(c.received).toBe('')
    expect(seen.fast).toEqual([])
  })

  test('a chunked body, a malformed request and a reserved path go to the fallback, with every byte', async () => {
    const { port, seen } = await setup()

    // A chunked body split across writes.
    const d = await connect(port)
    d.socket.write('PUT /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n')
    d.socket.write('2\r\nde\r\n0\r\n\r\n')
    expect((await pollUntil(() => responses(d.received)[0], { what: 'the answer' })).body).toBe('fallback PUT /chunked 5')
    d.socket.destroy()

    // Malformed: Node's server answers 400 and closes.
    const e = await connect(port)
    e.socket.write('GET /a HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n')
    await pollUntil(() => e.closed, { what: 'the connection to close' })
    expect(e.received).toMatch(/^HTTP\/1\.1 400 /)

    // A reserved path, well formed, still goes to the fallback.
    const f = await connect(port)
    f.socket.write('GET /reserved HTTP/1.1\r\nHost: x\r\n\r\n')
    expect((await pollUntil(() => responses(f.received)[0], { what: 'the answer' })).body).toBe('fallback GET /reserved 0')
    f.socket.destroy()
    expect(seen.fast).toEqual([])
    expect(seen.fallback).toEqual(['PUT /chunked', 'GET /reserved'])
  })

  test('framing: no Content-Length means chunked; HEAD, 204 and 304 carry no body', async () => {
    const { port } = await setup({
      answer (req, res) {
        const status = Number(req.url.slice(1))
        res.writeHead(status, ['x-s', String(status)])
        res.write(Buffer.from('par'))
        res.write(Buffer.alloc(0))
        res.end('ts')
      }
    })
    const c = await connect(port)
    c.socket.write('GET /200 HTTP/1.1\r\nHost: x\r\n\r\n')
    const [r] = await pollUntil(() => { const rs = responses(c.received); return rs.length === 1 && rs }, { what: 'the answer' })
    expect(r).toMatchObject({ status: 200, body: 'parts' })
    expect(r.headers['transfer-encoding']).toBe('chunked')
    for (const status of [204, 304]) {
      c.received = ''
      c.socket.write(`GET /${status} HTTP/1.1\r\nHost: x\r\n\r\nGET /200 HTTP/1.1\r\nHost: x\r\n\r\n`)
      // The next answer on the connection parses cleanly right after the bodiless one.
      const rs = await pollUntil(() => { const x = responses(c.received); return x.length === 2 && x }, { what: 'two answers' })
      expect(rs.map((x) => [x.status, x.body, x.headers['transfer-encoding']])).toEqual([[status, '', undefined], [200, 'parts', 'chunked']])
    }
    c.received = ''
    c.socket.write('HEAD /200 HTTP/1.1\r\nHost: x\r\n\r\n')
    await pollUntil(() => c.received.endsWith('\r\n\r\n'), { what: 'the HEAD answer' })
    c.socket.write('GET /200 HTTP/1.1\r\nHost: x\r\n\r\n')
    await pollUntil(() => c.received.includes('0\r\n\r\n'), { what: 'the GET answer' })
    // Nothing after the HEAD answer's head: the next bytes are the GET's answer.
    const rest = c.received.slice(c.received.indexOf('\r\n\r\n') + 4)
    expect(rest.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true)
    expect(responses(rest).map((x) => x.body)).toEqual(['parts'])
    c.socket.destroy()
  })

  test('Connection: close is honoured; idle and slow-head connections close on their deadlines', async () => {
    const { port } = await setup({ keepAliveTimeout: 100, headersTimeout: 300 })
    const c = await connect(port)
    c.socket.write('GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    await pollUntil(() => c.closed, { what: 'the server to close after Connection: close' })
    expect(responses(c.received)[0].headers.connection).toBe('close')

    // Idle after an answer: closed after keepAliveTimeout.
    const idle = await connect(port)
    const t0 = Date.now() // the answer, and the idle time, start after this
    idle.socket.write('GET /x HTTP/1.1\r\nHost: x\r\n\r\n')
    await pollUntil(() => responses(idle.received).length === 1, { what: 'the answer' })
    await pollUntil(() => idle.closed, { what: 'the idle connection to close', timeoutMs: 5000, intervalMs: 10 })
    expect(Date.now() - t0).toBeGreaterThanOrEqual(100)

    // A head that never completes, trickled so the connection is never idle: closed after headersTimeout.
    const t1 = Date.now() // the connection, and its deadline, start after this
    const slow = await connect(port)
    slow.socket.write('GET /x HTTP/1.1\r\n')
    await pollUntil(() => { if (!slow.closed) slow.socket.write('X-A: 1\r\n'); return slow.closed }, { what: 'the slow head to be cut off', timeoutMs: 5000, intervalMs: 20 })
    expect(Date.now() - t1).toBeGreaterThanOrEqual(300)
    expect(slow.received).toBe('')
  })

  test('a client that leaves mid-request closes its response; a write the socket cannot take waits for drain', async () => {
    let pending = null
    const big = Buffer.alloc(8 * 1024 * 1024, 97)
    const writes = []
    const { port } = await setup({
      answer (req, res) {
        if (req.url === '/hang') { pending = res; return }
        res.writeHead(200, ['content-length', String(big.length)])
        writes.push(res.write(big))
        res.once('drain', () => { writes.push('drain'); res.end() })
      }
    })
    const c = await connect(port)
    c.socket.write('GET /hang HTTP/1.1\r\nHost: x\r\n\r\n')
    await pollUntil(() => pending, { what: 'the request to arrive' })
    let closed = 0
    pending.once('close', () => { closed++ })
    c.socket.destroy()
    await pollUntil(() => closed === 1, { what: 'the response to close' })
    expect(pending.destroyed).toBe(true)
    expect(pending.writableFinished).toBe(false)

    const d = await connect(port)
    d.socket.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\n')
    const r = await pollUntil(() => responses(d.received)[0], { what: 'the whole body', timeoutMs: 20000 })
    expect(r.body.length).toBe(big.length)
    expect(writes).toEqual([false, 'drain']) // 8 MiB is over the socket's high-water mark
    d.socket.destroy()
  })
})
