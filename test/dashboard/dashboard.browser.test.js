'use strict'

const { startLocalCluster } = require('../../cluster/local-cluster')
const { pollUntil } = require('../../core/poll')
const { CHROMIUM, haveChromium, launchBrowser, recordErrors, keysOwnedBy, startTraffic, skewed } = require('./harness')

/*
 * The dashboard in a real browser: Debian's chromium, headless, through
 * puppeteer-core, against a local cluster under skewed traffic.
 */

const present = haveChromium()
const suite = present ? describe : describe.skip
if (!present) {
  const why = `dashboard browser test SKIPPED: ${CHROMIUM} not found (apt-get install chromium; .ci/run installs it)`
  console.warn(why)
  describe(why, () => { test.skip('needs chromium', () => {}) })
}

/** What the page shows, read from the DOM (the heatmap canvas's data attributes and pixels). */
function readPage (page) {
  return page.evaluate(() => {
    const c = document.querySelector('#heatmap')
    const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data
    let hash = 2166136261 // FNV-1a over the pixels: did the rendered heatmap change?
    for (let i = 0; i < px.length; i += 4) hash = Math.imul(hash ^ (px[i] | (px[i + 1] << 8) | (px[i + 2] << 16)), 16777619)
    return {
      columns: Number(c.dataset.columns || 0),
      nonzero: Number(c.dataset.nonzeroCells || 0),
      moved: Number(c.dataset.movedCells || 0),
      layouts: Number(c.dataset.loadedLayouts || 0),
      layout: c.dataset.layout || '',
      hash: hash >>> 0,
      servers: [...document.querySelectorAll('#servers .server')].map((e) => ({ id: e.dataset.server, load: Number(e.dataset.load) })),
      members: [...document.querySelectorAll('#members tbody tr')].map((e) => e.dataset.member),
      conn: document.querySelector('#conn').dataset.state,
      trendPoints: document.querySelector('#trend-imbalance path.series') ? document.querySelector('#trend-imbalance path.series').getAttribute('d').length : 0
    }
  })
}

suite('dashboard in chromium', () => {
  let cluster
  let browser
  let traffic
  afterEach(async () => {
    if (traffic) await traffic.stop()
    if (browser) await browser.close()
    if (cluster) await cluster.close()
    traffic = browser = cluster = null
  })

  test('the heatmap fills with load and changes when the controller rebalances; a bar per server; no console errors', async () => {
    // one server per slice at first, so relieving app-1 means moving slices (what the heatmap marks)
    cluster = await startLocalCluster({ port: 0, periodMs: 300, frontends: 1, servers: 3, app: 'compute', strategyOptions: { minReplicas: 1 }, quietBelow: 0 })
    const { controller, url } = cluster.controller
    browser = await launchBrowser()
    const page = await browser.newPage()
    const errors = recordErrors(page)
    await page.setViewport({ width: 1400, height: 900 })
    await page.goto(`${url}/dashboard`, { waitUntil: 'load' })
    await page.waitForFunction(() => document.querySelector('#conn').dataset.state === 'live', { timeout: 10000 })

    // Idle rounds first: columns without load.
    const idle = await pollUntil(async () => { const p = await readPage(page); return p.columns >= 1 && p }, { timeoutMs: 10000, what: 'the first heatmap column' })
    expect(idle.nonzero).toBe(0)

    // Three hot keys, all on app-1 (the even split gives it the first third), and some cold ones.
    const hot = keysOwnedBy(controller.assignment, 'app-1', 3, 'hot')
    const cold = Array.from({ length: 50 }, (_, i) => `cold-${i}`)
    traffic = startTraffic(cluster.frontends[0].url, skewed(hot, cold, 0.8), { concurrency: 4, n: 30 })

    const loaded = await pollUntil(async () => { const p = await readPage(page); return p.nonzero > 0 && p }, { timeoutMs: 10000, what: 'heatmap cells with load' })
    expect(loaded.hash).not.toBe(idle.hash)

    // The controller moves slices off app-1. The first loaded column shows the
    // even split the load was measured on; a later one shows another owner
    // layout, and the buckets that changed hands are marked.
    const moved = await pollUntil(async () => {
      const p = await readPage(page)
      return p.layouts >= 2 && p.moved > 0 && p
    }, { timeoutMs: 15000, intervalMs: 100, what: 'the heatmap to show a rebalance' })
    expect(moved.layout).toMatch(/^app-\d:0-\d+(,app-\d:\d+-\d+)+$/)
    expect(controller.status().rounds.some((r) => r.churn > 0)).toBe(true)
    expect(moved.hash).not.toBe(loaded.hash)

    // A bar per server, with load on them; the members table and the trends are drawn.
    const ids = cluster.servers.map((s) => s.id).sort()
    const withLoad = await pollUntil(async () => {
      const p = await readPage(page)
      return p.servers.filter((s) => s.load > 0).length >= 2 && p
    }, { timeoutMs: 10000, what: 'server bars with load' })
    expect(withLoad.servers.map((s) => s.id)).toEqual(ids)
    expect(withLoad.members).toEqual([...ids, 'fe-1'])
    expect(withLoad.trendPoints).toBeGreaterThan(0)
    expect(withLoad.conn).toBe('live')

    await traffic.stop()
    traffic = null
    expect(errors).toEqual([])
    // Close the page before the cluster: a stream cut by the server would be a (legitimate) error.
    await page.close()
  }, 40000)
})
