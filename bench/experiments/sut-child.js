'use strict'

/**
 * Entry point of the system-under-test process (see sut-process.js): starts one
 * contender (its shared parts here, each app server in a process of its own)
 * and answers the harness over IPC until it is told to close.
 */
const { startContender } = require('./contenders')
const { sumCacheCounters } = require('./metrics')
const { ControllerClient } = require('../../core/controller-client')

let sut = null
let closing = null
// A configured cluster token signs the contender's control plane as in production; unset, it runs as before.
const clusterToken = process.env.CHOPPER_CLUSTER_TOKEN || undefined

async function closeSut () {
  if (!sut) return
  // Responses still held by a modelled server (their clients timed out) would hold close() open.
  await Promise.all(sut.servers.map((s) => s.flush().catch(() => {})))
  await sut.close()
  sut = null
}

const handlers = {
  async start ({ name, experiment }) {
    // CHOPPER_EXPERIMENT_LOG=warn (or info, debug): the controller's, front ends' and app servers' logs on stderr
    const level = process.env.CHOPPER_EXPERIMENT_LOG
    const logger = level ? require('pino')({ level }, process.stderr) : undefined
    sut = await startContender(name, experiment, { ...(logger ? { logger } : {}), clusterToken })
    return {
      target: sut.target,
      serverIds: sut.serverIds,
      haproxyConfig: sut.haproxy ? sut.haproxy.config : undefined,
      hasController: Boolean(sut.controller),
      client: sut.client || null, // chopper-client: where the load generator's client reads the map
      // routers: Chopper's controller and front ends when each runs in a process of its own (children of this one)
      processes: { sut: process.pid, appServers: Object.fromEntries(sut.servers.map((s) => [s.id, s.pid])), routers: sut.routerPids || [], ...(sut.dynamoPid ? { dynamo: sut.dynamoPid } : {}) }
    }
  },
  async cacheCounters () {
    return sumCacheCounters(await Promise.all(sut.servers.map((s) => s.stats())))
  },
  async serverStats () {
    return Promise.all(sut.servers.map((s) => s.stats()))
  },
  /**
   * The controller's current assignment as [start, end, servers] per slice
   * (servers: how many hold it, so replicas per slice), or null without a
   * controller. Read as the members read it (signed with the cluster token).
   */
  async layout () {
    if (!sut.controller) return null
    const client = new ControllerClient({ controllerUrl: sut.controller.url, clusterToken })
    try {
      const a = await client.getAssignment()
      return { generation: a.generation, slices: a.slices.map((x) => [x.start, x.end, x.servers.length]) }
    } finally {
      await client.close()
    }
  },
  async rounds () {
    return sut.controller ? (await sut.controller.status()).rounds : null
  },
  async close () {
    closing = closing || closeSut()
    await closing
  }
}

process.on('message', async (msg) => {
  let reply
  try {
    reply = { id: msg.id, value: await handlers[msg.type](msg) }
  } catch (err) {
    reply = { id: msg.id, error: { code: err.code, message: err.message } }
  }
  process.send(reply, () => {
    if (msg.type === 'close') process.exit(0)
  })
})

// The harness went away (crashed or was interrupted): stop everything we started.
process.on('disconnect', () => {
  closing = closing || closeSut()
  closing.finally(() => process.exit(0))
})
