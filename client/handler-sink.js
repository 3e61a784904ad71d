'use strict'

const { STATUS_CODES } = require('node:http')

/**
 * The sink the shared forwarder (core/forwarder.js) writes an answer into,
 * in front of an undici dispatch handler (the caller's: fetch's, undici's
 * `request`, or any Dispatcher user's). It speaks the forwarder's side
 * (writeHead, write, end, destroy, `destroyed`, cork/uncork, once('drain'))
 * and undici's handler protocol on the other (onHeaders, onData,
 * onComplete, onError; a handler of undici's newer API is wrapped before it
 * gets here). Backpressure: onData returning false pauses the upstream
 * until the handler calls the `resume` it got with the head.
 */
class HandlerSink {
  constructor (handler) {
    this.handler = handler
    this.destroyed = false
    this.headersSent = false
    this.finished = false
    this.drain = null
    this.resume = () => {
      const drain = this.drain
      this.drain = null
      if (drain !== null) drain()
    }
  }

  once (event, fn) {
    if (event === 'drain') this.drain = fn
    return this
  }

  cork () {}
  uncork () {}

  /** `headers`: a flat [name, value, ...] list of strings. */
  writeHead (status, headers) {
    if (this.destroyed) return
    this.headersSent = true
    const raw = new Array(headers.length)
    for (let i = 0; i < headers.length; i++) raw[i] = Buffer.from(headers[i], 'latin1')
    if (typeof this.handler.onResponseStarted === 'function') this.handler.onResponseStarted()
    this.handler.onHeaders(status, raw, this.resume, STATUS_CODES[status] || '')
  }

  write (chunk) {
    if (this.destroyed) return true
    return this.handler.onData(chunk) !== false
  }

  end () {
    if (this.destroyed || this.finished) return
    this.finished = true
    this.handler.onComplete([])
  }

  /** The answer failed (or the request did): the handler hears it once. */
  destroy (err) {
    if (this.destroyed || this.finished) return
    this.destroyed = true
    this.handler.onError(err || new Error('request aborted'))
  }
}

module.exports = { HandlerSink }
