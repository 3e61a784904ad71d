'use strict'

/** Default key extraction: `?key=` first, then the X-Chopper-Key header. */
function defaultKeyFrom (req) {
  const q = req.query.key
  if (typeof q === 'string' && q.length > 0) return q
  const h = req.headers['x-chopper-key']
  return typeof h === 'string' && h.length > 0 ? h : undefined
}

module.exports = { defaultKeyFrom }
