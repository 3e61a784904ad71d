'use strict'

const net = require('node:net')
const http = require('node:http')
const fc = require('fast-check')
const { UpstreamPool } = require('../../core/upstream-h1')
const { listen, close } = require('../../core/http')

// Differential: whatever answer core/upstream-h1.js reads without error,
// Node's own client (llhttp, strict) must read too, with the same status,
// header fields and body. Our client may refuse more than it needs to; it
// must never pass on what Node refuses, or frame a body differently.

const mostly = (good, bad) => fc.oneof({ weight: 10, arbitrary: fc.constantFrom(...good) }, { weight: 1, arbitrary: fc.constantFrom(...bad) })
const statusLine = mostly(['HTTP/1.1 200 OK', 'HTTP/1.1 404 Not Found', 'HTTP/1.1 201 ', 'HTTP/1.0 200 OK', 'HTTP/1.1 503 Busy'],
  ['HTTP/1.1 20 OK', 'HTTP/1.1 2000 OK', 'HTTP/1.1 200OK', 'HTTP/2 200', 'http/1.1 200 OK', 'HTTP/1.1  200 OK', 'HTTP/1.1 200 O\u0001K'])
const name = mostly(['X-A', 'Content-Type', 'Set-Cookie', 'x-chopper-generation', 'Date'], ['X A', '', 'X\u00e9', 'X:Y'])
const valueChar = mostly(['a', '0', ' ', '\t', ',', '=', '\u00e9'], ['\r', '\n', '\u0000', '\u007f'])
const value = fc.array(valueChar, { maxLength: 5 }).map((a) => a.join(''))
const header = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(name, mostly([': ', ':'], [' : ', ':\t']), value).map(([n, s, v]) => `${n}${s}${v}`) },
  { weight: 1, arbitrary: value.map((v) => ` ${v}`) } // obs-fold
)
const body = fc.array(fc.constantFrom('a', 'b', 'c', '\r', '\n', '0'), { maxLength: 12 }).map((a) => a.join(''))
const chunkSize = (n) => mostly([n.toString(16), n.toString(16).toUpperCase(), `${n.toString(16)};x=1`], [` ${n.toString(16)}`, `${n.toString(16)} `, `0x${n.toString(16)}`, `+${n}`])
// A body and its framing: by length (well or badly written), chunked (well or badly), or to the end.
const framed = body.chain((b) => fc.oneof(
  mostly([`Content-Length: ${b.length}`, `content-length:${b.length}`], [`Content-Length: ${b.length} `, `Content-Length: +${b.length}`, `Content-Length: ${b.length},${b.length}`, `Content-Length: ${b.length}\r\nContent-Length: ${b.length}`])
    .map((h) => ({ headers: [h], rest: b })),
  fc.tuple(chunkSize(b.length), mostly(['\r\n'], ['\n', ''])).map(([size, crlf]) => ({
    headers: ['Transfer-Encoding: chunked'],
    rest: b.length === 0 ? `0${crlf}\r\n` : `${size}\r\n${b}${crlf}0\r\n\r\n`
  })),
  mostly(['Transfer-Encoding: gzip', 'Transfer-Encoding: chunked, gzip', 'Transfer-Encoding: chunked\r\nContent-Length: 3'], ['Transfer-Encoding: Chunked'])
    .map((h) => ({ headers: [h], rest: '3\r\nabc\r\n0\r\n\r\n' })),
  fc.constant({ headers: [], rest: b })
))
const answer = fc.tuple(statusLine, fc.array(header, { maxLength: 3 }), framed)
  .map(([status, headers, f]) => `${status}\r\n${[...headers, ...f.headers, 'Connection: close'].join('\r\n')}\r\n\r\n${f.rest}`)

describe('upstream-h1 answers against Node\'s own client', () => {
  let server
  let origin
  const answers = new Map() // request path -> the raw answer to send
  beforeAll(async () => {
    server = net.createServer((socket) => {
      let head = ''
      socket.setEncoding('latin1')
      socket.on('error', () => {})
      socket.on('data', (d) => {
        head += d
        if (!head.includes('\r\n\r\n')) return
        const path = head.split(' ')[1]
        socket.end(Buffer.from(answers.get(path), 'latin1')) // then the connection closes: a body to the end is complete
      })
    })
    origin = `http://127.0.0.1:${await listen(server, 0, '127.0.0.1')}`
  })
  afterAll(() => close(server))

  function ours (pool, path) {
    return new Promise((resolve) => {
      const out = { status: 0, rawHeaders: [], body: '' }
      pool.dispatch({ method: 'GET', path, headers: [], body: null }, {
        onConnect () {},
        onHeaders (status, raw) { out.status = status; out.rawHeaders = raw; return true },
        onData (chunk) { out.body += chunk.toString('latin1'); return true },
        onComplete () { resolve(out) },
        onError (err) { resolve({ error: err.code }) }
      })
    })
  }

  function nodes (path) {
    return new Promise((resolve) => {
      const req = http.get(`${origin}${path}`, { agent: false }, (res) => {
        let b = ''
        res.setEncoding('latin1')
        res.on('data', (d) => { b += d })
        res.on('end', () => resolve({ status: res.statusCode, rawHeaders: res.rawHeaders, body: b }))
        res.on('error', (err) => resolve({ error: err.code }))
        res.on('aborted', () => resolve({ error: 'aborted' }))
      })
      req.on('error', (err) => resolve({ error: err.code }))
    })
  }

  test('what our client reads without error, Node reads the same way', async () => {
    const pool = new UpstreamPool(origin, { connections: 4, timeoutMs: 5000 })
    let id = 0
    let read = 0
    try {
      await fc.assert(fc.asyncProperty(answer, async (a) => {
        const path = `/${++id}`
        answers.set(path, a)
        const mine = await ours(pool, path)
        if (mine.error) return // refused: nothing reaches a client
        read++
        const theirs = await nodes(path)
        expect({ answer: a, node: theirs }).toEqual({ answer: a, node: mine })
      }), { numRuns: 2000, seed: 20261125 })
    } finally {
      pool.destroy()
    }
    expect(read).toBeGreaterThan(100)
  }, 120000)
})
