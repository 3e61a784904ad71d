'use strict'

const fc = require('fast-check')

/**
 * Building blocks the surfaces share: values that are wrong for a field
 * (by type, range or form), JSON bodies spoiled on the wire, noisy headers,
 * and odd paths. Every "bad…" arbitrary yields only values its field must
 * refuse, so a request built with one is malformed by construction: the
 * property "every answer is a 4xx" holds for all of them, with no oracle
 * borrowed from the code under test.
 */

const TWO_53 = 2 ** 53
const KEYSPACE = 2 ** 32

/** Printable ASCII, some Latin-1 and a few multi-byte characters: what survives a header or a JSON string. */
const textChar = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.integer({ min: 0xa0, max: 0xff }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.constantFrom('é', '字', '😀', '\u200b', '\ufeff', '\u0000', '\t', '\n') }
)
/** Characters allowed in a header value (no CR, LF or NUL; node's parser refuses other controls). */
const headerChar = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.integer({ min: 0xa0, max: 0xff }).map((c) => String.fromCharCode(c)) }
)

const text = (maxLength = 40) => fc.string({ unit: textChar, maxLength })
const headerText = (maxLength = 40) => fc.string({ unit: headerChar, maxLength })

/** Any JSON value, small: the wrong type for whatever field it lands in (callers filter the right type out). */
const jsonJunk = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, 1.5, '', 'x', [], {}, [null], { a: 1 }, '0', '1', 'NaN', 'Infinity', '-0', '1e3'),
  fc.jsonValue({ maxDepth: 2 })
)

/**
 * Numbers that are not a valid generation (or epoch, or drained generation):
 * negative, fractional, unsafe, or not numbers at all. JSON cannot carry NaN
 * or Infinity; 1e400 parses to Infinity.
 */
const badCounter = fc.oneof(
  fc.integer({ min: -TWO_53 + 1, max: -1 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Number.isInteger(x)),
  fc.constantFrom(TWO_53, TWO_53 + 2, 2 ** 60, 1e21, 1e308, -1e308, -0.5, 0.1, 4.2e-7),
  fc.integer({ min: 0, max: 1e6 }).map(String),
  jsonJunk.filter((v) => typeof v !== 'number')
)

/**
 * Generations a member or controller must refuse as implausible: further
 * ahead of the clock than core/assignment.js MAX_AHEAD_MS (1 h) allows.
 */
const implausibleCounter = fc.oneof(
  fc.constantFrom(TWO_53 - 1, 2 ** 52, 2 ** 50),
  fc.integer({ min: 3 * 3600 * 1000, max: 1e12 }).map((ahead) => Math.min(TWO_53 - 1, Date.now() + ahead))
)

const ID_RE = /^[A-Za-z0-9._-]{1,128}$/
/** Not an id the controller accepts (1-128 characters of [A-Za-z0-9._-]). */
const badId = fc.oneof(
  jsonJunk.filter((v) => typeof v !== 'string'),
  fc.constant(''),
  fc.string({ minLength: 129, maxLength: 300, unit: fc.constantFrom('a', 'b', '-', '.', '9') }),
  text(30).filter((s) => !ID_RE.test(s))
)

// What the controller must accept as a member's base URL: http(s)://host:port,
// printable ASCII, no path. Control characters are not part of a host.
const URL_RE = /^https?:\/\/[\x21-\x2e\x30-\x7e]+$/
/** Not a base URL the controller may accept (http(s)://host:port, no path, no control characters). */
const badUrl = fc.oneof(
  jsonJunk.filter((v) => typeof v !== 'string'),
  fc.constantFrom('', 'http://', 'https://', 'ftp://127.0.0.1:1', '127.0.0.1:9000', 'http://127.0.0.1:1/x', 'http://a b', 'HTTP//x', 'http:/x', 'javascript:alert(1)', 'http://\u0000', 'http:// x'),
  text(30).filter((s) => !URL_RE.test(s))
)

/** A path segment that is no id of ours: odd characters, percent-escapes (some malformed), very long. */
const badSegment = fc.oneof(
  fc.constantFrom('%', '%zz', '%E0%A4%A', '%C3%28', '..', '.', '%2e%2e', '%00', 'a%2Fb', '%FF', '__proto__', 'constructor', '%20', 'x'.repeat(200)),
  text(20).map((s) => encodeURIComponent(s)).filter((s) => s.length > 0),
  fc.string({ unit: fc.constantFrom('%', '2', 'F', 'a', '.', '-', '~', '!', '*', "'", '(', ')', ':', '@'), minLength: 1, maxLength: 12 })
)

/** Names of the headers Chopper reads or might, with junk values. */
const CHOPPER_HEADERS = ['x-chopper-key', 'x-chopper-generation', 'x-chopper-epoch', 'x-chopper-leader', 'x-chopper-timestamp', 'x-chopper-nonce', 'x-chopper-signature', 'x-served-by', 'x-kv-fence', 'x-kv-fence-id', 'x-kv-fence-from', 'x-kv-version']
const headerValue = fc.oneof(
  headerText(30),
  fc.constantFrom('', '0', '-1', '1.5', 'NaN', '9007199254740993', '18446744073709551616', ' 5 ', '1e400', 'null', '[]', '{}', 'true'),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String)
)

/** Extra headers to sprinkle on a request: Chopper's own names and a few others, never the ones the surface sets itself. */
function noiseHeaders ({ exclude = [] } = {}) {
  const names = CHOPPER_HEADERS.filter((n) => !exclude.includes(n))
  const other = fc.constantFrom('accept', 'accept-encoding', 'x-forwarded-for', 'x-forwarded-host', 'cookie', 'authorization', 'origin', 'referer', 'user-agent', 'x-request-id', 'forwarded', 'range', 'if-none-match', 'cache-control')
  return fc.dictionary(fc.oneof(fc.constantFrom(...names), other), headerValue, { maxKeys: 4 })
}

/**
 * How a JSON body goes on the wire. `good` encodings are ones a JSON route
 * must accept; `bad` ones it must refuse even when the JSON inside is valid:
 * a content type it does not parse, a charset it does not support, a
 * Content-Encoding the bytes are not in. (Express's JSON parser takes any
 * `utf-*` charset, and an empty one as UTF-8: those are not faults.)
 */
const goodJsonEncoding = fc.record({
  contentType: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/json;charset=UTF-8'),
  chunked: fc.boolean()
})
const badJsonEncoding = fc.oneof(
  fc.record({
    contentType: fc.constantFrom(undefined, 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/octet-stream', 'text/json', 'application/jsonx', 'application/vnd.api+json', 'application/json-patch+json', '*/*', 'application', ';', 'application/json; charset=latin1', 'application/json; charset=koi8-r', 'application/json; charset=us-ascii', 'application/json; charset=bogus'),
    chunked: fc.boolean()
  }),
  fc.record({
    contentType: fc.constant('application/json'),
    contentEncoding: fc.constantFrom('gzip', 'deflate', 'br', 'x-bogus', 'gzip, gzip', 'compress'),
    chunked: fc.boolean()
  })
)

/** A JSON text spoiled so no JSON parser accepts it (given valid JSON of at least 2 characters). */
const spoilJson = fc.oneof(
  fc.integer({ min: 1, max: 64 }).map((n) => (s) => s.slice(0, Math.max(1, s.length - n))), // truncated
  fc.constantFrom('x', ',', '}', ']]', '\u0000', 'undefined', '/*', ', "a": }').map((junk) => (s) => s + junk),
  fc.constantFrom('\'', '{,', 'NaN', '-', '[').map((junk) => (s) => junk + s),
  fc.constant((s) => s.replace(/"/g, '\'')),
  fc.constant((s) => s.replace(/:/, '::'))
)

/** A body no JSON route may accept: invalid JSON, deeply nested, huge, or bytes that are not UTF-8. */
function malformedJsonText ({ hugeBytes }) {
  return fc.oneof(
    { weight: 6, arbitrary: text(60).filter((s) => !isJson(s)) },
    { weight: 2, arbitrary: fc.constantFrom('', ' ', '{', '[', '{"a":', '{"a" 1}', '{\'a\':1}', '[1,]', '{"a":1,}', 'NaN', 'undefined', '\ufeff', '{"__proto__": }', 'null null') },
    // nested past any sane depth, unterminated or not: the parser must refuse or the route must reject it without recursing
    { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 1000, max: 150000 }), fc.boolean()).map(([d, close]) => '['.repeat(d) + ']'.repeat(close ? d : d - 1)) },
    { weight: 1, arbitrary: fc.constant(null).map(() => '{"a":' + 'x'.repeat(hugeBytes)) },
    { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 64 }).map((a) => Buffer.concat([Buffer.from('{"a":"'), Buffer.from(a), Buffer.from([0xff, 0xfe])])) }
  )
}

function isJson (s) {
  try {
    JSON.parse(s)
    return true
  } catch {
    return false
  }
}

/**
 * A JSON value deeply nested inside a field, closed: valid JSON that a route
 * must refuse for the field's type, without recursing on it (error messages
 * that JSON.stringify the value, for one).
 */
const deepValue = fc.integer({ min: 2000, max: 60000 }).map((d) => ({ [DEEP]: d }))
const DEEP = '__fuzzDeep'

/** JSON.stringify that expands deepValue markers into nested arrays without recursing. */
function stringifyWithDeep (value) {
  const parts = []
  const text = JSON.stringify(value, (k, v) => {
    if (v && typeof v === 'object' && typeof v[DEEP] === 'number') {
      parts.push(v[DEEP])
      return `__deep_${parts.length - 1}__`
    }
    return v
  })
  return text.replace(/"__deep_(\d+)__"/g, (m, i) => '['.repeat(parts[i]) + ']'.repeat(parts[i]))
}

/**
 * A request for a JSON route: a value, as good or bad JSON, with an
 * encoding; at least one of them wrong. `valid` and `faulty` are
 * arbitraries of JSON values (the route's payload right and wrong).
 * @returns {fc.Arbitrary<{ headers: object, body: Buffer|string, chunked: boolean }>}
 */
function jsonRequestBody ({ valid, faulty, hugeBytes }) {
  const wire = (value, enc, spoil) => {
    let body = stringifyWithDeep(value)
    if (spoil) body = spoil(body)
    const headers = {}
    if (enc.contentType !== undefined) headers['content-type'] = enc.contentType
    if (enc.contentEncoding !== undefined) headers['content-encoding'] = enc.contentEncoding
    return { headers, body, chunked: enc.chunked }
  }
  return fc.oneof(
    { weight: 6, arbitrary: fc.tuple(faulty, goodJsonEncoding).map(([v, enc]) => wire(v, enc)) },
    { weight: 2, arbitrary: fc.tuple(fc.oneof(valid, faulty), badJsonEncoding).map(([v, enc]) => wire(v, enc)) },
    { weight: 2, arbitrary: fc.tuple(fc.oneof(valid, faulty), goodJsonEncoding, spoilJson).map(([v, enc, spoil]) => wire(v, enc, spoil)) },
    { weight: 2, arbitrary: fc.tuple(malformedJsonText({ hugeBytes }), fc.oneof(goodJsonEncoding, badJsonEncoding)).map(([body, enc]) => ({ ...wire(null, enc), body })) }
  )
}

/** A replacement for a field of `record`: set to a bad value or deleted. */
function withFault (record, field, bad) {
  return bad.map((v) => {
    const out = { ...record }
    if (v === DELETE) delete out[field]
    else out[field] = v
    return out
  })
}
const DELETE = Symbol('delete')

/** Methods other than `allowed` (and never OPTIONS or HEAD, which Express answers itself on a route). */
function otherMethod (allowed) {
  const all = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'PROPFIND', 'MKCOL', 'LOCK', 'PURGE', 'QUERY', 'SEARCH', 'REPORT', 'M-SEARCH', 'NOTIFY', 'SUBSCRIBE']
  return fc.constantFrom(...all.filter((m) => !allowed.includes(m)))
}

/** A query-string parameter pair `k=v`, raw (already escaped or deliberately not). */
const queryPair = fc.tuple(
  fc.oneof(fc.constantFrom('n', 'seq', 'instance', 'x', 'key%20', 'k', '', '__proto__', 'n[]'), text(6).map(encodeURIComponent)),
  fc.oneof(text(10).map(encodeURIComponent), fc.constantFrom('', '%', '%zz', '%C3%28', '+', '%2B', '-1', '1e3', 'NaN'))
).map(([k, v]) => `${k}=${v}`)

module.exports = {
  TWO_53,
  KEYSPACE,
  ID_RE,
  URL_RE,
  DELETE,
  DEEP,
  text,
  headerText,
  jsonJunk,
  badCounter,
  implausibleCounter,
  badId,
  badUrl,
  badSegment,
  headerValue,
  noiseHeaders,
  goodJsonEncoding,
  badJsonEncoding,
  spoilJson,
  malformedJsonText,
  deepValue,
  stringifyWithDeep,
  jsonRequestBody,
  withFault,
  otherMethod,
  queryPair,
  isJson
}
