'use strict'

const { Registry } = require('prom-client')
const { defaults, resolveOptions } = require('../../apps/kv-cache/options')
const { create } = require('../../apps/kv-cache')
const { readEnv } = require('../../core/settings')

describe('kv-cache options', () => {
  test('the environment-backed defaults are the ones core/settings.js documents', () => {
    const env = readEnv('kvCache', {})
    for (const [k, v] of Object.entries(env)) expect(defaults[k]).toBe(v)
    expect(defaults.cacheTtlMs).toBe(10000) // paper 6.1
    expect(defaults.maxValueBytes).toBe(400 * 1024) // DynamoDB's item limit
    expect(defaults.dynamoEndpoint).toBeUndefined()
    expect(defaults.redisUrl).toBeUndefined()
  })

  test.each([
    [{ table: 'x' }, /invalid table/],
    [{ dynamoEndpoint: 'localhost:8000' }, /invalid dynamoEndpoint: expected an http\(s\) URL, got "localhost:8000"/],
    [{ region: '' }, /invalid region/],
    [{ redisUrl: 'http://127.0.0.1:6379' }, /invalid redisUrl: expected a redis:\/\/ or rediss:\/\/ URL/],
    [{ cacheTtlMs: 0 }, /invalid cacheTtlMs: expected a positive integer \(milliseconds\), got 0/],
    [{ maxValueBytes: 1.5 }, /invalid maxValueBytes/],
    [{ spawnRedis: 'yes' }, /invalid spawnRedis: expected a boolean/],
    [{ batchWrites: 1 }, /invalid batchWrites: expected a boolean/],
    [{ pipelineReleases: 'no' }, /invalid pipelineReleases: expected a boolean/],
    [{ heldReads: 'peek' }, /invalid heldReads: expected one of wait, ask/],
    [{ heldReadWaitMs: -1 }, /invalid heldReadWaitMs: expected an integer of milliseconds from 0 to fenceTimeoutMs/],
    [{ heldReadWaitMs: 5000 }, /invalid heldReadWaitMs/],
    [{ serverId: 'a b' }, /invalid serverId/],
    [{ registry: {} }, /invalid registry: expected a prom-client Registry, got an object/]
  ])('%j is rejected naming the option', (bad, message) => {
    expect(() => resolveOptions(bad)).toThrow(message)
  })

  test('create validates before touching DynamoDB or Redis', async () => {
    await expect(create({ cacheTtlMs: -1, dynamoEndpoint: 'http://127.0.0.1:1' })).rejects.toMatchObject({ code: 'CHOPPER_ERR_INVALID_ARG' })
  })

  test('undefined options fall back to defaults; others pass through', () => {
    const registry = new Registry()
    const o = resolveOptions({ table: undefined, cacheTtlMs: 250, registry })
    expect(o.table).toBe('chopper-kv')
    expect(o.cacheTtlMs).toBe(250)
    expect(o.registry).toBe(registry)
  })

  test('heldReadWaitMs: 500 ms unless set; unset, it follows a shorter fenceTimeoutMs; set above it, it is refused', () => {
    expect(resolveOptions({}).heldReadWaitMs).toBe(500)
    expect(resolveOptions({ fenceTimeoutMs: 300 }).heldReadWaitMs).toBe(300)
    expect(resolveOptions({ fenceTimeoutMs: 300, heldReadWaitMs: 50 }).heldReadWaitMs).toBe(50)
    expect(() => resolveOptions({ fenceTimeoutMs: 300, heldReadWaitMs: 400 })).toThrow(/invalid heldReadWaitMs/)
  })
})
