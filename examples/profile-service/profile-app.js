'use strict'

const express = require('express')
const { defaultKeyFrom } = require('@chopper/appserver-lib')

/**
 * A toy profile store sharded by user id (the `key`): each server holds only
 * the profiles of the keys it owns. appserver-lib has already refused (421)
 * every request for a key this server does not own, so the routes never check.
 *
 * Profiles are kept with their slice key, so the ranges a server loses
 * (onRelease) can be dropped: their next owner serves them from now on.
 * A real service would keep them in a shared store and use these hooks to
 * warm and drop a cache.
 *
 * With `counter` (an axios instance whose adapter is a @chopper/client's:
 * see server.js), each write also counts a hit for the user in the counter
 * service (examples/ts-service), another sharded service: the call goes
 * straight to the counter server that owns the user, with no front end.
 *
 * @returns {{ app: import('express').Router, onAcquire: Function, onRelease: Function, size: () => number }}
 */
function createProfileApp ({ log = () => {}, counter = null } = {}) {
  const profiles = new Map() // user -> { sliceKey, generation, profile }
  const app = express.Router()
  app.use(express.json({ limit: '16kb' }))

  app.get('/profile', (req, res) => {
    const user = defaultKeyFrom(req) // the key the shard guard admitted
    const entry = profiles.get(user)
    if (!entry) return res.status(404).json({ error: { code: 'PROFILE_NOT_FOUND', message: `no profile for ${JSON.stringify(user)}` } })
    res.json({ user, profile: entry.profile, writtenAtGeneration: entry.generation })
  })

  app.put('/profile', async (req, res) => {
    const user = defaultKeyFrom(req)
    if (req.body === null || typeof req.body !== 'object' || Array.isArray(req.body)) {
      return res.status(400).json({ error: { code: 'PROFILE_INVALID', message: 'expected a JSON object' } })
    }
    // req.chopperGeneration is the map generation the request was admitted
    // under: a store shared by all servers would refuse a write older than the
    // newest one it has seen for the key (a fencing token).
    profiles.set(user, { sliceKey: req.sliceKey, generation: req.chopperGeneration, profile: req.body })
    if (!counter) return res.json({ user, stored: true, generation: req.chopperGeneration })
    let hits = null
    try {
      hits = (await counter.post('/hits', null, { params: { key: user } })).data.hits
    } catch (err) {
      log({ msg: 'counter call failed', user, code: err.code })
    }
    res.json({ user, stored: true, generation: req.chopperGeneration, hits })
  })

  function onAcquire (ranges, { generation }) {
    log({ msg: 'acquired ranges', generation, ranges: ranges.length })
  }

  function onRelease (ranges, { generation }) {
    let dropped = 0
    for (const [user, entry] of profiles) {
      if (ranges.some((r) => entry.sliceKey >= r.start && entry.sliceKey < r.end)) {
        profiles.delete(user)
        dropped++
      }
    }
    log({ msg: 'released ranges', generation, ranges: ranges.length, dropped })
  }

  return { app, onAcquire, onRelease, size: () => profiles.size }
}

module.exports = { createProfileApp }
