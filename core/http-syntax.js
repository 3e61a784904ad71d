'use strict'

/**
 * The HTTP/1.1 grammar both of the front end's own parsers check against
 * (RFC 9110 5.1 and 5.5): frontend/fast-http.js for request heads,
 * core/upstream-h1.js for answers. What fails here is never forwarded.
 */

/** A field name (token). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/

/** A field value: visible characters, obs-text, spaces and tabs. No CR, LF, NUL or other controls. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/

/** `text` from `start` to `end` without the optional whitespace (spaces and tabs only) around it. */
function trimmedValue (text, start, end) {
  while (start < end && (text.charCodeAt(start) === 32 || text.charCodeAt(start) === 9)) start++
  while (end > start && (text.charCodeAt(end - 1) === 32 || text.charCodeAt(end - 1) === 9)) end--
  return text.slice(start, end)
}

module.exports = { TOKEN, FIELD_VALUE, trimmedValue }
