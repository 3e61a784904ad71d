'use strict'

const net = require('node:net')
const { spawn } = require('node:child_process')

// A listener in a child process with a backlog of 1, stopped (SIGSTOP) so it
// never accepts: once its accept queue is full, the kernel drops every further
// SYN to it, as a host behind a firewall that drops them would. No root needed.
const LISTENER = `
const s = require('node:net').createServer()
s.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => process.stdout.write(s.address().port + '\\n'))
`

/** Connect to `port`: true once connected, false if still connecting after `ms`. */
function connects (port, ms, sockets) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1')
    sockets.push(socket)
    socket.on('error', () => {})
    const timer = setTimeout(() => resolve(false), ms)
    socket.once('connect', () => { clearTimeout(timer); resolve(true) })
  })
}

/**
 * An address that drops SYNs: `{ origin, close() }`. Connections to it
 * neither succeed nor fail until the client gives up.
 */
async function createBlackhole () {
  const child = spawn(process.execPath, ['-e', LISTENER], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise((resolve, reject) => {
    child.once('error', reject)
    child.stdout.once('data', (d) => resolve(Number(String(d).trim())))
  })
  process.kill(child.pid, 'SIGSTOP')
  const sockets = []
  // Fill the accept queue: loopback connects in well under 250 ms, so the first
  // one still connecting then is a dropped SYN. A handful suffices (backlog + 1).
  let full = false
  for (let i = 0; i < 16 && !full; i++) full = !(await connects(port, 250, sockets))
  const close = () => {
    for (const s of sockets) s.destroy()
    child.kill('SIGKILL')
  }
  if (!full) {
    close()
    throw new Error('blackhole: the stopped listener kept accepting connections')
  }
  return { origin: `http://127.0.0.1:${port}`, port, close }
}

module.exports = { createBlackhole }
