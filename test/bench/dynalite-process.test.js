'use strict'

const { DynamoDBClient, ListTablesCommand } = require('@aws-sdk/client-dynamodb')
const { startDynaliteProcess } = require('../../bench/lib/dynalite-process')

/**
 * The experiments' DynamoDB (dynalite in a process of its own) with
 * `latencyMs`: every request waits that long before dynalite sees it, body
 * and all (the experiments' --store-latency-ms).
 */
describe('bench dynalite process', () => {
  const closers = []
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c()
  })

  async function listTablesMs (latencyMs) {
    const dynamo = await startDynaliteProcess({ latencyMs })
    closers.push(() => dynamo.close())
    const client = new DynamoDBClient({ endpoint: dynamo.endpoint, region: 'us-west-2', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } })
    closers.push(() => client.destroy())
    await client.send(new ListTablesCommand({})) // the connection and the SDK warmed up
    const t0 = performance.now()
    const out = await client.send(new ListTablesCommand({}))
    return { ms: performance.now() - t0, out }
  }

  test('latencyMs delays every request, which is still answered in full', async () => {
    const slow = await listTablesMs(120)
    expect(slow.out.TableNames).toEqual([])
    expect(slow.ms).toBeGreaterThanOrEqual(115)
  })

  test('latencyMs 0 (the default): answered as without the option', async () => {
    const fast = await listTablesMs(0)
    expect(fast.out.TableNames).toEqual([])
  })
})
