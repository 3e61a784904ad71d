'use strict'

const { startFixtureProcess } = require('./helpers/fixture-server')
const { runInChild } = require('./helpers/run-in-child')

// A server that stalls once, for 1 s, two seconds into a 5 s run at a constant
// 200 req/s: every request arriving during the stall is answered when it ends.
// About 200 of the 1000 intended requests fall in the stall and would wait
// up to 1 s, so an honest p99 is close to a second. A closed loop with two
// connections sends just two requests into the stall. Every other request is
// sent after the stall (back-to-back, to catch up), and its latency is timed
// from that late send, so its p99 looks like the healthy case.
const STALL_AT_MS = 2000
const STALL_MS = 1000
const spec = { seed: 11, phases: [{ name: 'steady', duration: '5s', rate: 200, keys: { count: 20 } }] }

// Server and driver each in their own process: the stall must come from the
// server, not from a busy test process.
function stallingServer () {
  return startFixtureProcess({ stallAtMs: STALL_AT_MS, stallMs: STALL_MS })
}

test('open loop: p99 reflects a 1 s stall, even with 2 in flight; a closed loop with 2 connections hides it (coordinated omission)', async () => {
  const openServer = await stallingServer()
  let open
  try {
    open = await runInChild(spec, openServer.url)
  } finally {
    await openServer.close()
  }
  const closedServer = await stallingServer()
  let closed
  try {
    closed = await runInChild(spec, closedServer.url, ['--closed-loop', '--connections', '2'])
  } finally {
    await closedServer.close()
  }

  // Same concurrency as the closed loop (2 outstanding), still open loop: sends
  // are held back during the stall, but latency counts from the intended time.
  const cappedServer = await stallingServer()
  let capped
  try {
    capped = await runInChild(spec, cappedServer.url, ['--max-in-flight', '2'])
  } finally {
    await cappedServer.close()
  }

  const o = open.phases[0].latencyMs
  const c = closed.phases[0].latencyMs
  const k = capped.phases[0].latencyMs
  // Open loop: ~20% of requests were caught by the stall, so p90 and p99 are hundreds of ms.
  expect(open.phases[0].sent).toBe(1000)
  expect(o.p99).toBeGreaterThan(800)
  expect(o.p90).toBeGreaterThan(300)
  expect(o.max).toBeGreaterThan(900)
  // Closed loop: the stall did happen (max ~1 s), but only a couple of samples saw it.
  expect(c.max).toBeGreaterThan(800)
  expect(c.p99).toBeLessThan(100)
  expect(c.p99).toBeLessThan(o.p99 / 8)
  expect(closed.latencyFrom).toBe('actual-send-time')
  // The difference is the latency origin, not the concurrency: open loop with 2 in flight still reports it,
  // and flags that its cap delayed sends.
  expect(k.p99).toBeGreaterThan(800)
  expect(capped.phases[0].schedule.capHits).toBeGreaterThan(0)
  expect(capped.client.heldRate).toBe(false)

  // The open loop's windows show the stall as it happened: the window holding
  // the stall's end has a p99 near a second.
  expect(Math.max(...open.windows.map((w) => w.latencyMs.p99 ?? 0))).toBeGreaterThan(800)
})
