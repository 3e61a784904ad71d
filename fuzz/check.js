'use strict'

/**
 * The properties every fuzzed answer must have, as pure functions over the
 * client's result (fuzz/http-client.js): a 4xx status, and a JSON body
 * `{ error: { code: 'CHOPPER_ERR_…', message } }` (HEAD answers carry the
 * JSON content type and no body).
 */

/**
 * Node's own HTTP parser refusing a request it cannot parse: 400 (or 431 for
 * headers too large) with `Connection: close` and nothing else. Not the
 * component's answer, so not held to its error format.
 */
function isParserRejection (res) {
  return (res.status === 400 || res.status === 431) && res.headers.connection === 'close' &&
    res.headers['content-length'] === undefined && res.headers['content-type'] === undefined && res.text === ''
}

/**
 * What is wrong with the answer to a malformed request, or null.
 * @param {{ method: string }} req
 * @param {{ status?: number, headers?: object, text?: string, error?: string, code?: string }} res
 * @returns {string|null}
 */
function answerFault (req, res) {
  if (res.error === 'timeout') return `no answer within the timeout (${res.code})`
  if (res.error === 'transport') return `connection failed without an answer (${res.code}: ${res.message})`
  if (res.error) return `${res.error} error ${res.code}`
  if (!(res.status >= 400 && res.status < 500)) return `status ${res.status}, expected a 4xx (body ${snippet(res.text)})`
  if (req.expectStatus && !req.expectStatus.includes(res.status)) return `status ${res.status}, expected ${req.expectStatus.join(' or ')}${req.replayOf ? ' (a replayed request)' : ''} (body ${snippet(res.text)})`
  const type = res.headers['content-type'] || ''
  if (!/^application\/json\b/.test(type)) return `status ${res.status} with content type ${JSON.stringify(type)}, expected JSON (body ${snippet(res.text)})`
  if (req.method === 'HEAD') return null
  let body
  try {
    body = JSON.parse(res.text)
  } catch {
    return `status ${res.status} with a body that is not JSON: ${snippet(res.text)}`
  }
  const e = body && body.error
  if (!e || typeof e.code !== 'string' || !/^CHOPPER_ERR_[A-Z0-9_]+$/.test(e.code) || typeof e.message !== 'string') {
    return `status ${res.status} without { error: { code: 'CHOPPER_ERR_…', message } }: ${snippet(res.text)}`
  }
  return null
}

function snippet (text) {
  if (text === undefined) return '(none)'
  return JSON.stringify(text.length > 200 ? text.slice(0, 200) + '…' : text)
}

/** A request as a short line for reports (bodies cut). */
function describeRequest (req) {
  const body = req.body === undefined ? '' : ` body(${Buffer.byteLength(req.body)} B${req.chunked ? ', chunked' : ''})=${snippet(Buffer.isBuffer(req.body) ? req.body.toString('latin1') : req.body)}`
  const headers = Object.keys(req.headers || {}).length ? ` headers=${JSON.stringify(req.headers).slice(0, 300)}` : ''
  const auth = req.auth ? ` auth=${req.auth}` : (req.replayOf ? ' (replayed)' : '')
  const path = req.path.length > 300 ? req.path.slice(0, 300) + `…(${req.path.length} chars)` : req.path
  return `${req.method} ${req.origin} ${path}${auth}${headers}${body}`
}

module.exports = { answerFault, isParserRejection, describeRequest, snippet }
