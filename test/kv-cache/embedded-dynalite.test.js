'use strict'

// The embedded dynalite's close(), raced against requests still being handled.
// dynalite's own close() shut its LevelDB under a request that had passed its
// table lookup, and dynalite threw the "Database is closed" error out of its
// request handler: an uncaught exception that failed whichever suite was
// tearing down a cluster at that moment (seen once in CI, in
// test/terraform/load-driver.test.js).

const net = require('node:net')
const { DynamoDBClient, CreateTableCommand, PutItemCommand, GetItemCommand } = require('@aws-sdk/client-dynamodb')
const { startDynalite } = require('../../apps/kv-cache/embedded')
const { pollUntil } = require('../../core/poll')

const TABLE = 'embedded-close'
const credentials = { accessKeyId: 'test', secretAccessKey: 'test' }

function client (endpoint) {
  return new DynamoDBClient({ endpoint, region: 'us-east-1', credentials, maxAttempts: 1 })
}

async function withTable (endpoint) {
  const c = client(endpoint)
  await c.send(new CreateTableCommand({
    TableName: TABLE,
    AttributeDefinitions: [{ AttributeName: 'k', AttributeType: 'S' }],
    KeySchema: [{ AttributeName: 'k', KeyType: 'HASH' }],
    BillingMode: 'PAY_PER_REQUEST'
  }))
  return c
}

/** Calls fn once the request's body has arrived and `ticks` more turns of the event loop have passed. */
function afterBody (server, ticks, fn) {
  server.once('request', (req) => req.on('end', () => {
    let n = ticks
    const go = () => (n-- > 0 ? setImmediate(go) : fn())
    go()
  }))
}

describe('embedded dynalite close()', () => {
  const uncaught = []
  const onUncaught = (err) => uncaught.push(err)
  beforeAll(() => process.on('uncaughtException', onUncaught))
  afterAll(() => process.off('uncaughtException', onUncaught))
  beforeEach(() => { uncaught.length = 0 })

  // Ticks 1 and 2 after the body are where the old close() lost the request and threw.
  test.each([0, 1, 2, 3])('a PutItem in flight %d ticks after its body arrived is answered, and nothing is thrown', async (ticks) => {
    const db = await startDynalite()
    const c = await withTable(db.endpoint)
    try {
      let closing
      afterBody(db.server, ticks, () => { closing = db.close() })
      await expect(c.send(new PutItemCommand({ TableName: TABLE, Item: { k: { S: 'a' }, v: { S: '1' } } }))).resolves.toBeDefined()
      await closing
      expect(db.server.listening).toBe(false)
      // A turn for anything dynalite would still throw.
      await new Promise((resolve) => setImmediate(resolve))
      expect(uncaught).toEqual([])
      // Closed: a new request is refused.
      await expect(c.send(new GetItemCommand({ TableName: TABLE, Key: { k: { S: 'a' } } }))).rejects.toThrow()
    } finally {
      c.destroy()
      await db.close()
    }
  })

  /** A raw connection that sends a request whose headers promise 100 bytes of body, and only two of them. */
  async function partialRequest (db) {
    const sock = net.connect(db.port, '127.0.0.1')
    sock.on('error', () => {})
    await new Promise((resolve) => sock.once('connect', resolve))
    const seen = new Promise((resolve) => db.server.once('request', resolve))
    sock.write('POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-amz-json-1.0\r\ncontent-length: 100\r\n\r\n{}')
    await seen
    return sock
  }

  test('a client gone before its body arrived is counted, not thrown; the server goes on answering', async () => {
    const db = await startDynalite()
    const c = await withTable(db.endpoint)
    try {
      const sock = await partialRequest(db)
      expect(db.stats().inFlight).toBe(1)
      sock.destroy()
      await pollUntil(() => db.stats().aborted > 0, { timeoutMs: 5000, what: 'the abort to be counted' })
      expect(db.stats()).toEqual({ inFlight: 0, aborted: 1 })
      expect(uncaught).toEqual([])
      await c.send(new PutItemCommand({ TableName: TABLE, Item: { k: { S: 'b' }, v: { S: '2' } } }))
      const got = await c.send(new GetItemCommand({ TableName: TABLE, Key: { k: { S: 'b' } }, ConsistentRead: true }))
      expect(got.Item.v.S).toBe('2')
    } finally {
      c.destroy()
      await db.close()
    }
  })

  test('a request that never finishes arriving holds close() for drainMs at most', async () => {
    const db = await startDynalite()
    const sock = await partialRequest(db)
    try {
      const ended = new Promise((resolve) => sock.once('close', resolve))
      const started = Date.now()
      await db.close({ drainMs: 200 })
      expect(Date.now() - started).toBeGreaterThanOrEqual(150) // it waited for the request …
      await ended // … and then dropped its connection
      expect(db.server.listening).toBe(false)
      await pollUntil(() => db.stats().aborted > 0, { timeoutMs: 5000, what: 'the abort to be counted' })
      expect(db.stats()).toEqual({ inFlight: 0, aborted: 1 })
      expect(uncaught).toEqual([])
    } finally {
      sock.destroy()
    }
  })
})
