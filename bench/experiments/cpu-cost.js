'use strict'

const { treeCpuMs } = require('../proxies/cpu')

/**
 * What a contender's measured run cost in CPU, per request, split by part:
 * the router (Chopper's front ends and controller: the system-under-test
 * process, with their own processes under it when `routers: separate`; for
 * HAProxy, HAProxy and the idle process that started it), the
 * app servers (each with what it spawned, such as its Redis), kv-cache's
 * shared DynamoDB process, and the load generator (this process).
 *
 * On a machine where all of them share a few cores, a router that costs more
 * CPU per request slows everyone else's timers too; the report shows this
 * next to the latencies. Linux only (/proc): elsewhere every figure is null.
 */

/**
 * CPU time (ms) used so far by each part.
 * @param {{ sut: number, appServers: Record<string, number>, dynamo?: number }} processes pids, as the SUT reports them
 * @returns {{ tree: number|null, apps: number|null, store: number|null, client: number }}
 */
function cpuSnapshot (processes) {
  const tree = treeCpuMs(processes.sut)
  let apps = 0
  for (const pid of Object.values(processes.appServers || {})) {
    const ms = treeCpuMs(pid)
    if (ms === null) { apps = null; break }
    apps += ms
  }
  const store = processes.dynamo ? treeCpuMs(processes.dynamo) : 0
  const { user, system } = process.cpuUsage()
  return { tree, apps, store, client: (user + system) / 1000 }
}

/**
 * Microseconds of CPU per response between two snapshots, by part (rounded to
 * 0.1 µs), or null for a part that could not be read.
 * @param {ReturnType<typeof cpuSnapshot>} before
 * @param {ReturnType<typeof cpuSnapshot>} after
 * @param {number} responses
 * @returns {{ routerUs: number|null, appUs: number|null, storeUs: number|null, clientUs: number|null }}
 */
function cpuCost (before, after, responses) {
  const per = (a, b) => (a === null || b === null || !(responses > 0) ? null : Math.round(((b - a) * 1000 / responses) * 10) / 10)
  // The SUT's tree holds the app servers and the store: the router is what is left.
  const router = (x) => (x.tree === null || x.apps === null || x.store === null ? null : x.tree - x.apps - x.store)
  return {
    routerUs: per(router(before), router(after)),
    appUs: per(before.apps, after.apps),
    storeUs: per(before.store, after.store),
    clientUs: per(before.client, after.client)
  }
}

/** Share of the machine's cores past which a run's figures are the machine's as much as the balancer's. */
const BUSY_SHARE = 0.8

/**
 * How much of the machine the run kept busy: every part's CPU per response
 * times the achieved rate, in cores and as a share of `cpus`. Past
 * BUSY_SHARE, processes wait for a core often enough that the latencies
 * measure the machine too (late timers, bursts): `saturated`.
 * @param {ReturnType<typeof cpuCost>} cost
 * @param {number} rate achieved responses per second
 * @param {number} cpus cores
 * @returns {{ cores: number, machineShare: number, saturated: boolean } | null} null when a part could not be read
 */
function machineLoad (cost, rate, cpus) {
  const parts = [cost.routerUs, cost.appUs, cost.storeUs, cost.clientUs]
  if (parts.some((x) => x === null) || !(rate > 0) || !(cpus > 0)) return null
  const cores = parts.reduce((a, b) => a + b, 0) * rate / 1e6
  const machineShare = Math.round(cores / cpus * 1000) / 1000
  return { cores: Math.round(cores * 100) / 100, machineShare, saturated: machineShare > BUSY_SHARE }
}

module.exports = { cpuSnapshot, cpuCost, machineLoad, BUSY_SHARE }
