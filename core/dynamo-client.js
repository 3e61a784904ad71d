'use strict'

const { DynamoDBClient, DescribeTableCommand, CreateTableCommand } = require('@aws-sdk/client-dynamodb')
const { InvalidArgumentError } = require('./errors')
const { pollUntil } = require('./poll')
const { silent } = require('./logger')

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]', '::1'])

/** The built-in credentials for a loopback DynamoDB (dynalite, DynamoDB Local): a fallback only. */
const LOCAL_CREDENTIALS = Object.freeze({ accessKeyId: 'chopperlocal', secretAccessKey: 'chopperlocal' })

/** Whether the environment names AWS credentials the SDK's chain would use. */
function userSetCredentials (env) {
  return Boolean(env.AWS_ACCESS_KEY_ID || env.AWS_PROFILE || env.AWS_WEB_IDENTITY_TOKEN_FILE || env.AWS_CONTAINER_CREDENTIALS_FULL_URI || env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI)
}

/**
 * A DynamoDB client as every Chopper component makes one (kv-cache's store,
 * the controller's state store).
 * @param {object} options
 * @param {string} [options.endpoint] undefined: AWS, via the SDK's region and credential chain
 * @param {string} options.region
 * @param {number} options.timeoutMs per HTTP attempt
 * @param {object} [options.credentials] AWS SDK credentials (or provider); default: the SDK's chain
 * @param {Record<string, string|undefined>} [options.env] where to look for credentials the user set (process.env)
 */
function createDynamoClient ({ endpoint, region, timeoutMs, credentials, env = process.env }) {
  const config = {
    region,
    // Without throwOnRequestTimeout the SDK only logs a warning and a hung
    // DynamoDB would hang the request: we want a 503 instead.
    requestHandler: { connectionTimeout: Math.min(timeoutMs, 1000), requestTimeout: timeoutMs, throwOnRequestTimeout: true }
  }
  if (credentials) config.credentials = credentials
  if (endpoint) {
    config.endpoint = endpoint
    // dynalite and DynamoDB Local accept any signature; a developer machine
    // usually has no AWS credentials, and the chain would fail every request.
    // Only a fallback: credentials the user set (options, environment,
    // profile) are used as they are. Alphanumeric, since DynamoDB Local
    // rejects other access key ids ("The Access Key ID or security token is invalid").
    if (!credentials && !userSetCredentials(env) && LOOPBACK.has(new URL(endpoint).hostname)) config.credentials = { ...LOCAL_CREDENTIALS } // a copy: the SDK marks the object it is given
  }
  return new DynamoDBClient(config)
}

/**
 * Create `table` (one string hash key, on-demand billing) when it is missing,
 * then wait until it is ACTIVE. Several processes may call it at once: one of
 * them creates the table. `mapError(err, op)` turns SDK errors into ours.
 * @param {DynamoDBClient} client
 * @param {{ table: string, hashKey: string, create?: boolean, timeoutMs?: number, intervalMs?: number, what?: string, mapError: (err, op: string) => Error, logger? }} options
 */
async function ensureTable (client, { table, hashKey, create = true, timeoutMs = 60000, intervalMs = 200, what = 'createTable', mapError, logger = silent }) {
  const status = async () => {
    try {
      return (await client.send(new DescribeTableCommand({ TableName: table }))).Table.TableStatus
    } catch (err) {
      if (err.name === 'ResourceNotFoundException') return null
      throw mapError(err, 'describeTable')
    }
  }
  const now = await status()
  if (now === 'ACTIVE') return
  if (now === null) {
    if (!create) throw new InvalidArgumentError(`DynamoDB table ${table} does not exist and ${what} is false`)
    try {
      await client.send(new CreateTableCommand({
        TableName: table,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: hashKey, AttributeType: 'S' }],
        KeySchema: [{ AttributeName: hashKey, KeyType: 'HASH' }]
      }))
      logger.info({ table }, 'created DynamoDB table')
    } catch (err) {
      if (err.name !== 'ResourceInUseException') throw mapError(err, 'createTable')
    }
  }
  await pollUntil(async () => (await status()) === 'ACTIVE', { timeoutMs, intervalMs, what: `DynamoDB table ${table} to become ACTIVE` })
}

module.exports = { createDynamoClient, ensureTable, userSetCredentials, LOCAL_CREDENTIALS }
