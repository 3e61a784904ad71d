'use strict'

const { request } = require('undici')
const { InternalError } = require('../../core/errors')
const { signRequest } = require('../../core/cluster-auth')

/**
 * The bench's own small HTTP calls (metrics scrapes, moves), each bounded by
 * `timeoutMs`; signed with `token` (the cluster token) when given. Throws on
 * a transport error; non-2xx answers are returned.
 */
async function call (method, url, { json, timeoutMs = 10000, token } = {}) {
  const body = json === undefined ? undefined : JSON.stringify(json)
  const headers = json === undefined ? {} : { 'content-type': 'application/json' }
  if (token !== undefined) {
    const u = new URL(url)
    Object.assign(headers, signRequest({ token, method, path: u.pathname + u.search, body }))
  }
  const res = await request(url, {
    method,
    headers,
    body,
    signal: AbortSignal.timeout(timeoutMs)
  })
  const text = await res.body.text()
  return { status: res.statusCode, text }
}

/** GET a text body (e.g. /metrics); throws unless 200. */
async function getText (url, options) {
  const { status, text } = await call('GET', url, options)
  if (status !== 200) throw new InternalError(`GET ${url} answered ${status}: ${text.slice(0, 200)}`)
  return text
}

/** Send JSON; resolves { status, body } with the parsed body (null if not JSON). */
async function sendJson (method, url, json, options) {
  const { status, text } = await call(method, url, { ...options, json })
  let body = null
  try { body = JSON.parse(text) } catch {}
  return { status, body }
}

const postJson = (url, json, options) => sendJson('POST', url, json, options)
const putJson = (url, json, options) => sendJson('PUT', url, json, options)

module.exports = { getText, postJson, putJson }
