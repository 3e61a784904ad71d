'use strict'

const { KeyQueue } = require('../../apps/kv-cache/key-queue')

function gate () {
  let open
  const p = new Promise((resolve) => { open = resolve })
  return { p, open }
}

describe('KeyQueue', () => {
  test('operations on one key run one at a time in arrival order', async () => {
    const q = new KeyQueue()
    const log = []
    const g = gate()
    const a = q.write('k', async () => { log.push('a start'); await g.p; log.push('a end') })
    const b = q.write('k', async () => { log.push('b') })
    const c = q.read('k', async () => { log.push('c'); return 'read' })
    await Promise.resolve()
    expect(log).toEqual(['a start'])
    g.open()
    await Promise.all([a, b, c])
    expect(log).toEqual(['a start', 'a end', 'b', 'c'])
    expect(q.size).toBe(0)
  })

  test('different keys do not wait for each other', async () => {
    const q = new KeyQueue()
    const g = gate()
    const slow = q.write('a', () => g.p)
    await expect(q.write('b', async () => 'b done')).resolves.toBe('b done')
    g.open()
    await slow
  })

  test('a read queued behind a read joins it; a read behind a write does not', async () => {
    const q = new KeyQueue()
    let reads = 0
    const g = gate()
    const r1 = q.read('k', async () => { reads++; await g.p; return reads })
    const r2 = q.read('k', async () => { reads++; return reads })
    const w = q.write('k', async () => {})
    const r3 = q.read('k', async () => { reads++; return reads })
    g.open()
    expect(await r1).toBe(1)
    expect(await r2).toBe(1) // coalesced
    await w
    expect(await r3).toBe(2)
  })

  test('a failure does not block the next operation on the key', async () => {
    const q = new KeyQueue()
    const failed = q.write('k', async () => { throw new Error('boom') })
    const next = q.write('k', async () => 'ok')
    await expect(failed).rejects.toThrow('boom')
    await expect(next).resolves.toBe('ok')
  })

  test('after cut, a new read does not join the read in flight but reads again after it', async () => {
    const q = new KeyQueue()
    let reads = 0
    const g = gate()
    const r1 = q.read('k', async () => { reads++; await g.p; return 'first' })
    q.cut('k')
    const r2 = q.read('k', async () => { reads++; return 'second' })
    g.open()
    expect(await r1).toBe('first')
    expect(await r2).toBe('second')
    expect(reads).toBe(2)
    await new Promise(setImmediate) // the clean-up runs in a later microtask
    expect(q.size).toBe(0)
  })
})
