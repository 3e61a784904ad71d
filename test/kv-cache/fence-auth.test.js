'use strict'

const { fenceContext } = require('../../apps/kv-cache/fence-client')
const { signRequest } = require('../../core/cluster-auth')
const { useKvStack, registryValue, kvUrl, call } = require('./harness')
const { pollUntil } = require('../../core/poll')
const { sliceKey } = require('../../core/keyspace')

/**
 * Replica fences with a cluster token (docs/security.md): the primary signs
 * each fence for the replica it goes to, over the key, the fence headers and
 * the value, and a replica refuses a fence that is unsigned, signed for
 * another replica, altered on the way, or replayed. Fences travel on the data
 * port, where anyone may send requests, so this is what keeps an outsider
 * from holding or releasing keys. Real dynalite and redis-server; a
 * middleware plays the shard guard, as in replicas.test.js.
 */

const TABLE = 'kv-fence-auth'
const GEN = 5
const TOKEN = 'kv-fence-auth-test-token-0123456789'

describe('kv-cache fences with a cluster token', () => {
  const env = useKvStack()

  /** Servers A (primary) and B of one slice, each with `tokens[id]`. */
  async function replicaSet (tokens = { A: TOKEN, B: TOKEN }, options = {}) {
    const ids = Object.keys(tokens)
    const servers = {}
    const nodes = {}
    for (const id of ids) {
      const node = await env.h.standalone({ dynamoEndpoint: env.dynamo.endpoint, table: TABLE, redisUrl: env.redis.url, serverId: id, clusterToken: tokens[id], fenceTimeoutMs: 500, ...options }, {
        middleware (req, res, next) {
          req.chopperGeneration = Math.max(GEN, Number(req.headers['x-chopper-generation']) || 0)
          req.chopperReplicas = ids
          req.chopperServers = servers
          next()
        }
      })
      servers[id] = { url: node.url }
      nodes[id] = node
    }
    return nodes
  }

  /** A hold of `key` on B as A would send it: signed for `to`, with `headers` changed after signing. */
  function fence (B, key, { to = 'B', token = TOKEN, after = {} } = {}) {
    const headers = { 'x-kv-fence': 'hold', 'x-chopper-generation': String(GEN), 'x-kv-fence-id': `A:${key}:1`, 'x-kv-fence-from': 'A' }
    const path = `/kv/_fence?key=${key}`
    const signed = {
      ...headers,
      ...signRequest({ token, method: 'POST', path, context: fenceContext({ to, phase: 'hold', fenceId: headers['x-kv-fence-id'], from: 'A', generation: GEN }) }),
      ...after
    }
    return { send: () => call(`${B.url}${path}`, { method: 'POST', headers: signed }) }
  }

  test('the primary\'s signed fences are accepted: the write holds and fences the replica', async () => {
    const { A, B } = await replicaSet()
    const put = await call(kvUrl(A.url, 'k1'), { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'v1' })
    expect(put.status).toBe(204)
    // the write is answered before its release (kv-writer.js): wait for that
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release to finish' })
    expect(await registryValue(B.registry, 'chopper_kv_fences_received_total', { phase: 'hold' })).toBe(1)
    expect(await registryValue(B.registry, 'chopper_kv_fences_received_total', { phase: 'release' })).toBe(1)
    expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { phase: 'release', outcome: 'ok' })).toBe(1)
    expect(await registryValue(B.registry, 'chopper_kv_fences_refused_total')).toBe(0)
    expect((await call(kvUrl(B.url, 'k1'))).body).toBe('v1')
  })

  test('unsigned, misdirected, altered and replayed fences are refused, and hold nothing', async () => {
    const { B } = await replicaSet()
    const unsigned = await call(`${B.url}/kv/_fence?key=k2`, { method: 'POST', headers: { 'x-kv-fence': 'hold', 'x-chopper-generation': String(GEN), 'x-kv-fence-id': 'A:k2:1', 'x-kv-fence-from': 'A' } })
    expect([unsigned.status, unsigned.body.error.code]).toEqual([401, 'CHOPPER_ERR_UNAUTHENTICATED'])
    const refused = [
      fence(B, 'k2', { to: 'C' }), // captured on its way to another replica
      fence(B, 'k2', { after: { 'x-kv-fence': 'abort' } }), // its phase changed on the way
      fence(B, 'k2', { after: { 'x-kv-fence-from': 'B2' } }),
      fence(B, 'k2', { token: 'not-the-cluster-token-at-all' })
    ]
    for (const f of refused) {
      const r = await f.send()
      expect([r.status, r.body.error.code]).toEqual([403, 'CHOPPER_ERR_FORBIDDEN'])
    }
    expect(B.kv.service.holds.size).toBe(0)
    const good = fence(B, 'k2')
    expect((await good.send()).status).toBe(204)
    expect(B.kv.service.holds.held('k2')).toBe(true)
    const replay = await good.send()
    expect([replay.status, replay.body.error.code]).toEqual([403, 'CHOPPER_ERR_FORBIDDEN'])
    expect(await registryValue(B.registry, 'chopper_kv_fences_refused_total')).toBe(refused.length + 2)
  })

  test('heldReads ask: a replica\'s read of a held key asks the writer with a signed read fence, which is answered; an unsigned one is refused', async () => {
    const { A, B } = await replicaSet(undefined, { heldReads: 'ask' })
    const put = await call(kvUrl(A.url, 'k4'), { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'v4' })
    expect(put.status).toBe(204)
    await pollUntil(() => A.kv.service.writer.releases.size === 0, { what: 'the release to finish' })
    B.kv.service.hold('k4', sliceKey('k4'), 'A:k4:9', { from: 'A', url: A.url, generation: GEN, heldReads: 'ask' })
    const r = await call(kvUrl(B.url, 'k4'))
    expect([r.status, r.body, r.headers['x-kv-outcome']]).toEqual([200, 'v4', 'hit'])
    expect(await registryValue(B.registry, 'chopper_kv_writer_asks_total', { outcome: 'current' })).toBe(1)
    expect(await registryValue(A.registry, 'chopper_kv_fences_received_total', { phase: 'read' })).toBe(1)
    const unsigned = await call(`${A.url}/kv/_fence?key=k4`, { method: 'POST', headers: { 'x-kv-fence': 'read', 'x-chopper-generation': String(GEN), 'x-kv-fence-id': 'A:k4:9', 'x-kv-fence-from': 'B' } })
    expect([unsigned.status, unsigned.body.error.code]).toEqual([401, 'CHOPPER_ERR_UNAUTHENTICATED'])
  })

  test('a primary with another token cannot fence: its write fails safely, not applied', async () => {
    const { A, B } = await replicaSet({ A: 'some-other-cluster-token-xyz', B: TOKEN })
    const put = await call(kvUrl(A.url, 'k3'), { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'v3' })
    expect([put.status, put.body.error.code]).toEqual([503, 'CHOPPER_ERR_REPLICA_UNAVAILABLE'])
    expect(await registryValue(A.registry, 'chopper_kv_fences_sent_total', { phase: 'hold', outcome: 'failed' })).toBe(1)
    expect(B.kv.service.holds.size).toBe(0)
  })
})
