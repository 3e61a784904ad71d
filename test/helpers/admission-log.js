'use strict'

const { performance } = require('node:perf_hooks')
const express = require('express')

/**
 * A test app that records, for every request it serves, which server admitted
 * which key and when, on one monotonic clock shared by every server of the
 * process: [admitted, finished]. The handler takes `ms` of simulated I/O, so
 * requests overlap a handoff the way real ones do.
 */
function createAdmissionLog () {
  const intervals = [] // { server, key, t0, t1 }
  function app (serverId) {
    const router = express.Router()
    router.get('/work', (req, res) => {
      const t0 = performance.now()
      const ms = Number(req.query.ms) || 0
      const finish = () => {
        intervals.push({ server: serverId, key: req.query.key, t0, t1: performance.now() })
        res.json({ server: serverId })
      }
      if (ms > 0) setTimeout(finish, ms)
      else finish()
    })
    return router
  }
  return { app, intervals }
}

/**
 * Pairs of intervals on different servers for the same key that overlap in
 * time: two servers admitting the same key at the same instant.
 * @returns {{ key, a, b }[]}
 */
function overlaps (intervals) {
  const byKey = new Map()
  for (const iv of intervals) {
    if (!byKey.has(iv.key)) byKey.set(iv.key, [])
    byKey.get(iv.key).push(iv)
  }
  const out = []
  for (const [key, list] of byKey) {
    list.sort((x, y) => x.t0 - y.t0)
    let active = []
    for (const iv of list) {
      active = active.filter((a) => a.t1 > iv.t0)
      const clash = active.find((a) => a.server !== iv.server)
      if (clash) out.push({ key, a: clash, b: iv })
      active.push(iv)
    }
  }
  return out
}

module.exports = { createAdmissionLog, overlaps }
