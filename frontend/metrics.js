'use strict'

const { Registry, Counter, Histogram, Gauge, collectDefaultMetrics } = require('prom-client')

/** The front end's Prometheus metrics, on a registry of its own. */
function createFrontendMetrics ({ table, inflight = () => ({}), defaultMetrics = false }) {
  const registry = new Registry()
  if (defaultMetrics) collectDefaultMetrics({ register: registry })
  const registers = [registry]
  const metrics = {
    registry,
    requests: new Counter({ name: 'chopper_frontend_requests_total', help: 'Forwarded requests by upstream status', labelNames: ['code'], registers }),
    errors: new Counter({ name: 'chopper_frontend_errors_total', help: 'Requests answered by the front end itself with an error', labelNames: ['code'], registers }),
    duration: new Histogram({ name: 'chopper_frontend_request_duration_seconds', help: 'Forwarded request latency', buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5], registers }),
    retries: new Counter({ name: 'chopper_frontend_retries_total', help: 'Requests retried after an assignment refresh', labelNames: ['reason'], registers }),
    misdirected: new Counter({ name: 'chopper_frontend_misdirected_total', help: '421 answers from app servers (stale map)', registers }),
    upstreamErrors: new Counter({ name: 'chopper_frontend_upstream_errors_total', help: 'Failures reaching an app server', labelNames: ['server', 'code'], registers }),
    // Reads of replicated slices only: single-server slices pay nothing for it.
    replicaChoices: new Counter({ name: 'chopper_frontend_replica_choices_total', help: 'Reads of replicated slices by the replica chosen: the primary or another', labelNames: ['position'], registers }),
    replicaDeferred: new Counter({ name: 'chopper_frontend_replica_deferred_total', help: 'LC* long requests that waited for a replica without a long job, by outcome', labelNames: ['outcome'], registers })
  }
  new Gauge({ // eslint-disable-line no-new
    name: 'chopper_frontend_inflight',
    help: 'Requests in flight per app server (the counters replica choice reads)',
    labelNames: ['server'],
    registers,
    collect () {
      this.reset()
      for (const [server, n] of Object.entries(inflight())) this.set({ server }, n)
    }
  })
  // Across node:cluster workers, the lowest generation any worker holds.
  new Gauge({ name: 'chopper_frontend_assignment_generation', help: 'Installed assignment generation', aggregator: 'min', registers, collect () { this.set(table.generation) } }) // eslint-disable-line no-new
  new Gauge({ // eslint-disable-line no-new
    name: 'chopper_frontend_assignment_updates',
    help: 'Assignment updates by result',
    labelNames: ['result'],
    registers,
    collect () {
      for (const [result, n] of Object.entries(table.stats)) this.set({ result }, n)
    }
  })
  return metrics
}

module.exports = { createFrontendMetrics }
