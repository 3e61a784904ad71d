'use strict'

const { InvalidArgumentError } = require('../../core/errors')

/**
 * Checks shared by the proxy config builders: host, port and backend URL.
 * Values are written into configuration files, so anything outside a narrow
 * alphabet is refused rather than quoted.
 * @returns {{ backend: URL }}
 */
function checkCommon (o) {
  if (typeof o.host !== 'string' || !/^[0-9A-Za-z.:-]+$/.test(o.host)) throw new InvalidArgumentError(`invalid host: expected an IP address or host name, got ${JSON.stringify(o.host)}`)
  if (!Number.isInteger(o.port) || o.port < 1 || o.port > 65535) throw new InvalidArgumentError(`invalid port: expected a TCP port from 1 to 65535, got ${JSON.stringify(o.port)}`)
  let backend = null
  try { backend = new URL(o.backend) } catch {}
  if (!backend || backend.protocol !== 'http:' || !backend.port || !/^[0-9A-Za-z.-]+$/.test(backend.hostname)) {
    throw new InvalidArgumentError(`invalid backend: expected http://host:port, got ${JSON.stringify(o.backend)}`)
  }
  return { backend }
}

module.exports = { checkCommon }
