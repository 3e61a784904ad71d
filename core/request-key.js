'use strict'

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
  const q = keyFromUrl(req.url)
  if (q !== undefined) return q.length > 0 ? q : headerKey(req)
  return headerKey(req)
}

function headerKey (req) {
  const h = req.headers['x-chopper-key']
  return typeof h === 'string' && h.length > 0 ? h : undefined
}

/**
 * The decoded `key` query parameter of a request target, '' when repeated or
 * empty, undefined when absent. No allocation beyond the result.
 */
function keyFromUrl (url) {
  const q = url.indexOf('?')
  if (q === -1) return undefined
  let found
  let i = q + 1
  while (i < url.length) {
    let end = url.indexOf('&', i)
    if (end === -1) end = url.length
    if (end - i >= 3 && url.charCodeAt(i) === 107 && url.charCodeAt(i + 1) === 101 && url.charCodeAt(i + 2) === 121 && (end - i === 3 || url.charCodeAt(i + 3) === 61)) {
      if (found !== undefined) return '' // repeated: an array to Express
      found = decode(url.slice(end - i === 3 ? end : i + 4, end))
    }
    i = end + 1
  }
  return found
}

function decode (s) {
  if (s.indexOf('+') !== -1) s = s.replace(/\+/g, ' ')
  if (s.indexOf('%') === -1) return s
  try {
    return decodeURIComponent(s)
  } catch {
    return s // as Express's parser leaves a malformed escape
  }
}

module.exports = { defaultKeyFrom, keyFromRawRequest, keyFromUrl }
