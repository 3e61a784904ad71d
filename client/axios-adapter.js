'use strict'

const { STATUS_CODES } = require('node:http')
const axios = require('axios')

const { AxiosError, AxiosHeaders } = axios

/**
 * An axios adapter that sends each request through the client's Dispatcher
 * (client/client.js): `axios.create({ adapter: client.axiosAdapter })`
 * routes by the URL's `?key=` (or `params: { key }`) or the X-Chopper-Key
 * header, straight to the owner, with the client's holds and retries. This
 * is the project's production axios path (the front end forwards with
 * undici).
 *
 * What axios does around an adapter stays axios's: request and response
 * transforms, params serialization, interceptors. The adapter reads the
 * answer whole (or hands over the stream for `responseType: 'stream'`),
 * and settles as axios's own adapters do: validateStatus decides, a refused
 * status rejects with ERR_BAD_REQUEST or ERR_BAD_RESPONSE, a failure to
 * route rejects with an AxiosError whose `code` is Chopper's
 * (CHOPPER_ERR_UPSTREAM_UNAVAILABLE, ...) and whose `cause` is the error.
 * `timeout` aborts with ECONNABORTED; `signal` cancels.
 * @param {import('undici').Dispatcher} dispatcher
 */
function createAxiosAdapter (dispatcher) {
  return async function chopperAdapter (config) {
    const url = new URL(axios.getUri(config), 'http://chopper.invalid')
    const headers = AxiosHeaders.from(config.headers).toJSON(true)
    const signals = []
    if (config.signal) signals.push(config.signal)
    const timeout = config.timeout > 0 ? AbortSignal.timeout(config.timeout) : null
    if (timeout !== null) signals.push(timeout)
    let res
    try {
      res = await dispatcher.request({
        origin: url.origin,
        path: url.pathname + url.search,
        method: (config.method || 'get').toUpperCase(),
        headers,
        body: bodyOf(config.data),
        signal: signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : AbortSignal.any(signals)
      })
    } catch (err) {
      if (timeout !== null && timeout.aborted) throw new AxiosError(`timeout of ${config.timeout}ms exceeded`, AxiosError.ECONNABORTED, config)
      if (config.signal && config.signal.aborted) throw new axios.CanceledError(null, config)
      throw AxiosError.from(err, err.code, config)
    }
    let data
    if (config.responseType === 'stream') {
      data = res.body
    } else {
      const bytes = Buffer.from(await res.body.arrayBuffer())
      data = config.responseType === 'arraybuffer' ? bytes : bytes.toString(config.responseEncoding || 'utf8')
    }
    const response = { data, status: res.statusCode, statusText: STATUS_CODES[res.statusCode] || '', headers: new AxiosHeaders(res.headers), config, request: null }
    if (!config.validateStatus || config.validateStatus(res.statusCode)) return response
    throw new AxiosError(
      'Request failed with status code ' + res.statusCode,
      res.statusCode >= 400 && res.statusCode < 500 ? AxiosError.ERR_BAD_REQUEST : AxiosError.ERR_BAD_RESPONSE,
      config, null, response
    )
  }
}

/** What axios's request transforms left: a string, a Buffer, a typed array or ArrayBuffer, a stream, or nothing. */
function bodyOf (data) {
  if (data === undefined || data === null) return null
  if (data instanceof ArrayBuffer) return Buffer.from(data)
  if (data instanceof URLSearchParams) return data.toString()
  return data
}

module.exports = { createAxiosAdapter }
