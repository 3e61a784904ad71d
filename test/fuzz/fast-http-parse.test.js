'use strict'

const net = require('node:net')
const http = require('node:http')
const fc = require('fast-check')
const { parseHead, DUPLICATE_HOST } = require('../../frontend/fast-http')
const { listen, close } = require('../../core/http')

// Differential: whatever request head frontend/fast-http.js takes itself,
// Node's own server (llhttp, strict) must take too, and see the same method,
// target and header fields. The fast parser may leave more to Node than it
// needs to; it must never accept what Node refuses, or read it differently
// (the root of request smuggling).

// Mostly well-formed pieces, with the odd bad one: enough heads reach the
// accepting side, and every rule meets its counterexamples.
const mostly = (good, bad) => fc.oneof({ weight: 12, arbitrary: fc.constantFrom(...good) }, { weight: 1, arbitrary: fc.constantFrom(...bad) })
const method = mostly(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH'], ['CONNECT', 'get', 'G ET', '', 'BREW'])
const name = mostly(['Host', 'host', 'X-Chopper-Key', 'x-chopper-key', 'Content-Length', 'Connection', 'Cookie', 'Set-Cookie', 'Accept', 'X-A', 'Content-Type', 'User-Agent'],
  ['Transfer-Encoding', 'Expect', 'Upgrade', 'x a', 'X:B', '', 'X\u00e9', 'X\u0000'])
const valueChar = mostly(['a', 'Z', '0', ' ', '\t', ',', ';', '=', '"', '\u00e9', '\u00ff', 'close', 'keep-alive', '0'],
  ['\r', '\n', '\u0000', '\u0001', '\u007f', 'chunked', '5', 'upgrade', '100-continue'])
const targetChar = mostly(['a', 'b', '?', '=', '&', '%41', 'key', '/', '~', '-', '.'], ['%', '%2', '#', ' ', '\t', '\u00e9', '"', '<', '\u007f', '\r', '\n', 'http://x'])

const value = fc.array(valueChar, { maxLength: 6 }).map((a) => a.join(''))
const header = fc.tuple(name, mostly([':', ': '], [' :', ':\t', '']), value).map(([n, sep, v]) => `${n}${sep}${v}`)
const line = fc.oneof({ weight: 12, arbitrary: header }, { weight: 1, arbitrary: value.map((v) => ` ${v}`) }) // an obs-fold now and then
const head = fc.record({
  method,
  target: fc.array(targetChar, { maxLength: 6 }).map((a) => `/${a.join('')}`),
  slash: fc.boolean(), // false: the target loses its leading slash
  sp: mostly([' '], ['  ', '\t']),
  version: mostly(['HTTP/1.1'], ['HTTP/1.0', 'HTTP/2.0', 'http/1.1', 'HTTP/1.1 ']),
  host: mostly([true], [false]),
  lines: fc.array(line, { maxLength: 5 })
}).map(({ method, target, slash, sp, version, host, lines }) => {
  const all = host ? ['Host: x', ...lines] : lines
  return [`${method}${sp}${slash ? target : target.slice(1)}${sp}${version}`, ...all].join('\r\n')
})

describe('fast-http request heads against Node\'s own parser', () => {
  let server
  let port
  const seen = new Map() // sample id (its X-Sample header) -> what Node's server saw
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      seen.set(Number(req.headers['x-sample']), { method: req.method, url: req.url, rawHeaders: req.rawHeaders, headers: { ...req.headers } })
      res.end()
      req.socket.destroy()
    })
    port = await listen(server, 0, '127.0.0.1')
  })
  afterAll(() => close(server))

  /** What Node's server makes of `text` (its last header, X-Sample, carries the sample id). */
  function nodeSees (text, id) {
    return new Promise((resolve) => {
      const socket = net.connect(port, '127.0.0.1')
      let answer = ''
      socket.setEncoding('latin1')
      socket.on('data', (d) => { answer += d })
      socket.on('error', () => {})
      socket.on('close', () => resolve({ accepted: seen.has(id), status: answer.slice(9, 12), saw: seen.get(id) }))
      socket.end(Buffer.from(text, 'latin1')) // one byte per character, as the fast server decodes them
    })
  }

  test('what the fast parser accepts, Node accepts and reads the same way', async () => {
    let id = 0
    let accepted = 0
    await fc.assert(fc.asyncProperty(head, async (h) => {
      const n = ++id
      const fast = parseHead(`${h}\r\nX-Sample: ${n}`, null)
      if (fast === null || fast === DUPLICATE_HOST) return // left to Node's server, or refused with a 400: nothing to compare
      accepted++
      // The body the fast server would read whole (a short one is sent; Node reads the head first anyway)
      const text = `${h}\r\nX-Sample: ${n}\r\n\r\n${fast.contentLength <= 64 ? 'b'.repeat(fast.contentLength) : ''}`
      const node = await nodeSees(text, n)
      expect({ head: h, accepted: node.accepted }).toEqual({ head: h, accepted: true })
      expect({ method: fast.method, url: fast.url, rawHeaders: fast.rawHeaders, headers: { ...fast.headers } })
        .toEqual({ method: node.saw.method, url: node.saw.url, rawHeaders: node.saw.rawHeaders, headers: node.saw.headers })
      // the same body length as Node frames it (no Content-Length: none)
      expect({ head: h, length: fast.contentLength }).toEqual({ head: h, length: Number(node.saw.headers['content-length'] || 0) })
    }), { numRuns: 10000, seed: 20261125 })
    expect(accepted).toBeGreaterThan(100) // the generator reaches the accepting side often enough to mean something
  }, 120000)
})
