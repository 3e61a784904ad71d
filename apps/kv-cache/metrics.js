'use strict'

const { Counter, Gauge, Histogram } = require('prom-client')

// Write phases and held reads take from well under a millisecond (an idle
// loopback round trip) to the hold lapse's order (a replica that never answers).
const PHASE_BUCKETS = Object.freeze([0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5])

/**
 * The app's metrics, registered in the app server's registry (several app
 * servers share one process in tests and the local cluster, so never the
 * global default registry).
 * @param {import('prom-client').Registry} registry
 */
function createMetrics (registry) {
  const registers = [registry]
  return {
    hits: new Counter({ name: 'chopper_kv_cache_hits_total', help: 'GETs answered from the cache', registers }),
    misses: new Counter({ name: 'chopper_kv_cache_misses_total', help: 'GETs that went to DynamoDB (absent, expired, distrusted or cache unreachable)', registers }),
    invalidations: new Counter({
      name: 'chopper_kv_cache_invalidations_total',
      help: 'Cache entries dropped or refused: delete (DELETE route), release (slice moved away), stale (entry older than our ownership of its slice), fenced (entry dropped after a newer owner fenced our write off), cache_error (a cache write failed: every older entry distrusted), reconnect (Redis usable again: every older entry distrusted)',
      labelNames: ['reason'],
      registers
    }),
    heldReads: new Counter({
      name: 'chopper_kv_held_reads_total',
      help: 'GETs that arrived while a write held their key (key-holds.js), by how they were answered: writer (heldReads ask: the write\'s writer answered, from its own read of the key), store (read from DynamoDB, a miss: the writer is gone or is this server, or with heldReads wait still held after heldReadWaitMs), lifted (waited, at most heldReadWaitMs, until no write held it, then served as usual)',
      labelNames: ['outcome'],
      registers
    }),
    sharedReads: new Counter({
      name: 'chopper_kv_shared_reads_total',
      help: 'Misses answered by a DynamoDB read another GET of the same key started, with no store read of their own (also counted as misses), by what they shared: fill (a cache fill queued or in flight) or held (a held key\'s store read issued after they arrived: read-batches.js)',
      labelNames: ['with'],
      registers
    }),
    batchedWrites: new Counter({
      name: 'chopper_kv_batched_writes_total',
      help: 'Writes that joined a later write of the same key, waiting for its turn or running and still holding its replicas, and were applied with it: one hold, one DynamoDB write and one release for the batch (write-batches.js)',
      registers
    }),
    fencedWrites: new Counter({
      name: 'chopper_kv_fenced_writes_total',
      help: 'Writes DynamoDB refused because a newer generation already wrote the key (answered 421 CHOPPER_ERR_FENCED_WRITE; op = put | delete)',
      labelNames: ['op'],
      registers
    }),
    notPrimary: new Counter({
      name: 'chopper_kv_not_primary_total',
      help: 'Writes refused with 421 CHOPPER_ERR_NOT_PRIMARY: admitted on a replica that is not the slice\'s writer (the front end retries on the primary)',
      registers
    }),
    fencesSent: new Counter({
      name: 'chopper_kv_fences_sent_total',
      help: 'Write holds and fences this primary sent to other replicas, by phase (hold | release | abort | lapse: a release sent late) and outcome (ok | not_admitted: 421 | dropped: a newer map settled the slice without that replica, so it was no longer waited for | failed: unreachable after retries)',
      labelNames: ['phase', 'outcome'],
      registers
    }),
    writerAsks: new Counter({
      name: 'chopper_kv_writer_asks_total',
      help: 'Reads of a held key this replica asked of the writer holding it (heldReads ask), by outcome: current (our cached version is the writer\'s), value (the writer sent its value), none (the key has no value), gone (the writer refused the connection or does not admit the slice: read from DynamoDB), unsure (no answer in time, a 5xx, or the writer itself held: asked again after waiting for the hold)',
      labelNames: ['outcome'],
      registers
    }),
    fencesReceived: new Counter({
      name: 'chopper_kv_fences_received_total',
      help: 'Write holds and fences this replica applied, by phase (hold | release | abort | lapse: a release sent late, which drops the entry instead of caching the value), and reads it answered for replicas a write of its holds (read)',
      labelNames: ['phase'],
      registers
    }),
    fencesRefused: new Counter({
      name: 'chopper_kv_fences_refused_total',
      help: 'Fence requests refused as malformed or not from a replica of the key\'s slice (400)',
      registers
    }),
    unlistedLifts: new Counter({
      name: 'chopper_kv_unlisted_lifts_total',
      help: 'Releases, aborts and lapses taken from a writer this replica\'s map no longer lists, for a hold it took here while listed (a release is taken as a lapse: the entry is dropped)',
      labelNames: ['phase'],
      registers
    }),
    replicatedWriteFailures: new Counter({
      name: 'chopper_kv_replicated_write_failures_total',
      help: 'Replicated writes that could not reach every replica: phase hold (answered 503 CHOPPER_ERR_REPLICA_UNAVAILABLE, not applied) or release (applied; the replica stays held until its hold lapses)',
      labelNames: ['op', 'phase'],
      registers
    }),
    lateLifts: new Counter({
      name: 'chopper_kv_late_lifts_total',
      help: 'Releases and aborts sent again to replicas that did not take them (421: the replica had stopped admitting the slice after it took the hold; dropped by a newer map; unreachable), a release as a lapse (the replica drops its entry and lifts the hold), by the phase first sent and outcome: ok (taken: that hold is lifted), refused (a 4xx other than 421, e.g. the replica no longer lists this server for the slice: not sent again), expired (not taken before the hold would have lapsed anyway)',
      labelNames: ['phase', 'outcome'],
      registers
    }),
    writePhases: new Histogram({
      name: 'chopper_kv_write_phase_seconds',
      help: 'Time of each phase of a replicated write (a batch: write-batches.js) on its primary: hold (from sending the holds until every replica answered or was given up), store (the DynamoDB write), release (from sending the releases until every replica answered; after the write was acknowledged, so not part of its latency). hold is what replication adds to a write\'s latency; hold + store is about how long the replicas\' reads of the key wait',
      labelNames: ['phase'],
      buckets: PHASE_BUCKETS,
      registers
    }),
    heldReadWaits: new Histogram({
      name: 'chopper_kv_held_read_wait_seconds',
      help: 'Each wait of a GET that found its key held by a write, for the hold to lift (then served from the cache) or until it went on (to DynamoDB, or to ask the writer; a read may wait more than once with heldReads ask): what replication adds to a read\'s latency',
      buckets: PHASE_BUCKETS,
      registers
    }),
    holdsLapsed: new Counter({
      name: 'chopper_kv_holds_lapsed_total',
      help: 'Write holds on this server that lapsed without being lifted (the writer failed, or its release was lost)',
      registers
    }),
    storeErrors: new Counter({
      name: 'chopper_kv_store_errors_total',
      help: 'Failed operations against a backing store (store = redis | dynamodb)',
      labelNames: ['store', 'op'],
      registers
    }),
    degraded: new Gauge({ name: 'chopper_kv_cache_degraded', help: '1 while Redis is unreachable and requests are served from DynamoDB alone', registers }),
    backend: new Gauge({ name: 'chopper_kv_cache_backend', help: 'Cache backend in use (1 for the active one): redis or memory (in-process fallback)', labelNames: ['backend'], registers })
  }
}

module.exports = { createMetrics }
