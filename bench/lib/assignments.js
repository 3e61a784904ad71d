'use strict'

const { KEYSPACE_SIZE } = require('../../core/keyspace')

/**
 * An assignment of `slices` evenly spaced slices over [0, 2^32), dealt
 * round-robin to `servers` servers named `<prefix>0`, `<prefix>1`, ... Adjacent
 * slices have different owners, the worst case for any structure that
 * coalesces runs.
 * @param {{ slices: number, servers: number, generation?: number, prefix?: string, urlOf?: (i: number) => string }} options
 */
function slicedAssignment ({ slices, servers, generation = 1, prefix = 'app-', urlOf = (i) => `http://127.0.0.1:${10000 + i}` }) {
  const ids = Array.from({ length: servers }, (_, i) => `${prefix}${i}`)
  const list = new Array(slices)
  for (let i = 0; i < slices; i++) {
    list[i] = { start: Math.floor((i * KEYSPACE_SIZE) / slices), end: Math.floor(((i + 1) * KEYSPACE_SIZE) / slices), servers: [ids[i % servers]] }
  }
  const serverMap = {}
  ids.forEach((id, i) => { serverMap[id] = { url: urlOf(i) } })
  return { generation, slices: list, servers: serverMap }
}

/** One slice covering the whole keyspace, owned by `id` at `url`. */
function wholeKeyspace (id, url, generation = 1) {
  return { generation, slices: [{ start: 0, end: KEYSPACE_SIZE, servers: [id] }], servers: { [id]: { url } } }
}

module.exports = { slicedAssignment, wholeKeyspace }
