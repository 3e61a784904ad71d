'use strict'

const querystring = require('node:querystring')
// eslint-disable-next-line n/no-deprecated-api -- what Express's parseurl falls back on
const { parse: parseLegacy } = require('node:url')
const { keyFromUrl, keyFromRawRequest } = require('../../core/request-key')
const { createRng } = require('../../loadgen/prng')

/**
 * What an Express 5 app (the "simple" query parser, node:querystring) sees as
 * the key. parseurl hands a target with a fragment to url.parse, which drops it.
 */
function expressKey (url) {
  const q = url.indexOf('?')
  if (q === -1) return undefined
  const query = url.includes('#') ? parseLegacy(url).query : url.slice(q + 1)
  if (typeof query !== 'string') return undefined
  const v = querystring.parse(query).key
  if (v === undefined) return undefined
  return typeof v === 'string' ? v : '' // an array: no usable key
}

describe('keyFromUrl (the front end routes by the key the app server will see)', () => {
  test.each([
    ['/x?key=a', 'a'], ['/x?a=1&key=b%20c&z', 'b c'], ['/x?key=a+b', 'a b'], ['/x?key=', ''], ['/x?key', ''],
    ['/x?keys=1', undefined], ['/x', undefined], ['/x?key=a&key=b', ''], ['/x?k=1&key=%C3%A9', 'é'], ['/x?monkey=1', undefined],
    // found by fuzz/: an escaped name, a malformed escape, a fragment
    ['/x?ke%79=a', 'a'], ['/x?key=a&ke%79=b', ''], ['/x?key=%C3%28', '\ufffd('], ['/x?key=a%', 'a%'], ['/x?key=a#b', 'a']
  ])('%s', (url, want) => {
    expect(keyFromUrl(url)).toBe(want)
    expect(keyFromUrl(url)).toBe(expressKey(url))
  })

  test('agrees with node:querystring on 20,000 random query strings', () => {
    const rng = createRng(5)
    const alphabet = ['k', 'e', 'y', '=', '&', '%', '2', '0', 'C', '3', 'A', '9', '+', 'a', 'é', '?', '#']
    for (let t = 0; t < 20000; t++) {
      let q = ''
      const n = rng.int(14)
      for (let i = 0; i < n; i++) q += alphabet[rng.int(alphabet.length)]
      if (rng.next() < 0.5) q = `key=${q}`
      const url = `/p?${q}`
      const want = expressKey(url)
      expect([url, keyFromUrl(url)]).toEqual([url, want])
    }
  })

  test('falls back to the X-Chopper-Key header when the query has no key', () => {
    expect(keyFromRawRequest({ url: '/x', headers: { 'x-chopper-key': 'h' } })).toBe('h')
    expect(keyFromRawRequest({ url: '/x?key=', headers: { 'x-chopper-key': 'h' } })).toBe('h')
    expect(keyFromRawRequest({ url: '/x?key=q', headers: { 'x-chopper-key': 'h' } })).toBe('q')
    expect(keyFromRawRequest({ url: '/x', headers: {} })).toBeUndefined()
  })
})
