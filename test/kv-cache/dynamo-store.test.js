'use strict'

const { DynamoDBClient, PutItemCommand } = require('@aws-sdk/client-dynamodb')
const { startDynalite } = require('../../apps/kv-cache/embedded')
const { DynamoStore } = require('../../apps/kv-cache/dynamo-store')
const { HybridClock, generationOf, makeVersion } = require('../../apps/kv-cache/version')
const { FencedWriteError } = require('../../core/errors')
const { createHarness } = require('./harness')

/**
 * The versioned, fenced DynamoDB store against a real dynalite: conditional
 * puts keyed on the version, tombstones, and restarts.
 */

const TABLE = 'kv-store'

describe('DynamoStore versions and fencing', () => {
  let dynamo
  let h
  beforeAll(async () => {
    dynamo = await startDynalite()
    const s = new DynamoStore({ table: TABLE, endpoint: dynamo.endpoint, region: 'us-west-2', timeoutMs: 3000 })
    await s.ensureTable()
    s.close()
  })
  afterAll(async () => { await dynamo.close() })
  beforeEach(() => { h = createHarness() })
  afterEach(async () => { await h.closeAll() })

  /** A store as one process would have it (its own clock), closed after the test. */
  function open (options = {}) {
    const store = new DynamoStore({ table: TABLE, endpoint: dynamo.endpoint, region: 'us-west-2', timeoutMs: 3000, ...options })
    h.track(() => store.close())
    return store
  }
  const text = (item) => item && item.value.toString()

  test('dynalite compares version numbers numerically, to the last of 32 digits', async () => {
    // Our versions are too long for a double; a comparison through floats or
    // strings would accept or refuse some of these wrongly.
    const c = new DynamoDBClient({ endpoint: dynamo.endpoint, region: 'us-west-2', credentials: { accessKeyId: 't', secretAccessKey: 't' } })
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
    expect((await h.dynamoClient(dynamo.endpoint).item(TABLE, 'numeric')).ver).toBe(big + 2n)
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
    const raw = await h.dynamoClient(dynamo.endpoint).item(TABLE, 'tomb')
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
    await h.dynamoClient(dynamo.endpoint).put(TABLE, 'legacy', 'old')
    const store = open()
    expect(await store.get('legacy')).toMatchObject({ ver: 0n })
    await store.put('legacy', Buffer.from('new'), 'text/plain')
    expect(text(await store.get('legacy'))).toBe('new')
  })

  test('a bad generation is refused before anything is written', async () => {
    const store = open()
    await expect(store.put('badgen', Buffer.from('x'), 'text/plain', { generation: -1 })).rejects.toMatchObject({ code: 'CHOPPER_ERR_INVALID_ARG', message: /invalid generation/ })
    await expect(store.delete('badgen', { generation: '2' })).rejects.toMatchObject({ code: 'CHOPPER_ERR_INVALID_ARG' })
    expect(await h.dynamoClient(dynamo.endpoint).item(TABLE, 'badgen')).toBeNull()
  })
})

describe('DynamoStore credentials', () => {
  const { LOCAL_CREDENTIALS } = require('../../apps/kv-cache/dynamo-store')
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
