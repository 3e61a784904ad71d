'use strict'

const { KeyQueue } = require('../../apps/kv-cache/key-queue')
const { WriteBatches, queueAnswered } = require('../../apps/kv-cache/write-batches')

/** A write the test finishes by hand. */
function gate () {
  let open
  const promise = new Promise((resolve) => { open = resolve })
  return { promise, open }
}

describe('WriteBatches: group commit of one key\'s writes', () => {
  test('writes that arrive while one runs go as one batch, run as its last write; every write gets its outcome', async () => {
    const queue = new KeyQueue()
    let joined = 0
    const batches = new WriteBatches(queue, () => joined++)
    const ran = []
    const first = gate()
    const run = async (seal) => {
      const w = seal()
      ran.push(w)
      if (w === 'a') await first.promise
      return { value: `applied ${w}`, after: null }
    }
    const a = batches.write('k', 'g', 'a', run)
    // 'a' started at once (nothing ahead of it): not open to later writes
    expect(ran).toEqual(['a'])
    expect(batches.size).toBe(0)
    const b = batches.write('k', 'g', 'b', run)
    const c = batches.write('k', 'g', 'c', run)
    const d = batches.write('k', 'g', 'd', run)
    expect(batches.size).toBe(1)
    expect(joined).toBe(2)
    first.open()
    expect(await a).toBe('applied a')
    expect(await Promise.all([b, c, d])).toEqual(['applied d', 'applied d', 'applied d'])
    expect(ran).toEqual(['a', 'd']) // b and c were overwritten within the batch, never run
    expect(batches.size).toBe(0)
    // with nothing running, the next write runs at once, alone
    expect(await batches.write('k', 'g', 'e', run)).toBe('applied e')
    expect(ran).toEqual(['a', 'd', 'e'])
  })

  test('a write of another group starts a new batch behind the open one; order is kept', async () => {
    const batches = new WriteBatches(new KeyQueue())
    const ran = []
    const first = gate()
    const run = async (seal) => {
      const w = seal()
      ran.push(w)
      if (w.v === 1) await first.promise
      return { value: w.v, after: null }
    }
    const p1 = batches.write('k', 'gen1', { v: 1 }, run)
    const p2 = batches.write('k', 'gen1', { v: 2 }, run)
    const p3 = batches.write('k', 'gen2', { v: 3 }, run) // admitted under another map: may not join
    const p4 = batches.write('k', 'gen2', { v: 4 }, run)
    const p5 = batches.write('k', 'gen1', { v: 5 }, run) // the open batch is gen2's now
    first.open()
    expect(await Promise.all([p1, p2, p3, p4, p5])).toEqual([1, 2, 4, 4, 5])
    expect(ran.map((w) => w.v)).toEqual([1, 2, 4, 5])
  })

  test('a failed batch fails every write in it, and the next batch still runs', async () => {
    const batches = new WriteBatches(new KeyQueue())
    const first = gate()
    const run = async (seal) => {
      const w = seal()
      if (w === 'a') await first.promise
      if (w === 'c') throw Object.assign(new Error('fenced'), { code: 'X' })
      return { value: w, after: null }
    }
    const a = batches.write('k', 'g', 'a', run)
    const b = batches.write('k', 'g', 'b', run)
    const c = batches.write('k', 'g', 'c', run)
    first.open()
    await expect(a).resolves.toBe('a')
    await expect(b).rejects.toThrow('fenced')
    await expect(c).rejects.toThrow('fenced')
    await expect(batches.write('k', 'g', 'd', run)).resolves.toBe('d')
  })

  test('keys batch apart, and a read queued between two writes keeps its place', async () => {
    const queue = new KeyQueue()
    const batches = new WriteBatches(queue)
    const order = []
    const first = gate()
    const run = async (seal) => {
      const w = seal()
      order.push(`write ${w}`)
      if (w === 'a1') await first.promise
      return { value: w, after: null }
    }
    const a1 = batches.write('a', 'g', 'a1', run)
    const b1 = batches.write('b', 'g', 'b1', run) // another key: not behind a1
    await b1
    expect(order).toEqual(['write a1', 'write b1'])
    const a2 = batches.write('a', 'g', 'a2', run)
    const read = queue.read('a', async () => { order.push('read a'); return 'r' })
    first.open()
    await Promise.all([a1, a2, read])
    expect(order).toEqual(['write a1', 'write b1', 'write a2', 'read a'])
  })

  test('a write is answered as soon as it is applied; the key\'s next write waits for what comes after (the releases)', async () => {
    const queue = new KeyQueue()
    const batches = new WriteBatches(queue)
    const releases = gate()
    const order = []
    const run = async (seal) => {
      const w = seal()
      order.push(`apply ${w}`)
      const after = w === 'a' ? releases.promise.then(() => { order.push('released a') }) : null
      return { value: w, after }
    }
    const a = batches.write('k', 'g', 'a', run)
    expect(await a).toBe('a') // answered while its release is still out
    const b = batches.write('k', 'g', 'b', run)
    const read = queue.read('k', async () => { order.push('read'); return null })
    await new Promise((resolve) => setImmediate(resolve))
    expect(order).toEqual(['apply a']) // b and the read wait for a's release
    releases.open()
    expect(await b).toBe('b')
    await read
    expect(order).toEqual(['apply a', 'released a', 'apply b', 'read'])
    // without batching, queueAnswered alone does the same
    const c = gate()
    const alone = queueAnswered(queue, 'k', async () => ({ value: 'c', after: c.promise }))
    expect(await alone).toBe('c')
    let next = false
    const d = queueAnswered(queue, 'k', async () => { next = true; return { value: 'd', after: null } })
    await new Promise((resolve) => setImmediate(resolve))
    expect(next).toBe(false)
    c.open()
    expect(await d).toBe('d')
  })

  test('a batch stays open after its turn came until its runner seals it: a write arriving meanwhile joins it and is what it applies; one arriving after the seal starts the next batch', async () => {
    let joined = 0
    const batches = new WriteBatches(new KeyQueue(), () => joined++)
    const holds = gate()
    const store = gate()
    const ran = []
    const run = async (seal, peek) => {
      ran.push(`hold (last so far ${peek()})`)
      await holds.promise // the replicas' holds carry no value
      const w = seal()
      ran.push(`store ${w}`)
      await store.promise
      return { value: `applied ${w}`, after: null }
    }
    const a = batches.write('k', 'g', 'a', run)
    expect(ran).toEqual(['hold (last so far a)'])
    expect(batches.size).toBe(1) // running, not sealed: open
    const b = batches.write('k', 'g', 'b', run)
    expect(joined).toBe(1)
    holds.open()
    await new Promise((resolve) => setImmediate(resolve))
    expect(ran).toEqual(['hold (last so far a)', 'store b'])
    expect(batches.size).toBe(0) // sealed
    const c = batches.write('k', 'g', 'c', run) // after the seal: the next batch, behind this one
    expect(joined).toBe(1)
    expect(batches.size).toBe(1)
    store.open()
    expect(await Promise.all([a, b, c])).toEqual(['applied b', 'applied b', 'applied c'])
    expect(ran).toEqual(['hold (last so far a)', 'store b', 'hold (last so far c)', 'store c'])
  })

  test('a batch whose run fails before sealing fails every write that joined it, and is closed: the next write starts afresh', async () => {
    const batches = new WriteBatches(new KeyQueue())
    const holds = gate()
    const run = async (seal) => {
      await holds.promise
      throw Object.assign(new Error('replica unavailable: not applied'), { code: 'X' })
    }
    const a = batches.write('k', 'g', 'a', run)
    const b = batches.write('k', 'g', 'b', run)
    holds.open()
    await expect(a).rejects.toThrow('not applied')
    await expect(b).rejects.toThrow('not applied')
    expect(batches.size).toBe(0)
    await expect(batches.write('k', 'g', 'c', async (seal) => ({ value: seal(), after: null }))).resolves.toBe('c')
  })
})
