'use strict'

const { ReadBatches } = require('../../apps/kv-cache/read-batches')

function gate () {
  let open
  const p = new Promise((resolve) => { open = resolve })
  return { p, open }
}

/** A store read that stays in flight until opened; `issued` lists its reads by number. */
function slowStore () {
  const reads = []
  return {
    reads,
    read: () => {
      const g = gate()
      const n = reads.length + 1
      reads.push(g)
      return g.p.then(() => `v${n}`)
    }
  }
}

const ticks = async (n = 5) => { for (let i = 0; i < n; i++) await Promise.resolve() }

describe('ReadBatches', () => {
  test('a lone read runs its own store read, not shared; nothing is kept afterwards', async () => {
    const b = new ReadBatches()
    await expect(b.read('k', async () => 'v')).resolves.toEqual({ item: 'v', shared: false })
    await ticks()
    expect(b.size).toBe(0)
  })

  test('readers arriving while a store read runs share the next one, issued after they all arrived: two store reads for any number of readers', async () => {
    const b = new ReadBatches()
    const store = slowStore()
    const first = b.read('k', store.read)
    const later = Array.from({ length: 20 }, () => b.read('k', store.read))
    await ticks()
    expect(store.reads.length).toBe(1) // the next read waits for the running one
    store.reads[0].open()
    await expect(first).resolves.toEqual({ item: 'v1', shared: false })
    await ticks()
    expect(store.reads.length).toBe(2)
    // a reader arriving now (the second read is running) may not share it: it waits for a third
    const latest = b.read('k', store.read)
    store.reads[1].open()
    const answers = await Promise.all(later)
    expect(answers.map((a) => a.item)).toEqual(Array(20).fill('v2')) // never v1, issued before they arrived
    expect(answers.filter((a) => !a.shared).length).toBe(1) // the one that started it
    await ticks()
    expect(store.reads.length).toBe(3)
    store.reads[2].open()
    await expect(latest).resolves.toEqual({ item: 'v3', shared: false })
    await ticks()
    expect(b.size).toBe(0)
  })

  test('every reader gets a value from a store read issued after it arrived (randomised arrivals)', async () => {
    const b = new ReadBatches()
    const issuedAt = []
    let clock = 0
    const pending = []
    const read = () => {
      const g = gate()
      issuedAt.push(clock)
      const n = issuedAt.length - 1
      pending.push(g)
      return g.p.then(() => n)
    }
    const checks = []
    let seed = 7
    const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 }
    for (let step = 0; step < 300; step++) {
      clock++
      if (rand() < 0.6) {
        const arrived = clock
        checks.push(b.read(rand() < 0.5 ? 'a' : 'b', read).then(({ item }) => expect(issuedAt[item]).toBeGreaterThanOrEqual(arrived)))
      } else if (pending.length > 0) {
        pending.shift().open()
      }
      await ticks(3)
    }
    while (pending.length > 0 || b.size > 0) {
      if (pending.length > 0) pending.shift().open()
      await ticks(3)
    }
    await Promise.all(checks)
    expect(checks.length).toBeGreaterThan(100)
    expect(issuedAt.length).toBeLessThan(checks.length) // some shared
  })

  test('keys do not share reads', async () => {
    const b = new ReadBatches()
    const store = slowStore()
    const x = b.read('x', store.read)
    const y = b.read('y', store.read)
    await ticks()
    expect(store.reads.length).toBe(2)
    store.reads.forEach((g) => g.open())
    expect(await Promise.all([x, y])).toEqual([{ item: 'v1', shared: false }, { item: 'v2', shared: false }])
  })

  test('a failed store read fails its readers only; the next batch still runs', async () => {
    const b = new ReadBatches()
    const g = gate()
    let calls = 0
    const first = b.read('k', () => { calls++; return g.p.then(() => { throw new Error('store down') }) })
    const second = b.read('k', async () => { calls++; return 'ok' })
    const third = b.read('k', async () => { calls++; return 'not run' })
    g.open()
    await expect(first).rejects.toThrow('store down')
    await expect(second).resolves.toEqual({ item: 'ok', shared: false })
    await expect(third).resolves.toEqual({ item: 'ok', shared: true })
    expect(calls).toBe(2)
  })

  test('a store read that throws at once rejects, and leaves nothing behind', async () => {
    const b = new ReadBatches()
    await expect(b.read('k', () => { throw new Error('bad') })).rejects.toThrow('bad')
    await ticks()
    expect(b.size).toBe(0)
  })
})
