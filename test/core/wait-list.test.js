'use strict'

const { WaitList } = require('../../core/wait-list')

describe('WaitList', () => {
  beforeEach(() => jest.useFakeTimers())
  afterEach(() => jest.useRealTimers())

  test('a waiter resolves false at its timeout and leaves the list', async () => {
    const list = new WaitList()
    const p = list.wait(50)
    expect(list.length).toBe(1)
    jest.advanceTimersByTime(49)
    expect(list.length).toBe(1)
    jest.advanceTimersByTime(1)
    await expect(p).resolves.toBe(false)
    expect(list.length).toBe(0)
    list.wakeAll() // nobody left: a no-op
  })

  test('wakeAll resolves every waiter true and clears their timers', async () => {
    const list = new WaitList()
    const ps = [list.wait(100), list.wait(200)]
    list.wakeAll()
    expect(list.length).toBe(0)
    expect(jest.getTimerCount()).toBe(0)
    await expect(Promise.all(ps)).resolves.toEqual([true, true])
  })

  test('wakeFirst wakes the oldest waiter whose tag matches, once', async () => {
    const list = new WaitList()
    const order = []
    const a = list.wait(1000, [1, 2]).then((v) => order.push(['a', v]))
    const b = list.wait(1000, [2]).then((v) => order.push(['b', v]))
    const c = list.wait(1000, [3]).then((v) => order.push(['c', v]))
    expect(list.wakeFirst((t) => t.includes(2))).toBe(true)
    expect(list.wakeFirst((t) => t.includes(2))).toBe(true)
    expect(list.wakeFirst((t) => t.includes(2))).toBe(false)
    expect(list.length).toBe(1)
    jest.advanceTimersByTime(1000)
    await Promise.all([a, b, c])
    expect(order).toEqual([['a', true], ['b', true], ['c', false]])
  })
})
