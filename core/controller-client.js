'use strict'

const axios = require('axios')

/**
 * Registration with the controller. Registering returns the current
 * assignment so a new member serves at once instead of waiting for a push.
 */
class ControllerClient {
  constructor ({ controllerUrl, timeoutMs = 2000 }) {
    this.http = axios.create({ baseURL: controllerUrl, timeout: timeoutMs })
  }

  /** `generation` is the member's current one, so a restarted controller numbers above it. */
  async registerServer ({ id, url, controlUrl, generation = 0 }) {
    const { data } = await this.http.post('/v1/servers', { id, url, controlUrl, generation })
    return data
  }

  /** Renew this server's lease, reporting the generations it holds and has drained. */
  async renewLease (id, { generation, drainedGeneration }) {
    const { data } = await this.http.post(`/v1/servers/${encodeURIComponent(id)}/lease`, { generation, drainedGeneration })
    return data
  }

  /** Ask for this server's slices to be handed to others (graceful drain). */
  async drainServer (id) {
    const { data } = await this.http.post(`/v1/servers/${encodeURIComponent(id)}/drain`, {})
    return data
  }

  async deregisterServer (id) {
    await this.http.delete(`/v1/servers/${encodeURIComponent(id)}`)
  }

  async registerFrontend ({ id, controlUrl, generation = 0 }) {
    const { data } = await this.http.post('/v1/frontends', { id, controlUrl, generation })
    return data
  }

  async deregisterFrontend (id) {
    await this.http.delete(`/v1/frontends/${encodeURIComponent(id)}`)
  }

  async getAssignment () {
    const { data } = await this.http.get('/v1/assignment')
    return data
  }
}

module.exports = { ControllerClient }
