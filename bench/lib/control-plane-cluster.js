'use strict'

/**
 * The parent's side of bench/control-plane.js: the controller's process
 * (control-plane-controller.js), the fake members' processes
 * (fake-members.js), and convergence: every member registered and holding a
 * slice, no handoff in progress, every front end holding the controller's
 * current generation and every member the last generation that changed its
 * slices (the controller's word, and the members').
 */
const path = require('node:path')
const { setTimeout: delay } = require('node:timers/promises')
const { forkChild } = require('./child')

const CONTROLLER = path.join(__dirname, 'control-plane-controller.js')
const FAKES = path.join(__dirname, 'fake-members.js')
const STATS_TIMEOUT_MS = 10000

/**
 * @param {object} options createController options (plain JSON) plus logLevel
 * @param {string} [root] the checkout whose controller/ to run (default this one)
 */
async function startController (options, root) {
  const child = forkChild(CONTROLLER, { callTimeoutMs: 30000, execArgv: process.env.CHOPPER_CONTROLLER_PROF ? ['--cpu-prof', '--cpu-prof-dir=' + process.env.CHOPPER_CONTROLLER_PROF] : [] })
  const { url, pid } = await child.start({ options, root })
  return {
    url,
    pid,
    stats: (reset = false) => child.call('stats', { reset }, STATS_TIMEOUT_MS),
    close: () => child.shutdown(10000, 3000)
  }
}

/** A fake-members process, started against `controllerUrl`. */
async function startFakes (config) {
  const child = forkChild(FAKES, { callTimeoutMs: 30000 })
  await child.start(config)
  let alive = true
  child.exited.then(() => { alive = false })
  return {
    pid: child.pid,
    get alive () { return alive },
    spawn: (ids, kind = 'server', ratePerSec = 0) => child.call('spawn', { ids, kind, ratePerSec }),
    held: (generation) => child.call('held', { generation }, STATS_TIMEOUT_MS),
    stats: (reset = false, sample = false) => child.call('stats', { reset, sample }, STATS_TIMEOUT_MS),
    /** SIGKILL: no goodbye, no deregistration; resolves once it has exited. */
    async sigkill () {
      process.kill(child.pid, 'SIGKILL')
      await child.exited
    },
    close: () => child.shutdown(15000, 3000)
  }
}

/** Add every number of `b` into `a` (same shape), recursively; returns `a`. */
function addInto (a, b) {
  for (const [k, v] of Object.entries(b)) {
    if (typeof v === 'number') a[k] = (a[k] || 0) + v
    else if (v && typeof v === 'object' && !Array.isArray(v)) addInto(a[k] || (a[k] = {}), v)
  }
  return a
}

/** `b - a` for every number of `b` (same shape), recursively. */
function subtract (b, a) {
  const out = {}
  for (const [k, v] of Object.entries(b)) {
    if (typeof v === 'number') out[k] = a && typeof a[k] === 'number' ? v - a[k] : v
    else if (v && typeof v === 'object' && !Array.isArray(v)) out[k] = subtract(v, a ? a[k] : undefined)
    else out[k] = v
  }
  return out
}

class ControlPlaneCluster {
  /**
   * @param {{ controllerOptions: object, clusterToken: string, procs: number[], fakeConfig?: object, root?: string }} options
   *   procs: how many members each fake process will host (sizes its connection pool);
   *   root: the checkout whose controller to run
   */
  static async start ({ controllerOptions, clusterToken, procs, fakeConfig = {}, root }) {
    const cluster = new ControlPlaneCluster()
    try {
      cluster.controller = await startController({ ...controllerOptions, clusterToken }, root)
      cluster.fakes = await Promise.all(procs.map((n) => startFakes({
        controllerUrl: cluster.controller.url,
        clusterToken,
        connections: 2 * n + 64, // a connection per member, and room for the members a later phase adds
        ...fakeConfig
      })))
      return cluster
    } catch (err) {
      await cluster.close()
      throw err
    }
  }

  get live () {
    return this.fakes.filter((f) => f.alive)
  }

  /** The controller's stats (statsSource says whether from stats() or status()). */
  async controllerStats (reset = false) {
    return this.controller.stats(reset)
  }

  /** Sum of every live fake process's `held(generation)`. */
  async held (generation) {
    const parts = await Promise.all(this.live.map((f) => f.held(generation)))
    const out = { servers: 0, serversRegistered: 0, serversHolding: 0, frontends: 0, frontendsRegistered: 0, frontendsHolding: 0, behind: [] }
    for (const p of parts) {
      for (const k of Object.keys(out)) if (k !== 'behind') out[k] += p[k]
      out.behind.push(...p.behind)
    }
    out.behind = out.behind.slice(0, 5)
    return out
  }

  /** Every live fake process's stats, and their counters and wire bytes summed. */
  async fakeStats (reset = false, sample = false) {
    const parts = await Promise.all(this.live.map((f) => f.stats(reset, sample)))
    const counters = {}
    const wire = {}
    for (const p of parts) {
      addInto(counters, p.counters)
      addInto(wire, p.wire)
    }
    return { parts, counters, wire }
  }

  /**
   * One look: whether `servers` app servers and `frontends` front ends are
   * joined and acknowledged (see the file comment). Resolves
   * `{ converged, generation, controller, held }`; a controller too busy to
   * answer within the stats timeout rejects.
   */
  async sample ({ servers, frontends, owning = true }) {
    const s = (await this.controllerStats()).stats
    const ready = s.members === servers && s.frontends === frontends && (!owning || s.owning === null || s.owning === servers) &&
      !s.handoffInProgress && (s.lagging === null || s.lagging === 0) && s.generation > 0
    const held = await this.held(s.generation)
    const converged = ready && held.serversHolding === servers && held.serversRegistered === servers && held.frontendsHolding === frontends
    return { converged, generation: s.generation, controller: s, held }
  }

  /**
   * Poll `sample` until converged, or `deadlineMs` after `since`.
   * @returns {Promise<{ converged: boolean, ms: number, generation: number, controller: object, held: object, polls: number, error?: string }>}
   */
  async waitConverged ({ servers, frontends, since = Date.now(), deadlineMs, intervalMs = pollInterval(servers), owning = true }) {
    const deadline = since + deadlineMs
    let last = null
    let polls = 0
    for (;;) {
      polls++
      try {
        last = await this.sample({ servers, frontends, owning })
        if (last.converged) return { ...last, ms: Date.now() - since, polls }
      } catch (err) {
        last = { ...last, converged: false, error: err.message } // a controller too busy to answer in time: not converged yet
      }
      if (Date.now() >= deadline) return { ...last, converged: false, ms: Date.now() - since, polls }
      await delay(intervalMs)
    }
  }

  /** Close the controller first (so it does not react to members going away), then the fakes. */
  async close () {
    const all = []
    if (this.controller) all.push(this.controller.close().catch(() => {}))
    await Promise.all(all)
    await Promise.all((this.fakes || []).map((f) => f.close().catch(() => {})))
  }
}

/** Poll often enough to time a join to ~0.1 s, not so often as to load the controller. */
function pollInterval (servers) {
  return Math.max(50, Math.min(250, Math.round(servers / 20)))
}

/**
 * How many members each of `procs` processes hosts: the first about 10 % (the
 * one the failure phase kills), the rest split evenly.
 */
function splitMembers (n, procs) {
  if (procs < 2) return [n]
  const first = Math.max(1, Math.round(n / 10))
  const rest = n - first
  const out = [first]
  for (let i = 0; i < procs - 1; i++) out.push(Math.floor(rest / (procs - 1)) + (i < rest % (procs - 1) ? 1 : 0))
  return out
}

module.exports = { ControlPlaneCluster, startController, startFakes, splitMembers, addInto, subtract, pollInterval }
