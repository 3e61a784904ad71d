'use strict'

const path = require('node:path')
const { fork } = require('node:child_process')
const { InternalError, TimeoutError } = require('../../core/errors')

const CHILD = path.join(__dirname, 'sut-child.js')

/**
 * Start a contender's system under test in a child process: controller, front
 * ends, dynalite and HAProxy there, and each app server in a process of its
 * own below it. The load generator keeps its own event loop: on a 2-core
 * machine, sharing one with the system under test would make the client fall
 * behind its schedule.
 * @param {string} name contender
 * @param {object} experiment normalised experiment block
 * @param {{ startTimeoutMs?: number }} [options]
 * @returns {Promise<{ target: string[], serverIds: string[], haproxyConfig?: string, hasController: boolean, processes: { sut: number, appServers: Record<string, number>, routers: number[], dynamo?: number }, cacheCounters: () => Promise<object|null>, rounds: () => Promise<object[]|null>, layout: () => Promise<object|null>, close: () => Promise<void> }>}
 */
async function startSutProcess (name, experiment, { startTimeoutMs = 60000 } = {}) {
  const child = fork(CHILD, [], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], serialization: 'advanced' })
  let stderr = ''
  // The tail is kept for the error of an early exit. With CHOPPER_EXPERIMENT_LOG
  // the child's (and its children's) logs are wanted: they pass through as well.
  const passLogs = Boolean(process.env.CHOPPER_EXPERIMENT_LOG)
  child.stderr.on('data', (d) => {
    stderr = (stderr + d).slice(-4000)
    if (passLogs) process.stderr.write(d)
  })
  const pending = new Map()
  let nextId = 1
  let exited = null
  const exit = new Promise((resolve) => child.once('exit', (code, signal) => {
    exited = { code, signal }
    for (const { reject } of pending.values()) reject(new InternalError(`system-under-test process exited (${code ?? signal}): ${stderr.trim().split('\n').slice(-3).join(' | ')}`))
    pending.clear()
    resolve()
  }))
  child.on('message', (msg) => {
    const p = pending.get(msg.id)
    if (!p) return
    pending.delete(msg.id)
    if (msg.error) {
      const err = new InternalError(msg.error.message)
      err.code = msg.error.code || err.code
      p.reject(err)
    } else p.resolve(msg.value)
  })
  const call = (type, payload = {}, timeoutMs = 30000) => new Promise((resolve, reject) => {
    if (exited) return reject(new InternalError('system-under-test process has exited'))
    const id = nextId++
    const t = setTimeout(() => { pending.delete(id); reject(new TimeoutError(`system-under-test process: no answer to ${type} within ${timeoutMs} ms`)) }, timeoutMs)
    pending.set(id, { resolve: (v) => { clearTimeout(t); resolve(v) }, reject: (e) => { clearTimeout(t); reject(e) } })
    child.send({ id, type, ...payload })
  })
  const kill = async () => {
    if (!exited) child.kill('SIGKILL')
    await exit
  }
  let ready
  try {
    ready = await call('start', { name, experiment }, startTimeoutMs)
  } catch (err) {
    await kill()
    throw err
  }
  return {
    ...ready,
    cacheCounters: () => call('cacheCounters'),
    serverStats: () => call('serverStats'),
    rounds: () => call('rounds'),
    layout: () => call('layout'),
    async close () {
      try {
        await call('close', {}, 30000)
      } catch {
        // fall through to the kill: the run's figures are already taken
      }
      const t = setTimeout(() => child.kill('SIGKILL'), 5000)
      await exit
      clearTimeout(t)
    }
  }
}

module.exports = { startSutProcess }
