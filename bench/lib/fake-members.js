'use strict'

/**
 * A bench child hosting many protocol-level fake members (app servers and
 * front ends, bench/lib/control-plane-fake-member.js) for
 * bench/control-plane.js, each with a control port of its own. Messages:
 *
 *  - start { controllerUrl, clusterToken, connections, reregisterMs, frontendReregisterMs, registerTimeoutMs, leaseStream }
 *  - spawn { ids, kind: 'server'|'frontend', ratePerSec? } starts them (all at
 *    once, or ratePerSec a second) and answers at once; `spawned` counts them
 *  - held { generation } how many members hold what they must: front ends at
 *    least that generation, app servers what their last lease asked (the last
 *    generation that changed their slices; the controller's lagging count says
 *    whether every one has acknowledged it)
 *  - stats { reset?, sample? } counters, renewal latency, this process's CPU
 *    and event-loop delay (reset: start a new latency and event-loop window;
 *    sample: include the latency sample, `{ count, values }`)
 *  - close
 *
 * Calls to the controller share one undici pool with a connection per member
 * (as separate processes would have), signed with the cluster token.
 */
const { JsonClient } = require('../../core/json-client')
const { serveChild } = require('./child')
const { FakeMember, newCounters } = require('./control-plane-fake-member')
const { Reservoir, ProcessWindow } = require('./control-plane-window')

let config = null
let client = null
const members = new Map() // id -> FakeMember
const counters = newCounters()
const latency = new Reservoir(200000)
const window = new ProcessWindow()
const sockets = new Set()
const closedBytes = { read: 0, written: 0 }
const spawn = { requested: 0, started: 0, failed: 0, firstAt: null, lastAt: null }
const spawnTimers = new Set()

function track (socket) {
  socket.once('close', () => {
    closedBytes.read += socket.bytesRead
    closedBytes.written += socket.bytesWritten
    sockets.delete(socket)
  })
}

function wireBytes () {
  let read = closedBytes.read
  let written = closedBytes.written
  for (const s of sockets) {
    read += s.bytesRead
    written += s.bytesWritten
  }
  return { read, written }
}

const trackedSockets = {
  add (socket) {
    sockets.add(socket)
    track(socket)
  }
}

function startMember (id, kind) {
  const m = new FakeMember({
    id,
    kind,
    client,
    controllerUrl: config.controllerUrl,
    counters,
    latency,
    sockets: trackedSockets,
    reregisterMs: kind === 'server' ? config.reregisterMs : config.frontendReregisterMs,
    registerTimeoutMs: config.registerTimeoutMs,
    clusterToken: config.clusterToken,
    leaseStream: config.leaseStream !== false
  })
  members.set(id, m)
  const now = Date.now()
  if (spawn.firstAt === null) spawn.firstAt = now
  spawn.lastAt = now
  m.start().then(() => { spawn.started++ }, () => { spawn.failed++ })
}

serveChild({
  start ({ controllerUrl, clusterToken, connections = 1000, reregisterMs = 10000, frontendReregisterMs = 10000, registerTimeoutMs = 60000, requestTimeoutMs = 2000, leaseStream = true }) {
    config = { controllerUrl, clusterToken, reregisterMs, frontendReregisterMs, registerTimeoutMs, leaseStream }
    client = new JsonClient({ timeoutMs: requestTimeoutMs, clusterToken, connections })
    return { pid: process.pid }
  },

  spawn ({ ids, kind = 'server', ratePerSec }) {
    if (!config) throw new Error('spawn before start')
    if (!Array.isArray(ids)) throw new Error('spawn: ids must be an array')
    spawn.requested += ids.length
    if (!ratePerSec) {
      for (const id of ids) startMember(id, kind)
      return { spawning: ids.length }
    }
    // Paced: the i-th member starts i / ratePerSec seconds from now (bounded by ids.length).
    const t0 = Date.now()
    ids.forEach((id, i) => {
      const timer = setTimeout(() => {
        spawnTimers.delete(timer)
        startMember(id, kind)
      }, Math.max(0, t0 + (1000 * i) / ratePerSec - Date.now()))
      spawnTimers.add(timer)
    })
    return { spawning: ids.length }
  },

  held ({ generation }) {
    const out = { servers: 0, serversRegistered: 0, serversHolding: 0, frontends: 0, frontendsRegistered: 0, frontendsHolding: 0, minGeneration: null, behind: [] }
    for (const m of members.values()) {
      const k = m.kind === 'server' ? 'servers' : 'frontends'
      out[k]++
      if (m.registered) out[`${k}Registered`]++
      if (m.holds(generation)) out[`${k}Holding`]++
      else if (out.behind.length < 5) out.behind.push({ id: m.id, generation: m.generation, registered: m.registered })
      if (out.minGeneration === null || m.generation < out.minGeneration) out.minGeneration = m.generation
    }
    return out
  },

  stats ({ reset = false, sample = false } = {}) {
    const out = {
      pid: process.pid,
      members: members.size,
      spawn: { ...spawn },
      counters: structuredClone(counters),
      renewalLatencyMs: latency.summary(),
      // the window's renewal round trips (a uniform sample) for the parent to merge across processes
      latencySample: sample ? latency.sample() : undefined,
      wire: wireBytes(),
      process: window.read()
    }
    if (reset) {
      latency.reset()
      window.reset()
    }
    return out
  },

  async close () {
    for (const t of spawnTimers) clearTimeout(t)
    spawnTimers.clear()
    await Promise.all([...members.values()].map((m) => m.stop()))
    members.clear()
    if (client) await client.destroy()
    window.close()
    return { closed: true }
  }
})
