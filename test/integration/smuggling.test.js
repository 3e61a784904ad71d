'use strict'

const net = require('node:net')
const http = require('node:http')
const { createFrontend } = require('../../frontend')
const { KEYSPACE_SIZE } = require('../../core/keyspace')
const { listen, close } = require('../../core/http')
const { putJson } = require('../helpers/http')

// Request smuggling, differentially: each case goes raw to Node's own server
// (llhttp, as the front end's fallback runs it) and to a real front end in
// front of an app server. The front end must never forward a request llhttp
// refuses, nor more requests than llhttp reads from the same bytes (one
// request forwarded as two is the smuggle).

const T = '/k?key=a'
const INNER = `GET ${T} HTTP/1.1\r\nHost: x\r\n\r\n`
const CASES = {
  'CL.TE': `POST ${T} HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG`,
  'TE.CL': `POST ${T} HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2c\r\nGET ${T} HTTP/1.1\r\nHost: x\r\nX: \r\n\r\n0\r\n\r\n`,
  'TE.TE, second one odd': `POST ${T} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n`,
  'TE not chunked': `POST ${T} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n`,
  'TE with space before the colon': `POST ${T} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\nContent-Length: 1\r\n\r\nA`,
  'two different Content-Lengths': `POST ${T} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nAB`,
  'two equal Content-Lengths': `POST ${T} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nAB`,
  'a listed Content-Length': `POST ${T} HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\n\r\nAB`,
  'a signed Content-Length': `POST ${T} HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\nAB`,
  'a negative Content-Length': `POST ${T} HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\nAB`,
  'Content-Length with space before the colon': `POST ${T} HTTP/1.1\r\nHost: x\r\nContent-Length : 2\r\n\r\nAB`,
  'obs-fold': `GET ${T} HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n`,
  'obs-fold in Content-Length': `POST ${T} HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n 2\r\n\r\nAB`,
  'an invalid chunk size': `POST ${T} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nAB\r\n0\r\n\r\n`,
  'an overflowing chunk size': `POST ${T} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff1\r\nA\r\n0\r\n\r\n`,
  'a chunk size with a space': `POST ${T} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1 \r\nA\r\n0\r\n\r\n`,
  'NUL in a header value': `GET ${T} HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n`,
  'a control character in a header value': `GET ${T} HTTP/1.1\r\nHost: x\r\nX-A: a\u0001b\r\n\r\n`,
  'NUL in the target': 'GET /k?key=a\u0000 HTTP/1.1\r\nHost: x\r\n\r\n',
  'a bare CR in a header': `GET ${T} HTTP/1.1\r\nHost: x\r\nX-A: a\rX-B: b\r\n\r\n`,
  'bare LF line ends': `GET ${T} HTTP/1.1\nHost: x\n\n`,
  'an oversized head': `GET ${T} HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`,
  'two Hosts': `GET ${T} HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n`,
  'a request inside a body': `POST ${T} HTTP/1.1\r\nHost: x\r\nContent-Length: ${INNER.length}\r\n\r\n${INNER}`,
  'two pipelined requests': `GET ${T} HTTP/1.1\r\nHost: x\r\n\r\nGET ${T} HTTP/1.1\r\nHost: x\r\n\r\n`,
  'HTTP/1.0 with Transfer-Encoding': `POST ${T} HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`
}

/**
 * Send `text` on a new connection; resolves with what came back once the
 * server closed it, or `quietMs` after its last bytes (`firstMs` for the first).
 */
function exchange (port, text, quietMs = 300, firstMs = 3000) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    let got = ''
    let timer = null
    const done = () => { clearTimeout(timer); socket.destroy(); resolve(got) }
    const quiet = () => { clearTimeout(timer); timer = setTimeout(done, quietMs) }
    socket.setEncoding('latin1')
    socket.on('data', (d) => { got += d; quiet() })
    socket.on('close', done)
    socket.on('error', () => {})
    socket.write(Buffer.from(text, 'latin1'))
    timer = setTimeout(done, firstMs)
  })
}

/** A Node http server counting the requests it reads (and their bodies), answering each with 200. */
async function counting () {
  const seen = []
  const server = http.createServer((req, res) => {
    let body = ''
    req.setEncoding('latin1')
    req.on('data', (d) => { body += d })
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, body })
      res.end('ok')
    })
  })
  const port = await listen(server, 0, '127.0.0.1')
  return { server, port, seen, url: `http://127.0.0.1:${port}` }
}

describe('request smuggling: the front end forwards nothing llhttp refuses, and never one request as two', () => {
  const closers = []
  let reference
  let app
  const fronts = {}
  beforeAll(async () => {
    reference = await counting() // what llhttp makes of the bytes
    closers.push(() => close(reference.server))
    app = await counting() // what the front end forwards
    closers.push(() => close(app.server))
    for (const dataServer of ['fast', 'node']) {
      const fe = createFrontend({ dataServer })
      await fe.start()
      closers.push(() => fe.close())
      const assignment = { generation: 3, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: ['app'] }], servers: { app: { url: app.url } } }
      expect((await putJson(`${fe.urls.controlUrl}/v1/assignment`, assignment)).status).toBe(200)
      fronts[dataServer] = Number(new URL(fe.urls.url).port)
    }
  })
  afterAll(async () => { for (const c of closers.splice(0).reverse()) await c() })

  for (const [name, text] of Object.entries(CASES)) {
    test(name, async () => {
      reference.seen.length = 0
      const refAnswer = await exchange(reference.port, text)
      const llhttp = reference.seen.slice()
      for (const [dataServer, port] of Object.entries(fronts)) {
        app.seen.length = 0
        const answer = await exchange(port, text)
        // Answered, one way or another: never silence.
        expect([dataServer, answer.slice(0, 9)]).toEqual([dataServer, 'HTTP/1.1 '])
        const forwarded = app.seen.slice() // recorded at each request's end, before its answer left
        expect([dataServer, forwarded.length <= llhttp.length]).toEqual([dataServer, true])
        if (llhttp.length === 0) expect([dataServer, forwarded]).toEqual([dataServer, []])
        // What is forwarded is what llhttp read: the same bodies, in order.
        expect([dataServer, forwarded.map((r) => r.body)]).toEqual([dataServer, llhttp.slice(0, forwarded.length).map((r) => r.body)])
      }
      expect(refAnswer.length).toBeGreaterThan(0)
    })
  }
})
