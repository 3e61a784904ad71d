'use strict'

const { InvalidArgumentError, LeaseStreamError, TimeoutError } = require('./errors')
const { JsonClient } = require('./json-client')
const { LeaseStream } = require('./lease-stream')
const { parseControllerUrls } = require('./controller-urls')

const REGISTER_TIMEOUT_MS = 10000
// A lease stream's upgrade refused by something other than the controller's
// member rules: renew over HTTP for this long, then try a stream again.
const STREAM_RETRY_MS = 60000
// The controller's own refusals of a member's stream, which HTTP would get too.
const MEMBER_ANSWERS = new Set(['CHOPPER_ERR_UNKNOWN_SERVER', 'CHOPPER_ERR_NOT_LEADER', 'CHOPPER_ERR_UNAUTHENTICATED', 'CHOPPER_ERR_FORBIDDEN', 'CHOPPER_ERR_REPLAY_CACHE_FULL'])

/** A call worth trying on another controller: no answer, or a standby's. */
function tryElsewhere (err) {
  if (!err.response) return true
  const body = err.response.data
  return err.response.status === 503 && Boolean(body && body.error && body.error.code === 'CHOPPER_ERR_NOT_LEADER')
}

/**
 * Registration with the controller. Registering returns the current
 * assignment so a new member serves at once instead of waiting for a push.
 *
 * With several controllers (one leads, the others stand by) every call goes
 * to the one that answered last; one that does not answer, or answers as a
 * standby, sends the call on to the leader it names (X-Chopper-Leader, when
 * that is one of ours) or else to the next controller in the list.
 */
class ControllerClient {
  #token

  /**
   * @param {{ controllerUrl: string|string[], timeoutMs?: number, clusterToken?: string, leaseStream?: boolean, serveLoad?: Function, servePush?: Function }} options
   *   leaseStream: renew over a lease stream (core/lease-stream.js, the default) rather than one HTTP call each;
   *   serveLoad: (ack) => report, answers the controller's load requests over the stream;
   *   servePush: ({ raw, signature }) => Promise<{ status, body }>, takes its map pushes there
   */
  constructor ({ controllerUrl, timeoutMs = 2000, clusterToken, leaseStream = true, serveLoad, servePush }) {
    if (typeof leaseStream !== 'boolean') throw new InvalidArgumentError('invalid leaseStream: expected a boolean')
    this.urls = parseControllerUrls(controllerUrl)
    this.current = 0
    this.timeoutMs = timeoutMs
    this.#token = clusterToken
    // Every call is signed with the cluster token when there is one (docs/security.md).
    this.http = new JsonClient({ timeoutMs, clusterToken })
    this.leaseStream = leaseStream
    this.serveLoad = serveLoad
    this.servePush = servePush
    this.streamRetryAt = 0
    this.stream = null
    this.opening = null // the stream's background open
  }

  /** The controller calls go to now. */
  get url () {
    return this.urls[this.current]
  }

  async #call (method, path, data, timeoutMs) {
    let lastErr
    for (let attempt = 0; attempt < this.urls.length; attempt++) {
      const url = this.urls[this.current]
      try {
        return (await this.http.request(method, url + path, { body: data, timeoutMs })).data
      } catch (err) {
        lastErr = err
        if (this.urls.length === 1 || !tryElsewhere(err)) throw err
        this.#next(err, url)
      }
    }
    throw lastErr
  }

  /**
   * After a call to `failed` went unanswered or met a standby: calls go on
   * to the leader the standby named (X-Chopper-Leader, when one of ours), else
   * to the next controller, unless another call moved them on meanwhile (an
   * answer that comes late must not move calls off a controller that works).
   */
  #next (err, failed) {
    const hint = err.response && err.response.headers['x-chopper-leader']
    const at = hint ? this.urls.indexOf(hint) : -1
    if (at >= 0) this.current = at
    else if (this.url === failed) this.current = (this.current + 1) % this.urls.length
  }

  /**
   * `generation` is the member's current one, so a restarted controller
   * numbers above it. Over the lease stream when streams are on (the member's
   * first call opens the one connection it keeps, and the controller reaches
   * it there), else, or when the stream cannot be had, by `POST /v1/servers`.
   */
  async registerServer ({ id, url, controlUrl, generation = 0 }) {
    if (this.leaseStream && Date.now() >= this.streamRetryAt) {
      const stream = this.#streamTo(id)
      try {
        // A join storm answers registrations late: waiting beats retrying, which only adds to the queue.
        return await stream.register({ url, controlUrl, generation }, REGISTER_TIMEOUT_MS)
      } catch (err) {
        if (!this.#httpAfter(err, stream)) throw err
      }
    }
    return this.#call('post', '/v1/servers', { id, url, controlUrl, generation }, REGISTER_TIMEOUT_MS)
  }

  /**
   * Whether a registration the stream failed goes by HTTP: yes when the
   * stream could not be had (its upgrade refused, a controller without
   * registration over streams among them; broken; no connection) or a
   * standby answered (the HTTP call goes on to the leader); no for the
   * controller's own answer to the registration (a 409, a 400), which HTTP
   * would get too, and for a lone controller that did not answer in time.
   */
  #httpAfter (err, stream) {
    const several = this.urls.length > 1
    if (err.upgradeRefused) {
      this.#refused(err, stream)
      return true
    }
    if (err instanceof LeaseStreamError) return true
    if (err.response) {
      if (!several || !tryElsewhere(err)) return false
    } else if (err instanceof TimeoutError && !several) {
      return false
    }
    if (several) this.#next(err, stream.url)
    return true
  }

  /** A refused upgrade: one not by the controller's member rules turns streams off a while. */
  #refused (err, stream) {
    const code = err.response && err.response.data && err.response.data.error && err.response.data.error.code
    if (!MEMBER_ANSWERS.has(code)) {
      // Not the controller's answer to a member (a controller without lease
      // streams, a proxy that does not pass upgrades): HTTP, and a stream
      // again a while later.
      this.streamRetryAt = Date.now() + STREAM_RETRY_MS
      if (this.stream === stream) this.#closeStream()
    } else if (this.urls.length > 1 && tryElsewhere(err)) {
      this.#next(err, stream.url) // a standby: the leader it names
    }
  }

  /**
   * Renew this server's lease, reporting the generations it holds and has
   * drained: over the lease stream to the controller calls go to, else (or
   * when that controller has no streams) by `POST /v1/servers/:id/lease`.
   * A renewal never waits for a stream to open: while one opens (the first
   * renewal, after a break) renewals go by HTTP, over a warm connection.
   */
  async renewLease (id, report) {
    const { generation, drainedGeneration } = report
    const byHttp = () => this.#call('post', `/v1/servers/${encodeURIComponent(id)}/lease`, { generation, drainedGeneration })
    if (!this.leaseStream || Date.now() < this.streamRetryAt) return byHttp()
    const stream = this.#streamTo(id)
    if (!stream.connected) {
      this.#open(stream)
      return byHttp()
    }
    try {
      return await stream.renew({ generation, drainedGeneration })
    } catch (err) {
      // The stream broke (the controller restarted, a standby's answer): HTTP
      // now, which goes on to the leader; the stream reopens at the next renewal.
      // A renewal unanswered in time is not sent again: the controller is slow, not gone.
      if (err instanceof LeaseStreamError || (this.urls.length > 1 && tryElsewhere(err) && !(err instanceof TimeoutError))) {
        if (!(err instanceof LeaseStreamError)) this.#next(err, stream.url)
        return byHttp()
      }
      throw err
    }
  }

  /** Open `stream` in the background; a refusal by something other than the controller's member rules turns streams off a while. */
  #open (stream) {
    if (this.opening) return
    this.opening = stream.connect().catch((err) => {
      if (err.upgradeRefused) this.#refused(err, stream)
      else if (err.response && this.urls.length > 1 && tryElsewhere(err)) this.#next(err, stream.url)
    }).finally(() => { this.opening = null })
  }

  /** The lease stream to the controller calls go to now (a new one when that changed). */
  #streamTo (id) {
    if (this.stream && this.stream.url === this.url && this.stream.id === id) return this.stream
    this.#closeStream()
    this.stream = new LeaseStream({ url: this.url, id, clusterToken: this.#token, timeoutMs: this.timeoutMs, serveLoad: this.serveLoad, servePush: this.servePush })
    return this.stream
  }

  #closeStream () {
    if (this.stream) this.stream.close()
    this.stream = null
  }

  /** Ask for this server's slices to be handed to others (graceful drain). */
  async drainServer (id) {
    return this.#call('post', `/v1/servers/${encodeURIComponent(id)}/drain`, {})
  }

  async deregisterServer (id) {
    await this.#call('delete', `/v1/servers/${encodeURIComponent(id)}`)
  }

  async registerFrontend ({ id, controlUrl, generation = 0 }) {
    return this.#call('post', '/v1/frontends', { id, controlUrl, generation })
  }

  async deregisterFrontend (id) {
    await this.#call('delete', `/v1/frontends/${encodeURIComponent(id)}`)
  }

  /** The current map; with `since` (a generation held), a diff from it when the controller still has it. */
  async getAssignment (since) {
    return this.#call('get', since > 0 ? `/v1/assignment?since=${since}` : '/v1/assignment')
  }

  /** Close the pool now (its member is closing): calls in flight reject. */
  async close () {
    this.#closeStream()
    await this.http.destroy()
  }
}

module.exports = { ControllerClient, parseControllerUrls }
