'use strict'

const fs = require('node:fs')
const path = require('node:path')
const { fork } = require('node:child_process')
const { InternalError, TimeoutError } = require('../../core/errors')

const CHILD = path.join(__dirname, 'appserver-child.js')

/**
 * Fork one kv-cache app server (appserver-child.js) and wait until it has
 * registered with the controller and reported its URLs over IPC. Its stderr
 * (pino lines) goes to `logFile`.
 *
 * @param {{ id: string, controllerUrl: string, dynamoEndpoint: string, redisUrl: string,
 *   logFile: string, logLevel?: string, consistency?: 'strict'|'available', heldReads?: 'wait'|'ask', clusterToken?: string, startTimeoutMs?: number }} options
 *   consistency: undefined keeps kv-cache's own default (strict); clusterToken reaches the child over IPC, not argv or env
 * @returns {Promise<{ id, pid, url, controlUrl, exited: Promise<{code, signal}>, exitInfo: () => object|null,
 *   call: (type: string, timeoutMs?: number) => Promise<any>, signal: (sig: string) => void,
 *   waitExit: (timeoutMs: number) => Promise<{code, signal}>, close: () => Promise<void> }>}
 */
async function startAppServerProcess ({ id, controllerUrl, dynamoEndpoint, redisUrl, logFile, logLevel = 'warn', consistency, heldReads, clusterToken, startTimeoutMs = 30000 }) {
  const log = fs.openSync(logFile, 'a')
  let child
  try {
    child = fork(CHILD, [], { stdio: ['ignore', log, log, 'ipc'], serialization: 'advanced' })
  } finally {
    fs.closeSync(log) // the child holds its own descriptor
  }
  const pending = new Map()
  let nextId = 1
  let exitInfo = null
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => {
    exitInfo = { code, signal, at: Date.now() }
    for (const { reject } of pending.values()) reject(new InternalError(`app server ${id} (pid ${child.pid}) exited (${code ?? signal}); see ${logFile}`))
    pending.clear()
    resolve(exitInfo)
  }))
  child.on('message', (msg) => {
    const p = msg && pending.get(msg.id)
    if (!p) return
    pending.delete(msg.id)
    if (msg.error) {
      const err = new InternalError(`app server ${id}: ${msg.error.message}`)
      if (msg.error.code) err.code = msg.error.code
      p.reject(err)
    } else p.resolve(msg.value)
  })

  const call = (type, payload = {}, timeoutMs = 10000) => new Promise((resolve, reject) => {
    if (exitInfo || !child.connected) return reject(new InternalError(`app server ${id} has exited`))
    const msgId = nextId++
    const t = setTimeout(() => {
      pending.delete(msgId)
      reject(new TimeoutError(`app server ${id}: no answer to ${type} within ${timeoutMs} ms`))
    }, timeoutMs)
    pending.set(msgId, {
      resolve: (v) => { clearTimeout(t); resolve(v) },
      reject: (e) => { clearTimeout(t); reject(e) }
    })
    child.send({ id: msgId, type, ...payload })
  })

  function signal (sig) {
    if (!exitInfo) child.kill(sig)
  }

  /** Resolves with the exit once it happened, or throws after `timeoutMs`. */
  async function waitExit (timeoutMs) {
    let t
    const timeout = new Promise((resolve, reject) => {
      t = setTimeout(() => reject(new TimeoutError(`app server ${id} (pid ${child.pid}) did not exit within ${timeoutMs} ms`)), timeoutMs)
    })
    try {
      return await Promise.race([exited, timeout])
    } finally {
      clearTimeout(t)
    }
  }

  /** Close without draining (end of run), then make sure the process is gone. */
  async function close () {
    if (exitInfo) return
    try {
      await call('close', {}, 10000)
    } catch {
      // killed below
    }
    try {
      await waitExit(5000)
    } catch {
      signal('SIGKILL')
      await exited
    }
  }

  let ready
  try {
    ready = await call('start', { config: { id, controllerUrl, dynamoEndpoint, redisUrl, logLevel, consistency, heldReads, clusterToken } }, startTimeoutMs)
  } catch (err) {
    signal('SIGKILL')
    await exited
    throw err
  }
  return { id, pid: child.pid, url: ready.url, controlUrl: ready.controlUrl, logFile, exited, exitInfo: () => exitInfo, call, signal, waitExit, close }
}

module.exports = { startAppServerProcess }
