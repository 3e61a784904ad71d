'use strict'

const fc = require('fast-check')
const { streamKey, encodeFrame, FrameReader, MAX_FRAME } = require('../../core/lease-stream-protocol')

const TOKEN = 'lease-stream-protocol-token-0123'

/** Cut `buf` at the given (sorted, deduplicated) offsets. */
function cut (buf, offsets) {
  const out = []
  let at = 0
  for (const o of [...new Set(offsets.map((x) => x % (buf.length + 1)))].sort((a, b) => a - b)) {
    out.push(buf.subarray(at, o))
    at = o
  }
  out.push(buf.subarray(at))
  return out
}

describe('lease stream frames', () => {
  const key = streamKey(TOKEN, 'm1', 'n'.repeat(16), 'c'.repeat(24))

  test('the key is the connection\'s: another nonce or id gives another key; no token, no key', () => {
    expect(streamKey(TOKEN, 'm1', 'n'.repeat(16), 'd'.repeat(24)).equals(key)).toBe(false)
    expect(streamKey(TOKEN, 'm2', 'n'.repeat(16), 'c'.repeat(24)).equals(key)).toBe(false)
    expect(streamKey(undefined, 'm1', 'x', 'y')).toBeNull()
  })

  test('however the bytes are cut, the reader returns the frames and push bodies that were written', () => {
    const message = fc.record({ seq: fc.nat(), generation: fc.nat(), note: fc.string() })
    fc.assert(fc.property(fc.array(fc.tuple(message, fc.option(fc.uint8Array({ maxLength: 300 }), { nil: null })), { minLength: 1, maxLength: 8 }), fc.array(fc.nat(), { maxLength: 12 }), fc.boolean(), (frames, offsets, keyed) => {
      const k = keyed ? key : null
      const parts = []
      const expected = []
      for (const [msg, body] of frames) {
        const m = body ? { ...msg, push: { bytes: body.length } } : msg
        parts.push(Buffer.from(encodeFrame(k, 'c', JSON.stringify(m))))
        if (body) parts.push(Buffer.from(body))
        expected.push(body ? { ...m, body: Buffer.from(body) } : m)
      }
      const reader = new FrameReader({ key: k, direction: 'c', bodies: true })
      const got = []
      for (const chunk of cut(Buffer.concat(parts), offsets)) got.push(...reader.push(chunk))
      expect(got).toEqual(expected)
    }))
  })

  test('a frame under another key, another direction or none is refused', () => {
    const json = JSON.stringify({ seq: 1 })
    const reader = () => new FrameReader({ key, direction: 'm' })
    expect(reader().push(Buffer.from(encodeFrame(key, 'm', json)))).toEqual([{ seq: 1 }])
    expect(() => reader().push(Buffer.from(encodeFrame(key, 'c', json)))).toThrow(expect.objectContaining({ code: 'CHOPPER_ERR_LEASE_STREAM', message: expect.stringMatching(/bad MAC/) }))
    expect(() => reader().push(Buffer.from(encodeFrame(Buffer.alloc(32), 'm', json)))).toThrow(/bad MAC/)
    expect(() => reader().push(Buffer.from(json + '\n'))).toThrow(/without a MAC/)
    // A tampered body under a valid-looking MAC.
    const frame = Buffer.from(encodeFrame(key, 'm', json))
    frame[6] = '2'.charCodeAt(0)
    expect(() => reader().push(frame)).toThrow(/bad MAC/)
    // A MAC altered in its last character, cut short, or padded.
    const good = encodeFrame(key, 'm', json)
    const last = good.length - 2
    expect(() => reader().push(Buffer.from(good.slice(0, last) + (good[last] === 'A' ? 'B' : 'A') + '\n'))).toThrow(/bad MAC/)
    expect(() => reader().push(Buffer.from(good.slice(0, last) + '\n'))).toThrow(/bad MAC/)
    expect(() => reader().push(Buffer.from(good.slice(0, -1) + '=\n'))).toThrow(/bad MAC/)
    // A frame whose JSON is a Buffer (an answer carrying a map) has the MAC of the same text as a string.
    const text = JSON.stringify({ seq: 2, note: 'é ✓' })
    expect(encodeFrame(key, 'm', Buffer.from(text)).toString()).toBe(encodeFrame(key, 'm', text))
    expect(reader().push(encodeFrame(key, 'm', Buffer.from(text)))).toEqual([{ seq: 2, note: 'é ✓' }])
  })

  test('an oversized line, a body over its limit, or JSON that is not an object is refused', () => {
    const r = new FrameReader({ key: null, direction: 'm' })
    expect(() => r.push(Buffer.alloc(MAX_FRAME + 1, 0x61))).toThrow(/over 65536 bytes/)
    expect(() => new FrameReader({ key: null, direction: 'c', bodies: true }).push(Buffer.from('{"req":1,"push":{"bytes":-1}}\n'))).toThrow(/push of -1 bytes/)
    expect(() => new FrameReader({ key: null, direction: 'm' }).push(Buffer.from('[1,2]\n'))).toThrow(/not a JSON object/)
    expect(() => new FrameReader({ key: null, direction: 'm' }).push(Buffer.from('{oops\n'))).toThrow(/not a JSON object/)
  })
})
