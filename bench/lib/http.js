'use strict'

const http = require('node:http')

/**
 * One HTTP request on a fresh connection (no agent, so nothing lingers).
 * Resolves `{ status, headers, body }` with `body` parsed as JSON when it is JSON.
 */
function request (url, { method = 'GET', body, headers = {}, timeoutMs = 30000 } = {}) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body))
    const req = http.request(url, {
      method,
      agent: false,
      timeout: timeoutMs,
      headers: { ...(payload !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}), ...headers }
    }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString()
        let parsed = text
        try { parsed = JSON.parse(text) } catch {}
        resolve({ status: res.statusCode, headers: res.headers, body: parsed })
      })
      res.on('error', reject)
    })
    req.on('timeout', () => req.destroy(new Error(`${method} ${url} timed out after ${timeoutMs} ms`)))
    req.on('error', reject)
    req.end(payload)
  })
}

/** PUT an assignment to a control port; throws unless it was accepted. */
async function pushAssignment (controlUrl, assignment) {
  const body = typeof assignment === 'string' ? assignment : JSON.stringify(assignment)
  const res = await request(`${controlUrl}/v1/assignment`, { method: 'PUT', body, timeoutMs: 60000 })
  if (res.status !== 200) throw new Error(`push to ${controlUrl} refused: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

module.exports = { request, pushAssignment }
