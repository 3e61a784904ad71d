'use strict'

const querystring = require('node:querystring')
// eslint-disable-next-line n/no-deprecated-api -- Express's parseurl falls back on url.parse; agreeing with it takes the same function
const { parse: parseLegacy } = require('node:url')

/** Default key extraction for Express requests: `?key=` first, then the X-Chopper-Key header. */
function defaultKeyFrom (req) {
  const q = req.query.key
  if (typeof q === 'string' && q.length > 0) return q
  const h = req.headers['x-chopper-key']
  return typeof h === 'string' && h.length > 0 ? h : undefined
}

/**
 * The same rule for a raw `http.IncomingMessage` (the front end's data path
 * runs before, and without, Express): the `key` query parameter, decoded as
 * Express's query parser decodes it (`+` is a space, percent-escapes), else
 * the header. A repeated `key` parameter is an array to Express, so no key
 * here either, and the app server would agree.
 * @param {import('node:http').IncomingMessage} req
 * @returns {string|undefined}
 */
function keyFromRawRequest (req) {
  return keyFromParts(req.url, req.headers['x-chopper-key'])
}

/**
 * The same rule from a request target and its X-Chopper-Key header value
 * (the client's dispatcher has no request object).
 * @param {string} url the path with its query
 * @param {string|undefined} header
 * @returns {string|undefined}
 */
function keyFromParts (url, header) {
  const q = keyFromUrl(url)
  if (q !== undefined && q.length > 0) return q
  return typeof header === 'string' && header.length > 0 ? header : undefined
}

/**
 * The decoded `key` query parameter of a request target, '' when repeated or
 * empty, undefined when absent: what Express 5 hands the app server (parseurl,
 * then node:querystring). No allocation beyond the result in the common case;
 * a target where a simple scan could disagree with them (a percent-escaped
 * parameter name, which may spell `key`; more parameters than querystring
 * reads; a fragment or whitespace, which parseurl hands to url.parse) takes
 * their own path.
 */
function keyFromUrl (url) {
  const q = url.indexOf('?')
  if (q === -1) return undefined
  if (ODD_TARGET.test(url)) return keyAsExpressSees(url)
  const pct = url.indexOf('%', q)
  if (pct !== -1 && ESCAPED_NAME.test(url.slice(q + 1))) return keyAsExpressSees(url)
  let found
  let pairs = 0
  let i = q + 1
  while (i < url.length) {
    let end = url.indexOf('&', i)
    if (end === -1) end = url.length
    if (++pairs >= MAX_PAIRS) return keyAsExpressSees(url)
    if (end - i >= 3 && url.charCodeAt(i) === 107 && url.charCodeAt(i + 1) === 101 && url.charCodeAt(i + 2) === 121 && (end - i === 3 || url.charCodeAt(i + 3) === 61)) {
      if (found !== undefined) return '' // repeated: an array to Express
      found = decode(url.slice(end - i === 3 ? end : i + 4, end))
    }
    i = end + 1
  }
  return found
}

// parseurl leaves its fast path on these characters (url.parse drops a
// fragment and trims whitespace).
const ODD_TARGET = /[#\t\n\f\r \u00a0\ufeff]/
// A parameter name with a percent-escape: `ke%79` is `key` to querystring.
const ESCAPED_NAME = /(?:^|&)[^&=]*%/
const VALID_ESCAPE = /%[0-9A-Fa-f]{2}/
// node:querystring reads at most 1,000 parameters (maxKeys); near that, ask it.
const MAX_PAIRS = 900

/** The slow path: exactly what Express 5 computes, for the rare targets the scan cannot decide. */
function keyAsExpressSees (url) {
  const query = ODD_TARGET.test(url) ? parseLegacy(url).query : url.slice(url.indexOf('?') + 1)
  if (typeof query !== 'string') return undefined
  const k = querystring.parse(query).key
  if (k === undefined) return undefined
  return typeof k === 'string' ? k : '' // repeated: an array to Express
}

function decode (raw) {
  const s = raw.indexOf('+') === -1 ? raw : raw.replace(/\+/g, ' ')
  // querystring decodes a value only when it saw a valid escape in it (it
  // steps over '+' while looking: '%+41' counts), and then decodes the
  // value with its '+' already made spaces
  if (s.indexOf('%') === -1 || !VALID_ESCAPE.test(s === raw ? raw : raw.replace(/\+/g, ''))) return s
  try {
    return decodeURIComponent(s)
  } catch {
    return querystring.unescape(s) // as Express's parser decodes a malformed escape: byte by byte
  }
}

module.exports = { defaultKeyFrom, keyFromRawRequest, keyFromParts, keyFromUrl }
