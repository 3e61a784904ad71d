'use strict'

const { Registry, Counter, Gauge } = require('prom-client')

/**
 * The controller's Prometheus registry: counters the code increments, and
 * gauges read from `c` (the controller's shared state) when scraped.
 */
function createControllerMetrics (c) {
  const registry = new Registry()
  const registers = [registry]
  const m = {
    rounds: new Counter({ name: 'chopper_controller_rounds_total', help: 'Balancing rounds run', registers }),
    quietRounds: new Counter({ name: 'chopper_controller_quiet_rounds_total', help: 'Rounds that ran no strategy because no app server was busy for quietBelow of the period', registers }),
    saveFailures: new Counter({ name: 'chopper_controller_state_save_failures_total', help: 'Failed saves of the controller state (pushes wait for the save)', registers }),
    elections: new Counter({ name: 'chopper_controller_elections_total', help: 'Times this controller became the leader', registers }),
    depositions: new Counter({ name: 'chopper_controller_depositions_total', help: 'Times this controller stopped leading (lease lost or state claimed by a newer epoch)', registers }),
    churn: new Counter({ name: 'chopper_controller_key_churn_total', help: 'Key-range length moved between servers', registers }),
    collectFailures: new Counter({ name: 'chopper_controller_load_collection_failures_total', help: 'Failed load collections', labelNames: ['server'], registers }),
    collectSlow: new Counter({ name: 'chopper_controller_load_collection_slow_total', help: 'Rounds that went on without a server\'s load report, still in flight (its load unknown that round)', labelNames: ['server'], registers }),
    evictions: new Counter({ name: 'chopper_controller_evictions_total', help: 'Servers dropped after failing load collection', registers }),
    leaseExpiries: new Counter({ name: 'chopper_controller_lease_expiries_total', help: 'Servers dropped because their lease lapsed (silent: killed, hung or cut off)', registers }),
    handoffs: new Counter({ name: 'chopper_controller_handoffs_total', help: 'Fenced handoffs by outcome: acked (every loser drained) or lapsed (some loser\'s lease lapsed first)', labelNames: ['outcome'], registers }),
    standbyRefusals: new Counter({ name: 'chopper_controller_standby_refusals_total', help: 'Member and operator calls a standby answered 503 CHOPPER_ERR_NOT_LEADER, by HTTP or on a lease stream (members then move to the leader)', registers }),
    batches: new Counter({ name: 'chopper_controller_membership_batches_total', help: 'Membership batches laid out (each one layout change and one handoff)', registers }),
    imbalance: new Gauge({ name: 'chopper_controller_imbalance', help: 'Imbalance (max/mean server load) of the last period', registers })
  }
  const gauge = (name, help, read) => new Gauge({ name, help, registers, collect () { this.set(read()) } })
  gauge('chopper_controller_generation', 'Current assignment generation', () => (c.assignment ? c.assignment.generation : 0))
  gauge('chopper_controller_push_failures', 'Failed assignment pushes (retried)', () => c.pusher.stats.failures)
  gauge('chopper_controller_push_bytes', 'Bytes of assignment pushes sent (diffs and full maps)', () => c.pusher.stats.bytes)
  gauge('chopper_controller_renewals', 'Lease renewals answered', () => c.counts.renewals)
  gauge('chopper_controller_lease_streams', 'Open lease streams (members renewing over one connection)', () => (c.streams ? c.streams.size : 0))
  gauge('chopper_controller_servers', 'Registered app servers', () => c.servers.size)
  gauge('chopper_controller_leader', '1 while this controller leads', () => (c.leading() ? 1 : 0))
  gauge('chopper_controller_epoch', 'Epoch of the leader lease this controller holds (0: none)', () => (c.leading() ? c.epoch : 0))
  return { registry, m }
}

module.exports = { createControllerMetrics }
