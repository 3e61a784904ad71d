'use strict'

const { Registry } = require('prom-client')
const { InvalidArgumentError } = require('../../core/errors')
const { ENV } = require('../../core/settings')
const { silent } = require('../../core/logger')
const { validateToken } = require('../../core/cluster-auth')

/** How a replica answers a read of a key a write holds (the `heldReads` option). */
const HELD_READS = Object.freeze(['wait', 'ask'])

const fromEnv = (key) => Object.values(ENV.kvCache).find((s) => s.key === key).default

/**
 * Every option of the kv-cache app and its default. The first six are the
 * ones core/settings.js reads from the environment (ENV.kvCache), so the two
 * lists cannot disagree about a default.
 */
const defaults = Object.freeze({
  table: fromEnv('table'), // 'chopper-kv'
  dynamoEndpoint: fromEnv('dynamoEndpoint'), // undefined: real DynamoDB via the SDK's region/credential chain
  region: fromEnv('region'), // 'us-west-2', the paper's region
  redisUrl: fromEnv('redisUrl'), // undefined: see spawnRedis
  cacheTtlMs: fromEnv('cacheTtlMs'), // 10 s after the last access (paper 6.1)
  maxValueBytes: fromEnv('maxValueBytes'), // 400 KB, DynamoDB's item limit
  // Without redisUrl: spawn a private redis-server (the paper's one Redis per
  // app server) when the binary is on PATH; otherwise, or when false, use an
  // in-process TTL cache.
  spawnRedis: true,
  createTable: true, // create the table (on-demand billing) when it is missing
  redisTimeoutMs: 500, // per Redis command; past it the request falls back to DynamoDB
  dynamoTimeoutMs: 3000, // per DynamoDB HTTP attempt (the SDK retries up to 3 times)
  serverId: 'kv', // used in log lines and the Redis key namespace
  // Replicated slices: a write holds, then fences, the key on the slice's
  // other replicas. Each phase retries an unreachable replica for this long;
  // more than appserver-lib's holdMs (2 s), which a replica's shard guard may
  // spend waiting for the map that admits the fence.
  fenceTimeoutMs: 3000,
  // A write hold nobody lifts lapses after this long. It must exceed the
  // longest write the primary still acknowledges (a hold phase plus DynamoDB's
  // 3 attempts): see the check below.
  holdLapseMs: 30000,
  // Group commit: writes of a key that arrive while one of its writes runs go
  // as one batch, its last write (write-batches.js). false: one at a time, a
  // comparison switch for the experiments (--app-options); keep the default.
  batchWrites: true,
  // A replicated write's releases go on after it is answered; true: the key's
  // next write starts meanwhile (its hold may overtake them: kv-writer.js),
  // false: it waits for them (a comparison switch for the experiments).
  pipelineReleases: true,
  // A replica's read of a key a write holds: 'wait' for the release, then
  // read DynamoDB; or 'ask' the writer, which vouches for the replica's cached
  // version or sends its value, without waiting for the write (kv-reader.js).
  heldReads: 'wait',
  // How long a read of a held key waits for the write's release before it
  // reads DynamoDB (wait) or asks the writer (ask; 0: at once), counted from
  // the arrival of the youngest hold it waits for: a hold that old is not
  // waited for again (kv-reader.js). Long enough to ride out a stalled
  // event loop: a read that gives up reads DynamoDB, a miss that costs the
  // server more work just when it is short of time. Unset, at most fenceTimeoutMs.
  heldReadWaitMs: 500,
  // The shared cluster secret (docs/security.md): fence requests between
  // replicas are signed with it, and the fence route takes signed ones only.
  // undefined: fences are not authenticated (see the README's known limits).
  clusterToken: undefined,
  registry: undefined, // prom-client Registry; a private one when absent
  logger: silent
})

const isPosInt = (v) => Number.isInteger(v) && v > 0
const describe = (v) => (v !== null && typeof v === 'object' ? (Array.isArray(v) ? 'an array' : 'an object') : JSON.stringify(v) ?? String(v))

/**
 * Merge `options` over `defaults` and validate; throws InvalidArgumentError
 * naming the first bad option and what was expected.
 * @param {object} options
 * @returns {object} the full, validated options
 */
function resolveOptions (options = {}) {
  if (options === null || typeof options !== 'object') throw new InvalidArgumentError('invalid options: expected an object')
  const o = { ...defaults }
  for (const [k, v] of Object.entries(options)) if (v !== undefined) o[k] = v
  // Unset, it follows a fenceTimeoutMs shorter than its default (it may not exceed it).
  if (options.heldReadWaitMs === undefined && isPosInt(o.fenceTimeoutMs)) o.heldReadWaitMs = Math.min(defaults.heldReadWaitMs, o.fenceTimeoutMs)
  const fail = (name, expected) => {
    throw new InvalidArgumentError(`invalid ${name}: expected ${expected}, got ${describe(o[name])}`)
  }
  if (typeof o.table !== 'string' || !/^[A-Za-z0-9_.-]{3,255}$/.test(o.table)) fail('table', 'a DynamoDB table name ([A-Za-z0-9_.-], 3 to 255 characters)')
  if (o.dynamoEndpoint !== undefined && (typeof o.dynamoEndpoint !== 'string' || !/^https?:\/\/\S+$/.test(o.dynamoEndpoint))) fail('dynamoEndpoint', 'an http(s) URL')
  if (typeof o.region !== 'string' || o.region.length === 0) fail('region', 'a non-empty AWS region name')
  if (o.redisUrl !== undefined && (typeof o.redisUrl !== 'string' || !/^rediss?:\/\/\S+$/.test(o.redisUrl))) fail('redisUrl', 'a redis:// or rediss:// URL')
  if (!isPosInt(o.cacheTtlMs)) fail('cacheTtlMs', 'a positive integer (milliseconds)')
  if (!isPosInt(o.maxValueBytes)) fail('maxValueBytes', 'a positive integer (bytes)')
  if (typeof o.spawnRedis !== 'boolean') fail('spawnRedis', 'a boolean')
  if (typeof o.createTable !== 'boolean') fail('createTable', 'a boolean')
  if (!isPosInt(o.redisTimeoutMs)) fail('redisTimeoutMs', 'a positive integer (milliseconds)')
  if (!isPosInt(o.dynamoTimeoutMs)) fail('dynamoTimeoutMs', 'a positive integer (milliseconds)')
  if (!isPosInt(o.fenceTimeoutMs)) fail('fenceTimeoutMs', 'a positive integer (milliseconds)')
  if (!isPosInt(o.holdLapseMs)) fail('holdLapseMs', 'a positive integer (milliseconds)')
  if (o.holdLapseMs <= o.fenceTimeoutMs + 4 * o.dynamoTimeoutMs) fail('holdLapseMs', `more than fenceTimeoutMs + 4 × dynamoTimeoutMs (${o.fenceTimeoutMs + 4 * o.dynamoTimeoutMs} ms), so a hold outlives any write it announces`)
  if (typeof o.batchWrites !== 'boolean') fail('batchWrites', 'a boolean')
  if (typeof o.pipelineReleases !== 'boolean') fail('pipelineReleases', 'a boolean')
  if (!HELD_READS.includes(o.heldReads)) fail('heldReads', `one of ${HELD_READS.join(', ')}`)
  if (!(Number.isInteger(o.heldReadWaitMs) && o.heldReadWaitMs >= 0 && o.heldReadWaitMs <= o.fenceTimeoutMs)) fail('heldReadWaitMs', 'an integer of milliseconds from 0 to fenceTimeoutMs')
  if (typeof o.serverId !== 'string' || !/^[A-Za-z0-9._-]+$/.test(o.serverId)) fail('serverId', 'a non-empty string of [A-Za-z0-9._-]')
  validateToken(o.clusterToken) // its message names the option, never the value
  if (o.registry !== undefined && !(o.registry instanceof Registry)) fail('registry', 'a prom-client Registry')
  if (!o.logger || typeof o.logger.child !== 'function') fail('logger', 'a pino logger')
  return o
}

module.exports = { defaults, resolveOptions, HELD_READS }
