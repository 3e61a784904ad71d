'use strict'

const { parseWrk, toMs } = require('../../bench/proxies/wrk')
const { summarize, median, renderTable } = require('../../bench/proxies/report')
const { parseStat } = require('../../bench/proxies/cpu')

const WRK = `Running 1s test @ http://127.0.0.1:37361/x
  1 threads and 4 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   250.30us  525.19us   6.29ms   91.90%
    Req/Sec    36.74k    15.20k   53.07k    70.00%
  Latency Distribution
     50%   98.00us
     75%  143.00us
     90%  540.00us
     99%    2.79ms
  36461 requests in 1.00s, 4.31MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:  36389.57
Transfer/sec:      4.30MB
`

describe('parseWrk', () => {
  test('reads req/s, requests, p50 and p99 in ms, and errors', () => {
    expect(parseWrk(WRK)).toEqual({ rps: 36389.57, requests: 36461, p50Ms: 0.098, p99Ms: 2.79, non2xx: 7, socketErrors: 3 })
  })

  test('converts every wrk time unit', () => {
    expect([toMs('812.00us'), toMs('3.81ms'), toMs('1.02s'), toMs('1.50m'), toMs('x')]).toEqual([0.812, 3.81, 1020, 90000, null])
  })

  test('a report without figures is an error, not zeros', () => {
    expect(() => parseWrk('unable to connect to 127.0.0.1:1 Connection refused')).toThrow(/could not read wrk/)
  })
})

describe('summarize', () => {
  const round = (rps, p99Ms, extra = {}) => ({ rps, p50Ms: 1, p99Ms, requests: rps, non2xx: 0, socketErrors: 0, cpuUsPerReq: 10, backendCpuPct: 50, ...extra })

  test('medians over rounds and ratios to the HAProxy row', () => {
    const rows = summarize([
      { id: 'haproxy', label: 'HAProxy', rounds: [round(100, 2), round(300, 4), round(200, 3)] },
      { id: 'chopper', label: 'Chopper', rounds: [round(50, 6), { round: 2, error: 'boom' }, round(150, 6, { non2xx: 2 })] },
      { id: 'nginx', label: 'nginx', reason: 'nginx is not installed (apt-get install -y nginx)', rounds: [] }
    ])
    expect(rows[0]).toMatchObject({ available: true, rps: 200, p99Ms: 3, rpsRatio: 1, p99Ratio: 1, errors: 0 })
    expect(rows[1]).toMatchObject({ available: true, rps: 100, p99Ms: 6, rpsRatio: 0.5, p99Ratio: 2, errors: 2, reason: '1 round(s) failed: boom' })
    expect(rows[2]).toMatchObject({ available: false, reason: expect.stringMatching(/apt-get install -y nginx/) })
    const table = renderTable(rows)
    expect(table).toMatch(/\| Chopper \| 100 \| 1\.00 \| 6\.00 \| 0\.50× \| 2\.00× \|/)
    expect(table).toMatch(/- nginx: not available: nginx is not installed/)
  })

  test('without a HAProxy row the ratios are null', () => {
    const [row] = summarize([{ id: 'chopper', label: 'Chopper', rounds: [round(10, 1)] }])
    expect(row).toMatchObject({ rps: 10, rpsRatio: null, p99Ratio: null })
  })

  test('median of an even count averages the middle two', () => {
    expect([median([4, 1, 3, 2]), median([]), median([null, 5])]).toEqual([2.5, null, 5])
  })
})

test('parseStat reads pid, ppid and CPU ticks past a command name with spaces', () => {
  const line = '4242 (node worker) S 4200 4242 4200 0 -1 4194560 100 0 0 0 70 30 0 0 20 0 11 0 1 2 3'
  expect(parseStat(line)).toEqual({ pid: 4242, ppid: 4200, ticks: 100 })
})
