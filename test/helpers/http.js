'use strict'

const { request } = require('undici')

/** GET/PUT/... returning { status, headers, body (parsed JSON when possible) }. */
async function call (url, { method = 'GET', headers = {}, body } = {}) {
  const res = await request(url, { method, headers, body })
  const text = await res.body.text()
  let parsed = text
  try { parsed = JSON.parse(text) } catch {}
  return { status: res.statusCode, headers: res.headers, body: parsed }
}

function putJson (url, value) {
  return call(url, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) })
}

/** Run `tasks` (functions returning promises) with at most `limit` in flight. */
async function runLimited (tasks, limit) {
  const results = new Array(tasks.length)
  let next = 0
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, async () => {
    while (next < tasks.length) {
      const i = next++
      results[i] = await tasks[i]()
    }
  }))
  return results
}

module.exports = { call, putJson, runLimited }
