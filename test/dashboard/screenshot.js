#!/usr/bin/env node
'use strict'

/*
 * Writes docs/dashboard.png: a local cluster (3 compute servers, 500 ms
 * rounds) under skewed traffic, the hot keys moving once halfway, seen
 * through the dashboard in headless chromium.
 *
 *   node test/dashboard/screenshot.js [--out docs/dashboard.png] [--seconds 62]
 */

const path = require('node:path')
const { parseArgs } = require('node:util')
const { startLocalCluster } = require('../../cluster/local-cluster')
const { setTimeout: delay } = require('node:timers/promises')
const { haveChromium, launchBrowser, recordErrors, keysOwnedBy, startTraffic, skewed } = require('./harness')

async function main () {
  const { values } = parseArgs({ options: { out: { type: 'string' }, seconds: { type: 'string' } } })
  const out = path.resolve(values.out || path.join(__dirname, '..', '..', 'docs', 'dashboard.png'))
  const seconds = Number(values.seconds || 62)
  if (!haveChromium()) {
    process.stderr.write('error: /usr/bin/chromium not found (apt-get install chromium)\n')
    process.exit(2)
  }
  const cluster = await startLocalCluster({ port: 0, periodMs: 500, frontends: 2, servers: 3, app: 'compute' })
  let browser
  let traffic
  try {
    const a = cluster.controller.controller.assignment
    const cold = Array.from({ length: 400 }, (_, i) => `user-${i}`)
    // Phase 1: three hot keys, all on app-1. Phase 2: three others, all on app-3.
    const phase1 = skewed(keysOwnedBy(a, 'app-1', 3, 'hot'), cold, 0.7)
    const phase2 = skewed(keysOwnedBy(a, 'app-3', 3, 'warm'), cold, 0.7)
    let pick = phase1
    browser = await launchBrowser()
    const page = await browser.newPage()
    const errors = recordErrors(page)
    await page.setViewport({ width: 1400, height: 900, deviceScaleFactor: 1 })
    await page.goto(`${cluster.controller.url}/dashboard`, { waitUntil: 'load' })
    traffic = startTraffic(cluster.frontends[0].url, () => pick(), { concurrency: 6, n: 40 })
    // A recording of a fixed length, not a wait for a condition: sleeping is the point here.
    await delay((seconds * 1000) / 2)
    pick = phase2
    await delay((seconds * 1000) / 2)
    // Every round starts a fenced handoff, so pushes are in flight for a moment
    // after each: catch the page between two, with traffic still flowing.
    await page.waitForFunction(() => document.querySelectorAll('#members .badge.warn, #members .badge.bad').length === 0, { timeout: 3000, polling: 20 }).catch(() => {})
    await page.screenshot({ path: out })
    await traffic.stop()
    traffic = null
    const round = cluster.controller.controller.status().rounds.at(-1).round
    if (errors.length) throw new Error(`page errors: ${errors.join('; ')}`)
    process.stdout.write(`wrote ${out} (${cluster.controller.controller.status().rounds.length} rounds, ${round} in all)\n`)
  } finally {
    if (traffic) await traffic.stop()
    if (browser) await browser.close()
    await cluster.close()
  }
}

main().catch((err) => {
  process.stderr.write(`error: ${err.stack || err.message}\n`)
  process.exit(1)
})
