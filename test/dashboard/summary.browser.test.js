'use strict'

const http = require('node:http')
const express = require('express')
const { dashboardRoutes } = require('../../controller/dashboard/routes')
const { SseHub } = require('../../controller/dashboard/sse-hub')
const { summarizeState, summarizeRound, summarizeColumn, summarizeSnapshot } = require('../../controller/dashboard/state-summary')
const { listen, close } = require('../../core/http')
const { pollUntil } = require('../../core/poll')
const { CHROMIUM, haveChromium, launchBrowser, recordErrors } = require('./harness')
const { bigState, bigRound, bigColumn, bigSnapshot, serverId } = require('./big-state')

/*
 * The dashboard page at scale, in headless chromium: the real routes and SSE
 * hub fed synthetic controller data (big-state.js) through the summary, as
 * the controller sends it. No cluster: 5,000 app servers would not fit here.
 */

const present = haveChromium()
const suite = present ? describe : describe.skip
if (!present) {
  const why = `dashboard summary browser test SKIPPED: ${CHROMIUM} not found (apt-get install chromium; .ci/run installs it)`
  console.warn(why)
  describe(why, () => { test.skip('needs chromium', () => {}) })
}

function readPage (page) {
  return page.evaluate(() => {
    const rows = (sel) => [...document.querySelectorAll(sel)].map((e) => ({ id: e.dataset.server, load: Number(e.dataset.load) }))
    const bins = (key) => [...document.querySelectorAll(`.histogram[data-histogram="${key}"] .bin`)].map((e) => Number(e.dataset.count))
    const counts = Object.fromEntries([...document.querySelectorAll('#servers [data-count-of]')].map((e) => [e.dataset.countOf, Number(e.querySelector('b').textContent)]))
    return {
      conn: document.querySelector('#conn').dataset.state,
      view: document.querySelector('#servers').dataset.view,
      serverRows: document.querySelectorAll('#servers .server').length,
      hottest: rows('#servers .top.hot tr[data-server]'),
      coolest: rows('#servers .top.cool tr[data-server]'),
      loadBins: bins('load'),
      sliceBins: bins('slices'),
      counts,
      members: [...document.querySelectorAll('#members tbody tr[data-member]')].map((e) => e.dataset.member),
      note: (document.querySelector('#members tr.more') || {}).textContent || '',
      sumServers: document.querySelector('#sum-servers').textContent,
      sumFrontends: document.querySelector('#sum-frontends').textContent,
      behind: [...document.querySelectorAll('#pushes dd')].pop().textContent,
      columns: Number(document.querySelector('#heatmap').dataset.columns || 0),
      nonzero: Number(document.querySelector('#heatmap').dataset.nonzeroCells || 0),
      domNodes: document.getElementsByTagName('*').length
    }
  })
}

suite('dashboard at scale in chromium', () => {
  let server
  let hub
  let browser
  afterEach(async () => {
    if (browser) await browser.close()
    if (hub) hub.close()
    if (server) await close(server)
    browser = hub = server = null
  })

  /** The dashboard's routes and hub, serving `current.snapshot` to each new client. */
  async function serve (current) {
    hub = new SseHub({ heartbeatMs: 60000 })
    const app = express()
    app.use(dashboardRoutes({ hub, snapshot: () => current.snapshot }))
    server = http.createServer(app)
    const port = await listen(server, 0, '127.0.0.1')
    return `http://127.0.0.1:${port}`
  }

  async function open (url) {
    browser = await launchBrowser()
    const page = await browser.newPage()
    const errors = recordErrors(page)
    await page.setViewport({ width: 1400, height: 900 })
    await page.goto(`${url}/dashboard`, { waitUntil: 'load' })
    await page.waitForFunction(() => document.querySelector('#conn').dataset.state === 'live', { timeout: 10000 })
    return { page, errors }
  }

  test('5,000 servers: counts, histograms, the hottest and coolest, only flagged members; a round event updates them', async () => {
    const n = 5000
    const options = { draining: 4, unknown: 3, lagging: 200, frontends: 120 }
    const current = { snapshot: summarizeSnapshot(bigSnapshot(n, { rounds: 30, ...options })) }
    const url = await serve(current)
    const { page, errors } = await open(url)

    const p = await pollUntil(async () => { const r = await readPage(page); return r.view === 'summary' && r.hottest.length && r }, { timeoutMs: 10000, what: 'the summarized servers panel' })
    expect(p.serverRows).toBe(0) // no row per server
    expect(p.counts).toMatchObject({ count: n, draining: 4, lagging: 200, loadUnknown: 3 })
    expect(p.sumServers).toBe(`${n} (draining)`)
    expect(p.sumFrontends).toBe('120')
    expect(p.hottest.map((r) => r.id)).toEqual(current.snapshot.state.serverSummary.hottest.map((r) => r.id))
    expect(p.hottest.slice(0, 3).map((r) => r.id)).toEqual([0, 1, 2].map((i) => serverId(i)))
    expect(p.coolest).toHaveLength(10)
    expect(p.coolest[0].load).toBeLessThanOrEqual(p.coolest[9].load)
    expect(p.loadBins.reduce((a, b) => a + b, 0)).toBe(n - 3) // every server with a known load
    expect(p.sliceBins.reduce((a, b) => a + b, 0)).toBe(n)
    // the members table lists only the servers that need attention, and says so
    expect(p.members).toHaveLength(10)
    expect(p.members.slice(0, 3)).toEqual([3, 4, 5].map((i) => serverId(i))) // load unknown first
    expect(p.note).toMatch(/5000 app servers: 10 needing attention listed above/)
    expect(p.note).toMatch(/120 front ends/)
    expect(p.behind).toMatch(/ and 190 more$/)
    expect(p.columns).toBe(30)
    expect(p.nonzero).toBeGreaterThan(0)
    expect(p.domNodes).toBeLessThan(2000)

    // A round: app-4999 becomes the hottest server.
    const state = bigState(n, options)
    state.servers[serverId(4999)].lastLoad = 1e6
    const round = bigRound(n, { round: 31 })
    round.perServer[serverId(4999)] = 1e6
    hub.broadcast('round', { round: summarizeRound(round), column: summarizeColumn(bigColumn(n, { round: 31 })), state: summarizeState(state) })
    const after = await pollUntil(async () => { const r = await readPage(page); return r.hottest[0].id === serverId(4999) && r }, { timeoutMs: 5000, what: 'the new hottest server' })
    expect(after.hottest[0].load).toBe(1e6)
    expect(after.columns).toBe(31)

    expect(errors).toEqual([])
    await page.close()
  }, 40000)

  test('50 servers: a row per server and per member, as before', async () => {
    const current = { snapshot: summarizeSnapshot(bigSnapshot(50, { rounds: 5, frontends: 2 })) }
    expect(current.snapshot.state.servers).toBeDefined() // at rowsAbove: not summarized
    const url = await serve(current)
    const { page, errors } = await open(url)
    const p = await pollUntil(async () => { const r = await readPage(page); return r.view === 'rows' && r.serverRows === 50 && r }, { timeoutMs: 10000, what: 'a row per server' })
    expect(p.hottest).toEqual([])
    expect(p.members).toHaveLength(52)
    expect(p.note).toBe('')
    expect(errors).toEqual([])
    await page.close()
  }, 40000)
})
