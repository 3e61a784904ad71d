'use strict'

const net = require('node:net')
const { InvalidArgumentError, UpstreamUnreachableError } = require('../core/errors')

/**
 * Parse and check a target origin (`http://127.0.0.1:8080`). The request path
 * comes from the spec, so a target with a path is refused, not silently cut.
 * @param {string} target
 * @param {string} [option] option name for the error message
 * @returns {URL}
 */
function parseTarget (target, option = 'target') {
  let url
  try {
    url = new URL(target)
  } catch {
    throw new InvalidArgumentError(`${option}: expected an http(s) origin like http://127.0.0.1:8080, got ${JSON.stringify(target)}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new InvalidArgumentError(`${option}: expected an http:// or https:// origin, got ${JSON.stringify(target)}`)
  }
  if ((url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
    throw new InvalidArgumentError(`${option}: expected an origin without a path (the spec's phase path is appended), got ${JSON.stringify(target)}`)
  }
  return url
}

/**
 * Fail fast on a target that cannot be reached: one TCP connect with a short
 * deadline, before any schedule starts. Otherwise a typo'd port would show up
 * as a run full of connection errors.
 * @param {URL} url
 * @param {number} timeoutMs
 * @returns {Promise<void>} rejects with UpstreamUnreachableError (CHOPPER_ERR_UPSTREAM_UNREACHABLE)
 */
function probeTarget (url, timeoutMs) {
  const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80)
  const host = url.hostname.replace(/^\[|\]$/g, '')
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port })
    const fail = (why, cause) => {
      socket.destroy()
      reject(new UpstreamUnreachableError(`target ${url.origin} is unreachable: ${why}`, { cause }))
    }
    socket.setTimeout(timeoutMs, () => fail(`no TCP connection within ${timeoutMs} ms`))
    socket.once('error', (err) => fail(`${err.code || err.message} connecting to ${host}:${port}`, err))
    socket.once('connect', () => {
      socket.destroy()
      resolve()
    })
  })
}

module.exports = { parseTarget, probeTarget }
