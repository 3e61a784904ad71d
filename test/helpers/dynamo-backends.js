'use strict'

const { startDynalite } = require('../../apps/kv-cache/embedded')
const { startDynamoDbLocal, missingDynamoDbLocal, dynamoDbLocalDir } = require('./dynamodb-local')

/**
 * The DynamoDB servers that suites whose subject is a DynamoDB store run
 * against: dynalite (in process, fast; what `npm start` embeds) and AWS's
 * DynamoDB Local 2.x (a JVM; `.ci/install-dynamodb-local.sh` fetches it).
 * End-to-end suites stay on dynalite alone, for speed.
 *
 *   const { describeEachDynamo } = require('../helpers/dynamo-backends')
 *
 *   describeEachDynamo('DynamoStateStore', (endpoint, backend) => {
 *     // endpoint() is valid inside hooks and tests (the server starts in beforeAll)
 *     let store
 *     beforeEach(() => { store = new DynamoStateStore({ table: 'ctl', endpoint: endpoint() }) })
 *     afterEach(() => store.close())
 *     test('...', async () => { ... }) // backend.name: 'dynalite' | 'dynamodb-local'
 *   })
 *
 * Each backend gets its own `describe('<name> [<backend>]')` and its own
 * server, started once for the block and closed after it: use one
 * describeEachDynamo per file and nest describes inside.
 *
 * DynamoDB Local missing (no complete install in DYNAMODB_LOCAL_DIR, default
 * ~/.cache/chopper-dynamodb-local): under CI (`CI` set) its block fails with
 * an error naming the install script; elsewhere it is skipped with one
 * console warning.
 */

/** DynamoDB Local answers about 2 s after spawn here; room for a machine busy with other suites. */
const START_TIMEOUT_MS = 90000

const underCi = (env = process.env) => Boolean(env.CI) && env.CI !== 'false' && env.CI !== '0'

/**
 * @returns {{ name: string, missing(): string|null, start(): Promise<{ endpoint: string, close(): Promise<void> }> }[]}
 */
function dynamoBackends ({ dir = dynamoDbLocalDir() } = {}) {
  return [
    { name: 'dynalite', missing: () => null, start: () => startDynalite() },
    { name: 'dynamodb-local', missing: () => missingDynamoDbLocal(dir), start: () => startDynamoDbLocal({ dir }) }
  ]
}

let warned = false
function warnOnce (message) {
  if (warned) return
  warned = true
  console.warn(`${message}. Skipping its cases here; CI runs them (set CI=1 to make this an error).`)
}

/**
 * `describe` once per DynamoDB backend. `fn(endpoint, backend)` declares the
 * tests, as a describe callback does; `endpoint()` returns the running
 * server's URL once the block's beforeAll has started it.
 * @param {string} name
 * @param {(endpoint: () => string, backend: { name: string }) => void} fn
 * @param {{ backends?: ReturnType<typeof dynamoBackends> }} [options]
 */
function describeEachDynamo (name, fn, { backends = dynamoBackends() } = {}) {
  for (const backend of backends) {
    const title = `${name} [${backend.name}]`
    const missing = backend.missing()
    let server = null
    const endpoint = () => {
      if (!server) throw new Error(missing || `${backend.name} is not running: endpoint() works inside hooks and tests, once its beforeAll started it`)
      return server.endpoint
    }
    const info = { name: backend.name }
    if (missing && !underCi()) {
      warnOnce(missing)
      describe.skip(title, () => fn(endpoint, info))
      continue
    }
    describe(title, () => {
      beforeAll(async () => {
        if (missing) throw new Error(`${missing}. Under CI the DynamoDB suites must run against it too (.ci/run installs it)`)
        server = await backend.start()
      }, START_TIMEOUT_MS)
      afterAll(async () => {
        if (server) await server.close()
        server = null
      })
      fn(endpoint, info)
    })
  }
}

module.exports = { describeEachDynamo, dynamoBackends, underCi }
