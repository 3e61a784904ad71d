'use strict'

const {
  DynamoDBClient,
  DescribeTableCommand,
  CreateTableCommand,
  GetItemCommand,
  PutItemCommand,
  DeleteItemCommand
} = require('@aws-sdk/client-dynamodb')
const { InvalidArgumentError, PayloadTooLargeError, StoreUnavailableError } = require('../../core/errors')
const { pollUntil } = require('../../core/poll')
const { silent } = require('../../core/logger')

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1'])

/**
 * DynamoDB, the source of truth. Items are `{ k: S key, v: B value, ct: S
 * content type }`; reads are strongly consistent so a miss right after a
 * slice moves sees the last acknowledged write (paper 6.1).
 */
class DynamoStore {
  /**
   * @param {object} options
   * @param {string} options.table
   * @param {string} [options.endpoint] undefined: AWS, via the SDK's region and credential chain
   * @param {string} options.region
   * @param {number} options.timeoutMs per HTTP attempt
   */
  constructor ({ table, endpoint, region, timeoutMs, logger = silent }) {
    this.table = table
    this.endpoint = endpoint
    this.logger = logger
    const config = {
      region,
      // Without throwOnRequestTimeout the SDK only logs a warning and a hung
      // DynamoDB would hang the request: we want a 503 instead.
      requestHandler: { connectionTimeout: Math.min(timeoutMs, 1000), requestTimeout: timeoutMs, throwOnRequestTimeout: true }
    }
    if (endpoint) {
      config.endpoint = endpoint
      // dynalite and DynamoDB Local accept any signature; a developer machine
      // usually has no AWS credentials, and the chain would fail every request.
      if (LOOPBACK.has(new URL(endpoint).hostname)) config.credentials = { accessKeyId: 'chopper-local', secretAccessKey: 'chopper-local' }
    }
    this.client = new DynamoDBClient(config)
  }

  /** Create the table (on-demand billing) when missing, then wait until it is ACTIVE. */
  async ensureTable ({ create = true, timeoutMs = 60000 } = {}) {
    const status = await this.#tableStatus()
    if (status === 'ACTIVE') return
    if (status === null) {
      if (!create) throw new InvalidArgumentError(`DynamoDB table ${this.table} does not exist and createTable is false`)
      try {
        await this.client.send(new CreateTableCommand({
          TableName: this.table,
          BillingMode: 'PAY_PER_REQUEST',
          AttributeDefinitions: [{ AttributeName: 'k', AttributeType: 'S' }],
          KeySchema: [{ AttributeName: 'k', KeyType: 'HASH' }]
        }))
        this.logger.info({ table: this.table }, 'created DynamoDB table')
      } catch (err) {
        // Several app servers start together; one of them wins the creation.
        if (err.name !== 'ResourceInUseException') throw this.#mapError(err, 'createTable')
      }
    }
    await pollUntil(async () => (await this.#tableStatus()) === 'ACTIVE', {
      timeoutMs,
      intervalMs: 200,
      what: `DynamoDB table ${this.table} to become ACTIVE`
    })
  }

  async #tableStatus () {
    try {
      const out = await this.client.send(new DescribeTableCommand({ TableName: this.table }))
      return out.Table.TableStatus
    } catch (err) {
      if (err.name === 'ResourceNotFoundException') return null
      throw this.#mapError(err, 'describeTable')
    }
  }

  /** @returns {Promise<{ value: Buffer, contentType: string } | null>} */
  async get (key) {
    let out
    try {
      out = await this.client.send(new GetItemCommand({ TableName: this.table, Key: { k: { S: key } }, ConsistentRead: true }))
    } catch (err) {
      throw this.#mapError(err, 'get')
    }
    if (!out.Item) return null
    const v = out.Item.v && out.Item.v.B
    return {
      value: v ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : Buffer.alloc(0),
      contentType: (out.Item.ct && out.Item.ct.S) || 'application/octet-stream'
    }
  }

  /** Resolves only once DynamoDB accepted the write. */
  async put (key, value, contentType) {
    try {
      await this.client.send(new PutItemCommand({ TableName: this.table, Item: { k: { S: key }, v: { B: value }, ct: { S: contentType } } }))
    } catch (err) {
      throw this.#mapError(err, 'put')
    }
  }

  async delete (key) {
    try {
      await this.client.send(new DeleteItemCommand({ TableName: this.table, Key: { k: { S: key } } }))
    } catch (err) {
      throw this.#mapError(err, 'delete')
    }
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
    const e = new StoreUnavailableError(`DynamoDB unavailable (${op} on table ${this.table}): ${err.message || err.name}`, { cause: err })
    e.storeOp = op
    return e
  }
}

module.exports = { DynamoStore }
