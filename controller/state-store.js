'use strict'

const crypto = require('node:crypto')
const zlib = require('node:zlib')
const {
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
  DeleteItemCommand
} = require('@aws-sdk/client-dynamodb')
const { createDynamoClient, ensureTable } = require('../core/dynamo-client')
const { DeposedError, InvalidArgumentError, StoreUnavailableError } = require('../core/errors')
const { silent } = require('../core/logger')

const LEASE = 'lease'
const STATE = 'state'
// DynamoDB items are at most 400 KB: a bigger state is written in parts.
const PART_BYTES = 300 * 1024

/**
 * The controllers' shared state in one DynamoDB table (hash key `pk`, S),
 * docs/controller-ha.md:
 * - `lease`: the leader lease, `{ holder, url, epoch, rvn, expiresAt }`. A
 *   standby takes it over only with a write conditional on the record version
 *   (`rvn`) it watched stay unchanged for a whole lease, so no clocks are
 *   compared across machines.
 * - `state`: `{ epoch, generation, parts, body }`, the gzipped JSON of the
 *   assignment, the handoff in progress and the membership. Writes are
 *   conditional on the writer's epoch and on the generation not going back,
 *   so a deposed leader can write nothing once its successor claimed the item.
 *   A state over PART_BYTES goes to `state#<rev>#<i>` items written first.
 */
class DynamoStateStore {
  /**
   * @param {object} options
   * @param {string} options.table
   * @param {string} [options.endpoint] undefined: AWS (region and credential chain)
   * @param {string} [options.region]
   * @param {number} [options.timeoutMs] per DynamoDB request
   * @param {object} [options.credentials]
   */
  constructor ({ table, endpoint, region = 'us-east-1', timeoutMs = 2000, credentials, env, logger = silent }) {
    if (typeof table !== 'string' || !/^[A-Za-z0-9_.-]{3,255}$/.test(table)) throw new InvalidArgumentError('invalid state table: expected a DynamoDB table name')
    this.table = table
    this.endpoint = endpoint
    this.logger = logger
    this.client = createDynamoClient({ endpoint, region, timeoutMs, credentials, env })
  }

  describe () {
    return `DynamoDB table ${this.table}${this.endpoint ? ` at ${this.endpoint}` : ''}`
  }

  /** Create the table when missing (on-demand billing), then wait until it is ACTIVE. */
  ensureTable ({ create = true, timeoutMs = 60000 } = {}) {
    // Both controllers start together; one of them creates it.
    return ensureTable(this.client, { table: this.table, hashKey: 'pk', create, timeoutMs, intervalMs: 100, what: 'create', mapError: (err, op) => this.#unavailable(err, op) })
  }

  // ---- leader lease ----

  /** The lease item, read consistently; null when nobody ever held it. */
  async readLease () {
    const item = await this.#get(LEASE, 'readLease')
    if (!item) return null
    return {
      holder: item.holder.S,
      url: item.url ? item.url.S : null,
      epoch: Number(item.epoch.N),
      rvn: item.rvn.S,
      expiresAt: Number(item.expiresAt.N), // the holder's wall clock; for people, not for decisions
      released: Boolean(item.released && item.released.BOOL)
    }
  }

  /**
   * Take the lease over from `observed` (null: nobody held it). Epochs follow
   * the wall clock, as generations do, so members can refuse one from the far
   * future; they always rise. Resolves the new lease, or null when someone
   * else wrote the item first.
   */
  async acquireLease ({ holder, url, leaseMs, observed }) {
    const epoch = Math.max(observed ? observed.epoch + 1 : 1, Date.now())
    const lease = { holder, url, epoch, rvn: crypto.randomUUID(), expiresAt: Date.now() + leaseMs, released: false }
    try {
      await this.client.send(new PutItemCommand({
        TableName: this.table,
        Item: this.#leaseItem(lease),
        ConditionExpression: observed ? 'rvn = :observed' : 'attribute_not_exists(pk)',
        ExpressionAttributeValues: observed ? { ':observed': { S: observed.rvn } } : undefined
      }))
      return lease
    } catch (err) {
      if (err.name === 'ConditionalCheckFailedException') return null
      throw this.#unavailable(err, 'acquireLease')
    }
  }

  /** Extend our lease; resolves the renewed lease, or null when it is no longer ours. */
  async renewLease (lease, leaseMs) {
    const next = { ...lease, rvn: crypto.randomUUID(), expiresAt: Date.now() + leaseMs }
    try {
      await this.client.send(new PutItemCommand({
        TableName: this.table,
        Item: this.#leaseItem(next),
        ConditionExpression: 'holder = :holder AND epoch = :epoch',
        ExpressionAttributeValues: { ':holder': { S: lease.holder }, ':epoch': { N: String(lease.epoch) } }
      }))
      return next
    } catch (err) {
      if (err.name === 'ConditionalCheckFailedException') return null
      throw this.#unavailable(err, 'renewLease')
    }
  }

  /** Give the lease up (graceful shutdown): a standby may take it at once. */
  async releaseLease (lease) {
    try {
      await this.client.send(new PutItemCommand({
        TableName: this.table,
        Item: this.#leaseItem({ ...lease, rvn: crypto.randomUUID(), expiresAt: 0, released: true }),
        ConditionExpression: 'holder = :holder AND epoch = :epoch',
        ExpressionAttributeValues: { ':holder': { S: lease.holder }, ':epoch': { N: String(lease.epoch) } }
      }))
      return true
    } catch (err) {
      if (err.name === 'ConditionalCheckFailedException') return false
      throw this.#unavailable(err, 'releaseLease')
    }
  }

  #leaseItem ({ holder, url, epoch, rvn, expiresAt, released }) {
    const item = { pk: { S: LEASE }, holder: { S: holder }, epoch: { N: String(epoch) }, rvn: { S: rvn }, expiresAt: { N: String(expiresAt) }, released: { BOOL: Boolean(released) } }
    if (url) item.url = { S: url }
    return item
  }

  // ---- controller state ----

  /**
   * Make `epoch` the state's owner: from now on writes under a lower epoch
   * fail. Throws DeposedError when a higher epoch owns it already.
   */
  async claimState (epoch) {
    try {
      await this.client.send(new UpdateItemCommand({
        TableName: this.table,
        Key: { pk: { S: STATE } },
        UpdateExpression: 'SET epoch = :epoch',
        ConditionExpression: 'attribute_not_exists(pk) OR epoch < :epoch',
        ExpressionAttributeValues: { ':epoch': { N: String(epoch) } }
      }))
    } catch (err) {
      if (err.name === 'ConditionalCheckFailedException') throw new DeposedError(`the controller state belongs to a newer epoch than ${epoch}`)
      throw this.#unavailable(err, 'claimState')
    }
  }

  /** The saved state, or null when none was saved yet. */
  async loadState () {
    const head = await this.#get(STATE, 'loadState')
    if (!head || !head.parts) return null
    const parts = Number(head.parts.N)
    let body
    if (head.body) {
      body = head.body.B
    } else {
      const chunks = []
      for (let i = 0; i < parts; i++) {
        const item = await this.#get(`${STATE}#${head.rev.S}#${i}`, 'loadState')
        if (!item) throw new StoreUnavailableError(`controller state part ${i} of ${parts} is missing`)
        chunks.push(Buffer.from(item.body.B))
      }
      body = Buffer.concat(chunks)
    }
    return { epoch: Number(head.epoch.N), generation: Number(head.generation.N), state: JSON.parse(zlib.gunzipSync(body).toString('utf8')) }
  }

  /**
   * Save `state` under `epoch` at `generation` (which never goes back).
   * Throws DeposedError when the item moved to a newer epoch.
   */
  async saveState ({ epoch, generation, state }) {
    const body = zlib.gzipSync(JSON.stringify(state))
    const rev = crypto.randomUUID()
    const parts = Math.max(1, Math.ceil(body.length / PART_BYTES))
    if (parts > 1) {
      for (let i = 0; i < parts; i++) {
        await this.#put({ pk: { S: `${STATE}#${rev}#${i}` }, body: { B: body.subarray(i * PART_BYTES, (i + 1) * PART_BYTES) } }, 'saveState')
      }
    }
    const item = { pk: { S: STATE }, epoch: { N: String(epoch) }, generation: { N: String(generation) }, rev: { S: rev }, parts: { N: String(parts) } }
    if (parts === 1) item.body = { B: body }
    let previous
    try {
      const out = await this.client.send(new PutItemCommand({
        TableName: this.table,
        Item: item,
        ConditionExpression: 'epoch = :epoch AND (attribute_not_exists(generation) OR generation <= :generation)',
        ExpressionAttributeValues: { ':epoch': { N: String(epoch) }, ':generation': { N: String(generation) } },
        ReturnValues: 'ALL_OLD'
      }))
      previous = out.Attributes
    } catch (err) {
      if (err.name === 'ConditionalCheckFailedException') {
        await this.#dropParts(rev, parts > 1 ? parts : 0)
        throw new DeposedError(`controller state not saved: epoch ${epoch} no longer owns it (or generation ${generation} went back)`)
      }
      throw this.#unavailable(err, 'saveState')
    }
    // The parts of the state just replaced are garbage now.
    if (previous && previous.rev && !previous.body) await this.#dropParts(previous.rev.S, Number(previous.parts.N))
    return { bytes: body.length, parts }
  }

  async #dropParts (rev, parts) {
    for (let i = 0; i < parts; i++) {
      try {
        await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: { pk: { S: `${STATE}#${rev}#${i}` } } }))
      } catch (err) {
        this.logger.warn({ err }, 'could not delete a stale controller state part (harmless; it is never read)')
      }
    }
  }

  async #get (pk, op) {
    try {
      return (await this.client.send(new GetItemCommand({ TableName: this.table, Key: { pk: { S: pk } }, ConsistentRead: true }))).Item || null
    } catch (err) {
      throw this.#unavailable(err, op)
    }
  }

  async #put (item, op) {
    try {
      await this.client.send(new PutItemCommand({ TableName: this.table, Item: item }))
    } catch (err) {
      throw this.#unavailable(err, op)
    }
  }

  #unavailable (err, op) {
    return new StoreUnavailableError(`controller state store unavailable (${op}): ${err.name || err.code}: ${err.message}`, { cause: err })
  }

  close () {
    this.client.destroy()
  }
}

module.exports = { DynamoStateStore }
