'use strict'

const { DynamoDBClient, PutItemCommand } = require('@aws-sdk/client-dynamodb')
const { DynamoStore, LOCAL_CREDENTIALS } = require('../../apps/kv-cache/dynamo-store')
const { HybridClock, generationOf, makeVersion } = require('../../apps/kv-cache/version')
const { FencedWriteError } = require('../../core/errors')
const { describeEachDynamo } = require('../helpers/dynamo-backends')
const { createHarness } = require('./harness')

/**
 * The versioned, fenced DynamoDB store against real servers, dynalite and
 * DynamoDB Local 2.x: conditional puts keyed on the version, tombstones,
 * restarts, and what the store relies on from the server (binary values,
 * error shapes, table creation, credentials).
 */

const TABLE = 'kv-store'

describeEachDynamo('DynamoStore', (endpoint, backend) => {
  let h
  beforeAll(async () => {
    const s = new DynamoStore({ table: TABLE, endpoint: endpoint(), region: 'us-west-2', timeoutMs: 3000 })
    await s.ensureTable()
    s.close()
  })
  beforeEach(() => { h = createHarness() })
  afterEach(async () => { await h.closeAll() })

  /** A store as one process would have it (its own clock), closed after the test. */
  function open (options = {}) {
    const store = new DynamoStore({ table: TABLE, endpoint: endpoint(), region: 'us-west-2', timeoutMs: 3000, ...options })
    h.track(() => store.close())
    return store
  }
  const text = (item) => item && item.value.toString()

  test('the server compares version numbers numerically, to the last of 32 digits', async () => {
    // Our versions are too long for a double; a comparison through floats or
    // strings would accept or refuse some of these wrongly.
    const c = new DynamoDBClient({ endpoint: endpoint(), region: 'us-west-2', credentials: { accessKeyId: 't', secretAccessKey: 't' } })
    h.track(() => c.destroy())
    const put = async (ver) => {
      try {
        await c.send(new PutItemCommand({
          TableName: TABLE,
          Item: { k: { S: 'numeric' }, ver: { N: ver.toString() } },
          ConditionExpression: 'attribute_not_exists(k) OR ver < :ver',
          ExpressionAttributeValues: { ':ver': { N: ver.toString() } }
        }))
        return 'written'
      } catch (err) {
        return err.name
      }
    }
    const hlc = 1717171717171717n
    const big = BigInt(Number.MAX_SAFE_INTEGER) * 10n ** 16n
    const steps = [
      [makeVersion(5, hlc), 'written'],
      [makeVersion(5, hlc + 1n), 'written'], // differs in the units digit only
      [makeVersion(5, hlc + 1n), 'ConditionalCheckFailedException'], // equal
      [makeVersion(5, hlc), 'ConditionalCheckFailedException'],
      [makeVersion(3, 9999999999999999n), 'ConditionalCheckFailedException'],
      [makeVersion(12, 0n), 'written'], // 18 digits; as a string "12..." < "51..."
      [makeVersion(9, 9999999999999999n), 'ConditionalCheckFailedException'], // as a string "99..." > "12..."
      [big + 1n, 'written'], // 32 digits
      [big + 2n, 'written'], // units digit, beyond a double's 15-17 significant digits
      [big + 2n, 'ConditionalCheckFailedException'],
      [big + 1n, 'ConditionalCheckFailedException']
    ]
    for (const [ver, outcome] of steps) expect([ver.toString(), await put(ver)]).toEqual([ver.toString(), outcome])
    // And the number comes back digit for digit.
    expect((await h.dynamoClient(endpoint()).item(TABLE, 'numeric')).ver).toBe(big + 2n)
  })

  test('a write of a deposed owner (generation 3 after 5) is refused and the newer value stays', async () => {
    const newOwner = open()
    const oldOwner = open()
    const v5 = await newOwner.put('fence', Buffer.from('from gen 5'), 'text/plain', { generation: 5 })
    expect(generationOf(v5)).toBe(5)
    const refused = oldOwner.put('fence', Buffer.from('from gen 3'), 'text/plain', { generation: 3 })
    await expect(refused).rejects.toBeInstanceOf(FencedWriteError)
    await expect(refused).rejects.toMatchObject({
      code: 'CHOPPER_ERR_FENCED_WRITE',
      status: 421,
      message: 'a newer owner has written key "fence"; this server\'s ownership is stale (stored version is from generation 5, this put was admitted under generation 3)'
    })
    const item = await oldOwner.get('fence')
    expect([text(item), item.ver]).toEqual(['from gen 5', v5])
    // Unguarded (generation 0) is below any guarded write too.
    await expect(oldOwner.delete('fence')).rejects.toMatchObject({ code: 'CHOPPER_ERR_FENCED_WRITE' })
    expect(text(await newOwner.get('fence'))).toBe('from gen 5')
  })

  test('a delete at a higher generation leaves a tombstone that a late, lower put cannot resurrect', async () => {
    const store = open()
    await store.put('tomb', Buffer.from('v'), 'text/plain', { generation: 4 })
    const vDel = await store.delete('tomb', { generation: 6 })
    expect(await store.get('tomb')).toBeNull()
    await expect(store.put('tomb', Buffer.from('late'), 'text/plain', { generation: 4 })).rejects.toMatchObject({ code: 'CHOPPER_ERR_FENCED_WRITE' })
    expect(await store.get('tomb')).toBeNull()
    const raw = await h.dynamoClient(endpoint()).item(TABLE, 'tomb')
    expect([raw.del, raw.ver, raw.v]).toEqual([true, vDel, undefined])
    // A delete of a key that never existed also succeeds, and also fences.
    await store.delete('never', { generation: 6 })
    await expect(store.put('never', Buffer.from('x'), 'text/plain', { generation: 5 })).rejects.toMatchObject({ code: 'CHOPPER_ERR_FENCED_WRITE' })
    // The owner of a newer generation writes over the tombstone.
    await store.put('tomb', Buffer.from('reborn'), 'text/plain', { generation: 7 })
    expect(text(await store.get('tomb'))).toBe('reborn')
  })

  test('a restarted process at the same generation can still write, even with its wall clock behind', async () => {
    const first = open()
    const v1 = await first.put('restart', Buffer.from('before'), 'text/plain', { generation: 2 })
    first.close()

    const second = open() // a fresh clock, as after a restart
    const v2 = await second.put('restart', Buffer.from('after'), 'text/plain', { generation: 2 })
    expect(v2).toBeGreaterThan(v1)
    expect(text(await second.get('restart'))).toBe('after')

    // The wall clock stepped back an hour across the restart: the first
    // attempt is refused, but the stored version is of our own generation, so
    // the store moves its clock above it and writes.
    const behind = open({ clock: new HybridClock({ now: () => Date.now() - 3600e3 }) })
    const v3 = await behind.put('restart', Buffer.from('clock behind'), 'text/plain', { generation: 2 })
    expect(v3).toBeGreaterThan(v2)
    expect(text(await behind.get('restart'))).toBe('clock behind')
  })

  test('an item from before versions (no ver) counts as version 0', async () => {
    await h.dynamoClient(endpoint()).put(TABLE, 'legacy', 'old')
    const store = open()
    expect(await store.get('legacy')).toMatchObject({ ver: 0n })
    await store.put('legacy', Buffer.from('new'), 'text/plain')
    expect(text(await store.get('legacy'))).toBe('new')
  })

  test('a bad generation is refused before anything is written', async () => {
    const store = open()
    await expect(store.put('badgen', Buffer.from('x'), 'text/plain', { generation: -1 })).rejects.toMatchObject({ code: 'CHOPPER_ERR_INVALID_ARG', message: /invalid generation/ })
    await expect(store.delete('badgen', { generation: '2' })).rejects.toMatchObject({ code: 'CHOPPER_ERR_INVALID_ARG' })
    expect(await h.dynamoClient(endpoint()).item(TABLE, 'badgen')).toBeNull()
  })

  // What the store relies on from the server, where dynalite and DynamoDB
  // Local could differ: the error names it maps (the messages differ), binary
  // attributes, and table creation (DynamoDB Local answers CreateTable with
  // ACTIVE, dynalite with CREATING).
  describe('server behaviour the store relies on', () => {
    test('values of any bytes round-trip with their content type, the empty value too', async () => {
      const store = open()
      const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i))
      await store.put('bytes', every, 'application/octet-stream')
      await store.put('empty', Buffer.alloc(0), 'text/plain')
      const other = open() // another process: nothing comes from this store's memory
      const got = await other.get('bytes')
      expect([got.value.equals(every), got.contentType]).toEqual([true, 'application/octet-stream'])
      expect(await other.get('empty')).toMatchObject({ value: Buffer.alloc(0), contentType: 'text/plain' })
    })

    test('an item over 400 KB is refused as too large (413); one just under is stored', async () => {
      const store = open()
      await expect(store.put('huge', Buffer.alloc(400 * 1024), 'text/plain')).rejects.toMatchObject({ code: 'CHOPPER_ERR_PAYLOAD_TOO_LARGE', status: 413 })
      expect(await store.get('huge')).toBeNull()
      const big = Buffer.alloc(400 * 1024 - 200, 7)
      await store.put('big', big, 'text/plain')
      expect((await store.get('big')).value.equals(big)).toBe(true)
    })

    test('a key over DynamoDB\'s 2048 bytes is the caller\'s fault (400), not an outage', async () => {
      const store = open()
      const key = 'k'.repeat(2049)
      await expect(store.put(key, Buffer.from('v'), 'text/plain')).rejects.toMatchObject({ code: 'CHOPPER_ERR_INVALID_ARG', status: 400, message: /^DynamoDB rejected the put: / })
      await expect(store.get(key)).rejects.toMatchObject({ code: 'CHOPPER_ERR_INVALID_ARG', status: 400 })
    })

    test('a missing table is an outage (503), and ensureTable({ create: false }) says which table', async () => {
      const store = open({ table: `kv-missing-${backend.name}` })
      await expect(store.get('k')).rejects.toMatchObject({ code: 'CHOPPER_ERR_STORE_UNAVAILABLE', status: 503, storeOp: 'get', cause: { name: 'ResourceNotFoundException' } })
      await expect(store.put('k', Buffer.from('v'), 'text/plain')).rejects.toMatchObject({ code: 'CHOPPER_ERR_STORE_UNAVAILABLE', storeOp: 'put' })
      await expect(store.ensureTable({ create: false })).rejects.toMatchObject({ code: 'CHOPPER_ERR_INVALID_ARG', message: `DynamoDB table kv-missing-${backend.name} does not exist and createTable is false` })
    })

    test('stores starting together create a missing table once, and each finds it ACTIVE and usable', async () => {
      const table = `kv-together-${backend.name}`
      const stores = [open({ table }), open({ table }), open({ table })]
      await Promise.all(stores.map((s) => s.ensureTable({ timeoutMs: 10000 })))
      const v = await stores[0].put('k', Buffer.from('first'), 'text/plain', { generation: 1 })
      // Strongly consistent: another store reads the write at once.
      expect(await stores[2].get('k')).toMatchObject({ ver: v })
      expect((await stores[1].get('k')).value.toString()).toBe('first')
    })
  })

  describe('credentials against the server', () => {
    /** The access key ids this store's requests were signed with, as sent. */
    function sentKeyIds (store) {
      const ids = []
      // The deserialize step runs after signing: this is the request on the wire.
      store.client.middlewareStack.add((next) => (args) => {
        const m = /Credential=([^/]+)\//.exec(args.request.headers.authorization || '')
        ids.push(m ? m[1] : null)
        return next(args)
      }, { step: 'deserialize', name: 'sentKeyIds' })
      return ids
    }

    test('without credentials of the user the built-in local ones are sent, and the server accepts them', async () => {
      const store = open({ env: {} })
      const ids = sentKeyIds(store)
      const v = await store.put('fallback', Buffer.from('ok'), 'text/plain')
      expect(await store.get('fallback')).toMatchObject({ ver: v })
      expect(new Set(ids)).toEqual(new Set([LOCAL_CREDENTIALS.accessKeyId]))
    })

    test('credentials passed in options are sent as given, never replaced by the built-in ones', async () => {
      const store = open({ env: {}, credentials: { accessKeyId: 'AKIDCHOPPERTEST1', secretAccessKey: 'usersecret' } })
      const ids = sentKeyIds(store)
      await store.put('passed', Buffer.from('ok'), 'text/plain')
      expect((await store.get('passed')).value.toString()).toBe('ok')
      expect(new Set(ids)).toEqual(new Set(['AKIDCHOPPERTEST1']))

      // An id DynamoDB Local refuses is sent too: the store does not quietly
      // swap in its own. dynalite checks no credentials.
      const odd = open({ env: {}, credentials: { accessKeyId: 'not-alphanumeric', secretAccessKey: 'x' } })
      const oddIds = sentKeyIds(odd)
      if (backend.name === 'dynamodb-local') {
        await expect(odd.get('passed')).rejects.toMatchObject({
          code: 'CHOPPER_ERR_STORE_UNAVAILABLE',
          cause: { name: 'UnrecognizedClientException' },
          message: expect.stringContaining('DynamoDB refused the credentials (UnrecognizedClientException)')
        })
      } else {
        expect((await odd.get('passed')).value.toString()).toBe('ok')
      }
      expect(oddIds[0]).toBe('not-alphanumeric')
    })

    test('credentials in the environment are used as they are', async () => {
      const env = { AWS_ACCESS_KEY_ID: 'AKIDCHOPPERENV1', AWS_SECRET_ACCESS_KEY: 'envsecret' }
      const saved = { AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY }
      Object.assign(process.env, env) // the SDK's chain reads process.env
      try {
        const store = open({ env })
        const ids = sentKeyIds(store)
        await store.put('from-env', Buffer.from('ok'), 'text/plain')
        expect((await store.get('from-env')).value.toString()).toBe('ok')
        expect(new Set(ids)).toEqual(new Set(['AKIDCHOPPERENV1']))
      } finally {
        for (const [k, v] of Object.entries(saved)) {
          if (v === undefined) delete process.env[k]
          else process.env[k] = v
        }
      }
    })
  })
})

describe('DynamoStore credentials (no server)', () => {
  const resolve = async (store) => {
    const c = store.client.config.credentials
    return typeof c === 'function' ? c() : c
  }
  const base = { table: 't', region: 'us-west-2', timeoutMs: 1000 }

  test('a loopback endpoint without credentials of the user gets alphanumeric local ones (DynamoDB Local refuses others)', async () => {
    const s = new DynamoStore({ ...base, endpoint: 'http://127.0.0.1:8000', env: {} })
    const c = await resolve(s)
    expect(c.accessKeyId).toBe(LOCAL_CREDENTIALS.accessKeyId)
    expect(c.accessKeyId).toMatch(/^[A-Za-z0-9]+$/)
    s.client.destroy()
  })

  test('credentials the user set are honoured: in the environment, or passed', async () => {
    const env = { AWS_ACCESS_KEY_ID: 'AKIDUSER', AWS_SECRET_ACCESS_KEY: 'secretuser' }
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY }
    Object.assign(process.env, env) // the SDK's chain reads process.env
    try {
      const s = new DynamoStore({ ...base, endpoint: 'http://127.0.0.1:8000', env })
      expect((await resolve(s)).accessKeyId).toBe('AKIDUSER')
      s.client.destroy()
    } finally {
      for (const [k, v] of [['AWS_ACCESS_KEY_ID', saved.id], ['AWS_SECRET_ACCESS_KEY', saved.secret]]) {
        if (v === undefined) delete process.env[k]
        else process.env[k] = v
      }
    }
    const passed = new DynamoStore({ ...base, endpoint: 'http://127.0.0.1:8000', env: {}, credentials: { accessKeyId: 'AKIDPASSED', secretAccessKey: 'x' } })
    expect((await resolve(passed)).accessKeyId).toBe('AKIDPASSED')
    passed.client.destroy()
  })
})
