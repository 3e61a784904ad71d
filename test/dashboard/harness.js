'use strict'

const fs = require('node:fs')
const { request } = require('undici')
const { SliceMap } = require('../../core/slice-map')
const { sliceKey } = require('../../core/keyspace')

/** Debian's chromium (`apt-get install chromium`; .ci/run installs it). */
const CHROMIUM = '/usr/bin/chromium'

function haveChromium () {
  try {
    fs.accessSync(CHROMIUM, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** Headless chromium through puppeteer-core (headless: true passes --headless=new). */
function launchBrowser () {
  const puppeteer = require('puppeteer-core')
  return puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--headless=new', '--disable-dev-shm-usage', '--disable-gpu']
  })
}

/**
 * Collect everything that would show in the page's console as an error:
 * console.error, uncaught exceptions, failed requests and HTTP errors.
 */
function recordErrors (page) {
  const errors = []
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`) })
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.message}`))
  page.on('requestfailed', (r) => errors.push(`requestfailed: ${r.url()} ${r.failure() && r.failure().errorText}`))
  page.on('response', (r) => { if (r.status() >= 400) errors.push(`http ${r.status()}: ${r.url()}`) })
  return errors
}

/** `n` keys whose slice keys `assignment` gives to `serverId`, starting the search at `prefix`-0. */
function keysOwnedBy (assignment, serverId, n, prefix) {
  const map = new SliceMap(assignment)
  const out = []
  for (let i = 0; out.length < n; i++) {
    const k = `${prefix}-${i}`
    if (map.ownerOf(sliceKey(k)) === serverId) out.push(k)
    if (i > 1e6) throw new Error(`no keys for ${serverId}`)
  }
  return out
}

/**
 * Closed-loop traffic through a front end until stop(): each of `concurrency`
 * workers sends the next key of `pick()`. Counts non-200 answers.
 */
function startTraffic (frontendUrl, pick, { concurrency = 4, n = 30 } = {}) {
  const state = { running: true }
  const stats = { sent: 0, failed: 0 }
  const worker = async () => {
    while (state.running) {
      const key = pick()
      try {
        const res = await request(`${frontendUrl}/compute?key=${encodeURIComponent(key)}&n=${n}`)
        await res.body.dump()
        stats.sent++
        if (res.statusCode !== 200) stats.failed++
      } catch {
        stats.failed++
      }
    }
  }
  const done = Promise.all(Array.from({ length: concurrency }, worker))
  return {
    stats,
    async stop () {
      state.running = false
      await done
    }
  }
}

/** A skewed picker: `hotShare` of the requests go to `hot`, the rest spread over `cold`. */
function skewed (hot, cold, hotShare = 0.75) {
  let i = 0
  return () => {
    i++
    // Deterministic interleaving rather than Math.random: the same run every time.
    if (i % 100 < hotShare * 100) return hot[i % hot.length]
    return cold[(i * 7919) % cold.length]
  }
}

module.exports = { CHROMIUM, haveChromium, launchBrowser, recordErrors, keysOwnedBy, startTraffic, skewed }
