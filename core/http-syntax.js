'use strict'

/**
 * The HTTP/1.1 grammar of the front end's own server and client, in one
 * place (RFC 9110 5.1 and 5.5, RFC 9112 2 to 6): frontend/fast-http.js reads
 * request heads with it, core/upstream-h1.js reads answers and checks the
 * request headers it writes. What fails here is never forwarded.
 */

/** A field name (token). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/

/** A field value: visible characters, obs-text, spaces and tabs. No CR, LF, NUL or other controls. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/

/**
 * A Content-Length as written after the colon: digits, no whitespace after
 * them (llhttp refuses a trailing tab), at most 15 of them (a safe integer).
 */
const CONTENT_LENGTH = /^ *([0-9]{1,15})$/

/** A status line's code: exactly three digits, then a space or the end of the line (RFC 9112 4). */
const STATUS = /^HTTP\/1\.[01] ([1-5][0-9]{2})(?: |\r\n|$)/

// `close` as one of a Connection header's options.
const CLOSE = /(?:^|[\s,])close(?:$|[\s,])/i

/** `text` from `start` to `end` without the optional whitespace (spaces and tabs only) around it. */
function trimmedValue (text, start, end) {
  while (start < end && (text.charCodeAt(start) === 32 || text.charCodeAt(start) === 9)) start++
  while (end > start && (text.charCodeAt(end - 1) === 32 || text.charCodeAt(end - 1) === 9)) end--
  return text.slice(start, end)
}

/**
 * The header lines of a head, from `at` (the first line after the start
 * line) to the end of `text` (the head without its final CRLF CRLF), and the
 * fields that decide framing and connection handling. `error` is set (and the
 * rest is not to be used) when a line is not `token ":" OWS value OWS` with a
 * valid value: an obs-fold, whitespace before the colon, a bare CR or LF, NUL
 * or another control character.
 */
class HeadFields {
  constructor () {
    this.raw = [] // [name, value, ...] as written (values trimmed)
    this.error = null // why the head is refused
    this.hosts = 0
    this.contentLength = -1 // -1: none; -2: invalid or repeated (llhttp refuses even an equal repeat)
    this.transferEncoding = null // the value, when present (repeats joined)
    this.close = false // Connection: close
    this.connection = null // the Connection header's options, lower case, when it names any
    this.expect = false
    this.upgrade = false
    this.keepAlive = null // the Keep-Alive value
  }
}

/** Parse the header lines of `text` from `at` into a HeadFields. */
function parseFields (text, at) {
  const f = new HeadFields()
  const raw = f.raw
  while (at < text.length) {
    let end = text.indexOf('\r\n', at)
    if (end === -1) end = text.length
    const colon = text.indexOf(':', at)
    if (colon <= at || colon >= end) { // no name, or no colon on this line (an obs-fold starts with a space: no token)
      f.error = 'bad header line'
      return f
    }
    const name = text.slice(at, colon)
    const value = trimmedValue(text, colon + 1, end)
    if (!TOKEN.test(name) || !FIELD_VALUE.test(value)) {
      f.error = `bad header ${JSON.stringify(name)}`
      return f
    }
    // Most names are none of these: the length decides before any lowercasing.
    switch (name.length) {
      case 4:
        if (name.toLowerCase() === 'host') f.hosts++
        break
      case 6:
        if (name.toLowerCase() === 'expect') f.expect = true
        break
      case 7:
        if (name.toLowerCase() === 'upgrade') f.upgrade = true
        break
      case 10: {
        const lower = name.toLowerCase()
        if (lower === 'connection') {
          if (CLOSE.test(value)) f.close = true
          f.connection = f.connection === null ? value.toLowerCase() : f.connection + ',' + value.toLowerCase()
        } else if (lower === 'keep-alive') {
          f.keepAlive = value
        }
        break
      }
      case 14:
        if (name.toLowerCase() === 'content-length') {
          const m = f.contentLength === -1 ? CONTENT_LENGTH.exec(text.slice(colon + 1, end)) : null
          f.contentLength = m === null ? -2 : Number(m[1])
        }
        break
      case 17:
        if (name.toLowerCase() === 'transfer-encoding') f.transferEncoding = f.transferEncoding === null ? value : f.transferEncoding + ', ' + value
        break
    }
    raw.push(name, value)
    at = end + 2
  }
  return f
}

/**
 * Whether a buffer holds an LF not preceded by CR before `limit`: a head
 * with bare-LF line ends, which llhttp refuses (RFC 9112 2.2 allows either;
 * a server must not leave it unanswered).
 */
function hasBareLf (buf, limit = buf.length) {
  let at = buf.indexOf(10)
  while (at !== -1 && at < limit) {
    if (at === 0 || buf[at - 1] !== 13) return true
    at = buf.indexOf(10, at + 1)
  }
  return false
}

/**
 * The names a Connection header lists (RFC 9110 7.6.1), lower case, as a Set;
 * null when `value` lists none but `close` and `keep-alive`, which are
 * hop-by-hop anyway. Those named must not be forwarded.
 */
function connectionOptions (value) {
  if (value === null || value === undefined) return null
  let out = null
  for (const part of value.split(',')) {
    const name = part.trim().toLowerCase()
    if (name === '' || name === 'close' || name === 'keep-alive') continue
    if (out === null) out = new Set()
    out.add(name)
  }
  return out
}

/**
 * The Connection options of a raw [name, value, ...] list (strings or
 * Buffers), every Connection line joined: null when none are named.
 */
function connectionOptionsOf (raw) {
  let joined = null
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]
    if (name.length !== 10) continue
    const text = typeof name === 'string' ? name : name.toString('latin1')
    if (text.toLowerCase() !== 'connection') continue
    const value = typeof raw[i + 1] === 'string' ? raw[i + 1] : raw[i + 1].toString('latin1')
    joined = joined === null ? value : joined + ',' + value
  }
  return connectionOptions(joined)
}

/** How many Host lines a raw [name, value, ...] list has (RFC 9112 3.2: more than one is a 400). */
function hostCount (raw) {
  let n = 0
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].length === 4 && raw[i].toLowerCase() === 'host') n++
  }
  return n
}

/**
 * The first header of a [name, value, ...] list to be written that is not a
 * valid field (RFC 9110 5.1, 5.5): `{ name }` or `{ name, value }` naming
 * it, or null when all are valid. A CR or LF in either would split the head.
 */
function invalidField (headers) {
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]
    const value = headers[i + 1]
    if (typeof name !== 'string' || !TOKEN.test(name)) return { name }
    if (typeof value !== 'string' || !FIELD_VALUE.test(value)) return { name, value }
  }
  return null
}

module.exports = {
  TOKEN,
  FIELD_VALUE,
  CONTENT_LENGTH,
  STATUS,
  CLOSE,
  HeadFields,
  trimmedValue,
  parseFields,
  hasBareLf,
  connectionOptions,
  connectionOptionsOf,
  hostCount,
  invalidField
}
