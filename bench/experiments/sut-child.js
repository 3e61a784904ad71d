'use strict'

/**
 * Entry point of the system-under-test process (see sut-process.js): starts one
 * contender and answers the harness over IPC until it is told to close.
 */
const { startContender } = require('./contenders')
const { cacheCounters } = require('./metrics')

let sut = null
let closing = null

async function closeSut () {
  if (!sut) return
  // Requests still queued at a modelled server (their clients timed out) would hold close() open.
  for (const s of sut.servers) if (s.instance && s.instance.capacity) s.instance.capacity.close()
  await sut.close()
  sut = null
}

const handlers = {
  async start ({ name, experiment }) {
    sut = await startContender(name, experiment)
    return { target: sut.target, serverIds: sut.serverIds, haproxyConfig: sut.haproxy ? sut.haproxy.config : undefined, hasController: Boolean(sut.controller) }
  },
  cacheCounters: () => cacheCounters(sut.servers),
  rounds: () => (sut.controller ? sut.controller.status().rounds : null),
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
