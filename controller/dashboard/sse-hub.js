'use strict'

const { silent } = require('../../core/logger')
const { TooManyClientsError, InvalidArgumentError, toHttpBody } = require('../../core/errors')

/** Every option of SseHub and its default. */
const defaults = Object.freeze({
  maxClients: 32, // concurrent streams; more are refused with a JSON 503
  heartbeatMs: 15000, // a comment line keeps proxies and browsers from timing out an idle stream
  retryMs: 2000, // how long a browser waits before reconnecting (the SSE `retry` field)
  // A client that does not read (a stalled tab, a dead peer the kernel has not
  // noticed yet) would make us buffer every event for it: drop it past this.
  maxBufferedBytes: 4 * 1024 * 1024,
  logger: silent
})

/**
 * Server-Sent Events to a bounded set of clients (the dashboard's live feed).
 * Each client first gets what `initial()` returns (a full snapshot), then
 * every broadcast. Serialization happens once per broadcast, and not at all
 * while nobody listens.
 */
class SseHub {
  constructor (options = {}) {
    const opts = { ...defaults, ...options }
    for (const k of ['maxClients', 'heartbeatMs', 'retryMs', 'maxBufferedBytes']) {
      if (!Number.isInteger(opts[k]) || opts[k] < 1) throw new InvalidArgumentError(`invalid ${k}: expected an integer >= 1`)
    }
    this.opts = opts
    this.log = opts.logger
    this.clients = new Set() // express responses
    this.heartbeat = null
    this.pending = new Map() // event -> timer (coalesced broadcasts)
    this.closed = false
  }

  get size () {
    return this.clients.size
  }

  /**
   * Express handler body: start a stream on `res`, or answer 503 JSON when
   * `maxClients` streams are open.
   * @param {() => {event: string, data: any}[]} initial events sent to this client first
   */
  accept (req, res, initial) {
    if (this.closed || this.clients.size >= this.opts.maxClients) {
      const err = new TooManyClientsError(`too many event-stream clients: at most ${this.opts.maxClients} at once`)
      res.status(err.status).set('Retry-After', String(Math.ceil(this.opts.retryMs / 1000))).json(toHttpBody(err))
      return
    }
    res.status(200).set({
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      'X-Accel-Buffering': 'no', // nginx: do not buffer the stream
      // The stream is the connection's whole life: without keep-alive, ending
      // it at close() frees the socket, so the server can close promptly.
      Connection: 'close'
    })
    res.flushHeaders()
    req.socket.setNoDelay(true)
    this.clients.add(res)
    res.on('close', () => this.#drop(res))
    this.#write(res, `retry: ${this.opts.retryMs}\n\n`)
    for (const { event, data } of initial()) this.#write(res, frame(event, data))
    if (!this.heartbeat) {
      this.heartbeat = setInterval(() => this.#writeAll(': heartbeat\n\n'), this.opts.heartbeatMs)
      this.heartbeat.unref()
    }
  }

  /**
   * Send one event to every client.
   * @param {string} event
   * @param {any|(() => any)} data JSON-serializable, or a function computing it (called only if someone listens)
   */
  broadcast (event, data) {
    if (this.clients.size === 0) return
    this.#writeAll(frame(event, typeof data === 'function' ? data() : data))
  }

  /**
   * Broadcast `event` at most once per `delayMs`: calls within the delay fold
   * into one, computed when it fires (a burst of membership changes or pushes
   * becomes one update).
   */
  coalesce (event, data, delayMs) {
    if (this.clients.size === 0 || this.pending.has(event) || this.closed) return
    const t = setTimeout(() => {
      this.pending.delete(event)
      this.broadcast(event, data)
    }, delayMs)
    t.unref()
    this.pending.set(event, t)
  }

  /** End every stream and stop the timers. */
  close () {
    this.closed = true
    for (const t of this.pending.values()) clearTimeout(t)
    this.pending.clear()
    for (const res of [...this.clients]) {
      this.#drop(res)
      res.end()
    }
  }

  #writeAll (text) {
    for (const res of [...this.clients]) this.#write(res, text)
  }

  #write (res, text) {
    if (!this.clients.has(res)) return
    res.write(text)
    if (res.writableLength > this.opts.maxBufferedBytes) {
      this.log.warn({ bufferedBytes: res.writableLength }, 'dropping an event-stream client that does not read')
      this.#drop(res)
      res.destroy()
    }
  }

  #drop (res) {
    this.clients.delete(res)
    if (this.clients.size === 0 && this.heartbeat) {
      clearInterval(this.heartbeat)
      this.heartbeat = null
    }
  }
}

/** One SSE frame; JSON never holds a raw newline, so one `data:` line suffices. */
function frame (event, data) {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`
}

module.exports = { SseHub, defaults, frame }
