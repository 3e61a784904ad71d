'use strict'

/**
 * The time a response spent in the server, from its `Server-Timing` header
 * (W3C Server Timing: `name;dur=ms[;desc=...]`, metrics separated by commas,
 * possibly over several header lines): the sum of every metric's `dur`.
 * The experiments' capacity model states each request's time in its app
 * server this way (bench/lib/capacity.js), so the load generator can tell the
 * time spent outside the servers (client, router, network) from the time in
 * them. Proxies pass the header through unchanged.
 * @param {string|string[]|undefined} header
 * @returns {number|null} milliseconds, or null when no metric has a valid dur
 */
function serverTimingMs (header) {
  if (header === undefined) return null
  const text = Array.isArray(header) ? header.join(',') : String(header)
  let total = 0
  let found = false
  for (const metric of text.split(',')) {
    for (const param of metric.split(';').slice(1)) {
      const eq = param.indexOf('=')
      if (eq === -1 || param.slice(0, eq).trim().toLowerCase() !== 'dur') continue
      const ms = Number(param.slice(eq + 1).trim().replace(/^"|"$/g, ''))
      if (Number.isFinite(ms) && ms >= 0) {
        total += ms
        found = true
      }
    }
  }
  return found ? total : null
}

module.exports = { serverTimingMs }
