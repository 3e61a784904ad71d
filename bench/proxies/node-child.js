'use strict'

const path = require('node:path')
const { spawn } = require('node:child_process')
const { TimeoutError } = require('../../core/errors')

/** The exit code by which a child script says "this contender is not available here". */
const EXIT_UNAVAILABLE = 2

/**
 * Spawn `node <script> ...args` that prints its port on stdout when ready
 * (bench/noop-backend.js, frontend-child.js). Its stdin stays open: a child
 * that watches it stops when the bench goes away. Rejects with the child's
 * stderr when it exits first; `err.unavailable` marks exit code 2.
 * @returns {Promise<{ url: string, pid: number, stop: () => Promise<void> }>}
 */
function startNodeChild (script, args = [], { host = '127.0.0.1', readyTimeoutMs = 20000, stopTimeoutMs = 5000 } = {}) {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000) })
  let exit = null
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => { exit = { code, signal }; resolve(exit) }))
  let stopping = null
  const stop = () => {
    stopping = stopping || (async () => {
      if (exit === null) child.kill('SIGTERM')
      const t = setTimeout(() => child.kill('SIGKILL'), stopTimeoutMs)
      await exited
      clearTimeout(t)
      child.stdin.destroy()
      child.stdout.destroy()
      child.stderr.destroy()
    })()
    return stopping
  }
  return new Promise((resolve, reject) => {
    let out = ''
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      stop().then(() => reject(new TimeoutError(`${path.basename(script)} did not print its port within ${readyTimeoutMs} ms: ${stderr.trim()}`)))
    }, readyTimeoutMs)
    child.stdout.on('data', (d) => {
      out += d
      // The port is the first line that is only digits (a child's workers may log on the same stdout).
      const m = /^(\d+)\r?$/m.exec(out.slice(0, out.lastIndexOf('\n') + 1))
      if (!m) return
      clearTimeout(timer)
      child.stdout.removeAllListeners('data')
      child.stdout.resume()
      resolve({ url: `http://${host}:${m[1]}`, pid: child.pid, stop })
    })
    exited.then(({ code, signal }) => {
      if (timedOut) return
      clearTimeout(timer)
      const err = new Error(`${path.basename(script)} exited (${code ?? signal}): ${stderr.trim() || 'no message'}`)
      err.unavailable = code === EXIT_UNAVAILABLE
      reject(err) // no-op once resolved
    })
  })
}

module.exports = { startNodeChild, EXIT_UNAVAILABLE }
