'use strict'

const { InvalidArgumentError } = require('./errors')

/**
 * Controller URLs from an option: one URL, a comma-separated list, or an
 * array (highly available controllers, docs/controller-ha.md). Also the
 * client's `members` (control URLs). On its own so the client package
 * ships it without the members' controller client.
 * @returns {string[]}
 */
function parseControllerUrls (value, name = 'controllerUrl') {
  const list = Array.isArray(value) ? value : String(value).split(',')
  const urls = list.map((u) => (typeof u === 'string' ? u.trim().replace(/\/+$/, '') : u))
  if (urls.length === 0 || urls.some((u) => typeof u !== 'string' || !/^https?:\/\/[^\s/,]+$/.test(u))) {
    throw new InvalidArgumentError(`invalid ${name}: expected an http(s)://host:port URL or a comma-separated list of them`)
  }
  return [...new Set(urls)]
}

module.exports = { parseControllerUrls }
