'use strict'

const { GetItemCommand, PutItemCommand } = require('@aws-sdk/client-dynamodb')
const { createDynamoClient, ensureTable, LOCAL_CREDENTIALS } = require('../../core/dynamo-client')
const { FencedWriteError, InvalidArgumentError, PayloadTooLargeError, StoreUnavailableError } = require('../../core/errors')
const { HybridClock, checkGeneration, makeVersion, generationOf } = require('./version')
const { silent } = require('../../core/logger')

// A write lands only above every version already stored. Items written before
// versions existed have no `ver` and count as version 0.
const NEWER_THAN_STORED = 'attribute_not_exists(k) OR attribute_not_exists(ver) OR ver < :ver'
// Refusals at our own generation are a lagging clock, not a deposed owner:
// we retry above the stored version this many times in all.
const SAME_GENERATION_ATTEMPTS = 3
// Error names of DynamoDB (and DynamoDB Local) for credentials it will not take.
const CREDENTIALS_REFUSED = new Set(['UnrecognizedClientException', 'InvalidSignatureException', 'MissingAuthenticationTokenException'])

/**
 * DynamoDB, the source of truth. Items are `{ k: S key, v: B value, ct: S
 * content type, ver: N version }`, or tombstones `{ k, del: BOOL true, ver }`
 * (version.js). Every write is a put conditional on being newer than what is
 * stored, so a deposed owner's late write can neither overwrite nor, after a
 * delete, resurrect what a newer owner wrote. Tombstones are never reclaimed
 * here (see the README). Reads are strongly consistent so a miss right after
 * a slice moves sees the last acknowledged write (paper 6.1).
 */
class DynamoStore {
  /**
   * @param {object} options
   * @param {string} options.table
   * @param {string} [options.endpoint] undefined: AWS, via the SDK's region and credential chain
   * @param {string} options.region
   * @param {number} options.timeoutMs per HTTP attempt
   * @param {HybridClock} [options.clock] this store's version clock; a fresh one by default
   * @param {object} [options.credentials] AWS SDK credentials (or provider); default: the SDK's chain
   * @param {Record<string, string|undefined>} [options.env] where to look for credentials the user set (process.env)
   */
  constructor ({ table, endpoint, region, timeoutMs, clock = new HybridClock(), credentials, env = process.env, logger = silent }) {
    this.table = table
    this.endpoint = endpoint
    this.clock = clock
    this.logger = logger
    // Credentials: the user's when set; for a loopback endpoint without them,
    // the built-in local ones that dynalite and DynamoDB Local both accept.
    this.client = createDynamoClient({ endpoint, region, timeoutMs, credentials, env })
  }

  /** Create the table (on-demand billing) when missing, then wait until it is ACTIVE. */
  ensureTable ({ create = true, timeoutMs = 60000 } = {}) {
    return ensureTable(this.client, { table: this.table, hashKey: 'k', create, timeoutMs, mapError: (err, op) => this.#mapError(err, op), logger: this.logger })
  }

  /**
   * The live value of `key`; null when absent or deleted (a tombstone).
   * @returns {Promise<{ value: Buffer, contentType: string, ver: bigint } | null>}
   */
  async get (key) {
    const item = await this.#getItem(key, 'get')
    if (!item) return null
    const ver = this.#observe(item)
    if (item.del && item.del.BOOL) return null
    const v = item.v && item.v.B
    return {
      value: v ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : Buffer.alloc(0),
      contentType: (item.ct && item.ct.S) || 'application/octet-stream',
      ver
    }
  }

  /**
   * Store `value` under `generation`; resolves with the version written once
   * DynamoDB accepted it. Throws FencedWriteError when a newer generation
   * already wrote the key: then nothing was written.
   * @returns {Promise<bigint>}
   */
  put (key, value, contentType, { generation = 0 } = {}) {
    return this.#conditionalPut('put', key, generation, { v: { B: value }, ct: { S: contentType } })
  }

  /** Delete `key` by writing a tombstone, under the same fence as put. @returns {Promise<bigint>} */
  delete (key, { generation = 0 } = {}) {
    return this.#conditionalPut('delete', key, generation, { del: { BOOL: true } })
  }

  async #conditionalPut (op, key, generation, attributes) {
    checkGeneration(generation)
    for (let attempt = 1; ; attempt++) {
      const ver = makeVersion(generation, this.clock.tick())
      try {
        await this.client.send(new PutItemCommand({
          TableName: this.table,
          Item: { k: { S: key }, ...attributes, ver: { N: ver.toString() } },
          ConditionExpression: NEWER_THAN_STORED,
          ExpressionAttributeValues: { ':ver': { N: ver.toString() } }
        }))
        return ver
      } catch (err) {
        if (err.name !== 'ConditionalCheckFailedException') throw this.#mapError(err, op)
      }
      // The condition failed, so this attempt certainly did not apply.
      const item = await this.#getItem(key, op)
      const stored = item ? this.#observe(item) : 0n
      const storedGeneration = generationOf(stored)
      if (storedGeneration > generation || attempt >= SAME_GENERATION_ATTEMPTS) {
        throw new FencedWriteError(
          `a newer owner has written key ${JSON.stringify(key)}; this server's ownership is stale ` +
          `(stored version is from generation ${storedGeneration}, this ${op} was admitted under generation ${generation})`
        )
      }
      // Same generation: our clock was behind the stored version (a restart
      // after the wall clock stepped back, or another server admitting under
      // this generation). The stored write is no newer an owner than we are;
      // observing its version puts our next attempt above it.
      this.logger.debug({ key, op, generation, stored: stored.toString() }, 'write refused at our own generation; retrying above the stored version')
    }
  }

  async #getItem (key, op) {
    try {
      const out = await this.client.send(new GetItemCommand({ TableName: this.table, Key: { k: { S: key } }, ConsistentRead: true }))
      return out.Item || null
    } catch (err) {
      throw this.#mapError(err, op)
    }
  }

  /** The item's version (0 for items from before versions), fed into our clock. */
  #observe (item) {
    const ver = item.ver && item.ver.N ? BigInt(item.ver.N) : 0n
    this.clock.observe(ver)
    return ver
  }

  close () {
    this.client.destroy()
  }

  /**
   * Requests DynamoDB refused as invalid are the caller's fault (4xx);
   * everything else (refused connections, timeouts, throttling, 5xx, a
   * missing table) means the source of truth is unavailable: 503, never a
   * guess.
   */
  #mapError (err, op) {
    if (err.name === 'ValidationException') {
      if (/item size/i.test(err.message)) {
        return new PayloadTooLargeError('value too large: key, value and content type together exceed DynamoDB\'s 400 KB item limit', { cause: err })
      }
      return new InvalidArgumentError(`DynamoDB rejected the ${op}: ${err.message}`, { cause: err })
    }
    // Refused credentials are still an outage for the caller, but the message
    // says what to fix. dynalite checks no credentials; DynamoDB Local refuses
    // an access key id that is not alphanumeric.
    const hint = CREDENTIALS_REFUSED.has(err.name)
      ? `; DynamoDB refused the credentials (${err.name}): check the AWS credentials set (AWS_ACCESS_KEY_ID, AWS_PROFILE); DynamoDB Local accepts only alphanumeric access key ids`
      : ''
    const e = new StoreUnavailableError(`DynamoDB unavailable (${op} on table ${this.table}): ${err.message || err.name}${hint}`, { cause: err })
    e.storeOp = op
    return e
  }
}

module.exports = { DynamoStore, LOCAL_CREDENTIALS }
