'use strict'

const path = require('node:path')
const { startProxy } = require('./proxy-process')
const { startNodeChild } = require('./node-child')
const { missingReason } = require('./tools')

const FRONTEND_CHILD = path.join(__dirname, 'frontend-child.js')
const BACKEND = path.join(__dirname, '..', 'noop-backend.js')
const BACKEND_CLUSTER = path.join(__dirname, 'noop-backend-cluster.js')

function startFrontend ({ backendUrl, forwarder, workers, dataServer = 'fast', client = 'chopper' }) {
  const args = ['--port', '0', '--backend', backendUrl, '--forwarder', forwarder, '--data-server', dataServer, '--client', client]
  if (workers !== undefined) args.push('--workers', String(workers))
  return startNodeChild(FRONTEND_CHILD, args)
}

/**
 * Every contender: a label for a process count, the tool it needs (or none),
 * and how to start it in front of the backend. start() resolves to
 * { url, pid, stop }; pid is null when there is no process of its own.
 */
const CONTENDERS = Object.freeze({
  haproxy: {
    label: (procs) => `HAProxy, nbthread ${procs}`,
    needs: 'haproxy',
    start: ({ backendUrl, procs }) => startProxy({ kind: 'haproxy', backend: backendUrl, procs })
  },
  nginx: {
    label: (procs) => `nginx, worker_processes ${procs}`,
    needs: 'nginx',
    start: ({ backendUrl, procs }) => startProxy({ kind: 'nginx', backend: backendUrl, procs })
  },
  chopper: {
    label: (procs, cfg) => cfg === 'single' ? 'Chopper front end, 1 process' : `Chopper front end, --workers ${procs}`,
    needs: null,
    start: ({ backendUrl, procs, cfg }) => startFrontend({ backendUrl, forwarder: 'undici', workers: cfg === 'single' ? undefined : procs })
  },
  // The front end's comparison settings (docs/frontend-performance.md, "A
  // server and a client of our own"), in the same run: undici as the only
  // upstream client, then Node's http server on the data port as well.
  'chopper-undici': {
    label: () => 'Chopper front end, undici upstream (upstreamClient undici), 1 process',
    needs: null,
    start: ({ backendUrl }) => startFrontend({ backendUrl, forwarder: 'undici', client: 'undici' })
  },
  'chopper-node': {
    label: () => "Chopper front end, Node's http server and undici (dataServer node, upstreamClient undici), 1 process",
    needs: null,
    start: ({ backendUrl }) => startFrontend({ backendUrl, forwarder: 'undici', dataServer: 'node', client: 'undici' })
  },
  'chopper-axios': {
    label: () => 'Chopper front end (axios forwarder), 1 process',
    needs: null,
    start: ({ backendUrl }) => startFrontend({ backendUrl, forwarder: 'axios' })
  },
  direct: {
    label: () => 'backend direct (no proxy)',
    needs: null,
    start: async ({ backendUrl }) => ({ url: backendUrl, pid: null, stop: async () => {} })
  }
})

/** The two configurations of issue 12, item 3: the contenders each runs and their process count. */
const CONFIGURATIONS = Object.freeze({
  single: { title: 'Single process', procs: () => 1, contenders: ['haproxy', 'nginx', 'chopper', 'chopper-undici', 'chopper-node', 'chopper-axios', 'direct'] },
  all: { title: 'All cores', procs: (cores) => cores, contenders: ['haproxy', 'nginx', 'chopper', 'direct'] }
})

/** Why a contender cannot run on this machine (with the install line), or null. */
function unavailableReason (id) {
  const { needs } = CONTENDERS[id]
  return needs ? missingReason(needs) : null
}

/** The no-op backend: bench/noop-backend.js, or N of it sharing a port through node:cluster. */
function startBackend ({ workers = 1 } = {}) {
  return workers === 1 ? startNodeChild(BACKEND) : startNodeChild(BACKEND_CLUSTER, ['--workers', String(workers)])
}

module.exports = { CONTENDERS, CONFIGURATIONS, unavailableReason, startBackend }
