'use strict'

const { serverTimingMs } = require('../../loadgen/server-timing')

describe('serverTimingMs (Server-Timing header)', () => {
  test.each([
    ['capacity;dur=12.34', 12.34],
    ['db;dur=3, app;desc="render";dur=4.5', 7.5],
    ['cache;desc="hit", total;dur="2"', 2],
    [['a;dur=1', 'b;dur=2'], 3], // several header lines
    ['x;DUR=5', 5]
  ])('%p is %p ms', (header, ms) => {
    expect(serverTimingMs(header)).toBeCloseTo(ms, 6)
  })

  test.each([undefined, '', 'cache;desc="hit"', 'a;dur=-1', 'a;dur=abc', 'dur=5'])('%p states no time: null', (header) => {
    expect(serverTimingMs(header)).toBeNull()
  })
})
