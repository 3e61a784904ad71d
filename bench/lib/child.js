'use strict'

const { fork } = require('node:child_process')
const { TimeoutError, InternalError } = require('../../core/errors')

/** Every child forked here, so an interrupted bench can still kill them all. */
const live = new Set()

/**
 * Fork a bench child (a script that calls `serveChild`) and talk to it over
 * IPC: `call(type, payload)` resolves the handler's return value. The child
 * exits when the IPC channel goes away, so a parent that dies takes its
 * children with it; `close()` also sends SIGTERM and, after `killAfterMs`,
 * SIGKILL; `shutdown()` first asks it to close (its `close` handler).
 *
 * @param {string} script absolute path of the child script
 * @param {{ args?: string[], execArgv?: string[], callTimeoutMs?: number }} [options]
 */
function forkChild (script, { args = [], execArgv = [], callTimeoutMs = 30000 } = {}) {
  const child = fork(script, args, { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' })
  live.add(child)
  const pending = new Map()
  let nextId = 1
  let exitInfo = null
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => {
    exitInfo = { code, signal }
    live.delete(child)
    for (const p of pending.values()) p.reject(new InternalError(`child ${script} exited (${signal || code}) during ${p.type}`))
    pending.clear()
    resolve(exitInfo)
  }))
  child.on('message', (msg) => {
    const p = msg && pending.get(msg.id)
    if (!p) return
    pending.delete(msg.id)
    clearTimeout(p.timer)
    if (msg.error) p.reject(Object.assign(new InternalError(`${p.type}: ${msg.error.message}`), { childCode: msg.error.code }))
    else p.resolve(msg.value)
  })
  child.on('error', () => {}) // surfaces as 'exit' or a failed call

  function call (type, payload = {}, timeoutMs = callTimeoutMs) {
    if (exitInfo) return Promise.reject(new InternalError(`child ${script} has exited`))
    const id = nextId++
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id)
        reject(new TimeoutError(`child ${script}: ${type} did not answer within ${timeoutMs} ms`))
      }, timeoutMs)
      pending.set(id, { resolve, reject, timer, type })
      child.send({ ...payload, id, type })
    })
  }

  /** `call('start', payload)`; a child that fails to start is ended before the error is rethrown. */
  async function start (payload) {
    try {
      return await call('start', payload)
    } catch (err) {
      await close(1000)
      throw err
    }
  }

  async function close (killAfterMs = 5000) {
    if (exitInfo) return exitInfo
    child.kill('SIGTERM')
    let timer
    const killed = new Promise((resolve) => { timer = setTimeout(() => { child.kill('SIGKILL'); resolve() }, killAfterMs) })
    await Promise.race([exited, killed])
    clearTimeout(timer)
    return exited
  }

  /**
   * Ask the child to stop its work (a `close` message, which its handler
   * answers), then end the process as close() does. A child that does not
   * answer in time is ended all the same.
   */
  async function shutdown (closeTimeoutMs = callTimeoutMs, killAfterMs = 5000) {
    try {
      await call('close', {}, closeTimeoutMs)
    } catch {
      // ended below
    }
    await close(killAfterMs)
  }

  return { pid: child.pid, call, start, close, shutdown, exited }
}

/** SIGKILL every child still running (for exit and signal handlers). */
function killAllChildren () {
  for (const child of live) child.kill('SIGKILL')
  live.clear()
}

/**
 * Child side: answer `{ id, type, ...payload }` messages with the matching
 * handler's result. Exits on SIGTERM and when the parent goes away.
 * @param {Record<string, (payload) => any>} handlers
 */
function serveChild (handlers) {
  process.on('message', async (msg) => {
    if (!msg || typeof msg.type !== 'string') return
    let reply
    try {
      if (!Object.hasOwn(handlers, msg.type)) throw new Error(`unknown message type ${msg.type}`)
      reply = { id: msg.id, value: await handlers[msg.type](msg) }
    } catch (err) {
      reply = { id: msg.id, error: { code: err.code, message: err.message } }
    }
    if (process.connected) process.send(reply)
  })
  process.on('SIGTERM', () => process.exit(0))
  process.on('disconnect', () => process.exit(0))
}

module.exports = { forkChild, killAllChildren, serveChild }
