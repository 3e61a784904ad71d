#!/usr/bin/env node
'use strict'

// Entry point: reads the environment, starts the profile service behind
// Chopper, and drains on SIGTERM/SIGINT. Logs are JSON lines on stdout.
const axios = require('axios')
const { createAppServer } = require('@chopper/appserver-lib')
const { createClient } = require('@chopper/client')
const { createProfileApp } = require('./profile-app')

const log = (fields) => process.stdout.write(JSON.stringify({ time: Date.now(), ...fields }) + '\n')

/** Every setting, its environment variable and its default. */
function readSettings (env) {
  const port = (name, dflt) => {
    const raw = env[name]
    if (raw === undefined || raw === '') return dflt
    if (!/^\d+$/.test(raw) || Number(raw) > 65535) throw new Error(`${name} must be a port number (0 picks a free one), got ${JSON.stringify(raw)}`)
    return Number(raw)
  }
  return {
    id: env.CHOPPER_SERVER_ID || `profile-${process.pid}`,
    controllerUrl: env.CHOPPER_CONTROLLER_URL || 'http://127.0.0.1:7070',
    host: env.CHOPPER_APP_HOST || '127.0.0.1',
    port: port('CHOPPER_APP_PORT', 9000),
    controlPort: port('CHOPPER_APP_CONTROL_PORT', 9001),
    advertiseHost: env.CHOPPER_ADVERTISE_HOST || '127.0.0.1',
    consistency: env.CHOPPER_CONSISTENCY || 'available',
    // The counter service (examples/ts-service), called through @chopper/client:
    // its controller's URL (or members' control URLs), and with a cluster token its read credential.
    counterUrl: env.CHOPPER_COUNTER_CONTROLLER_URL || undefined,
    counterReadCredential: env.CHOPPER_COUNTER_READ_CREDENTIAL || undefined
  }
}

async function main () {
  let settings
  let server
  let profiles
  let counterClient = null
  try {
    settings = readSettings(process.env)
    if (settings.counterUrl) {
      counterClient = createClient({ controllerUrl: settings.counterUrl, readCredential: settings.counterReadCredential })
    }
    // An axios instance that routes by key through the client: no front end between the services.
    const counter = counterClient && axios.create({ adapter: counterClient.axiosAdapter, baseURL: 'http://counter' })
    profiles = createProfileApp({ log, counter })
    const { counterUrl, counterReadCredential, ...serverSettings } = settings
    server = createAppServer({ ...serverSettings, app: profiles.app, onAcquire: profiles.onAcquire, onRelease: profiles.onRelease })
  } catch (err) {
    // A wrong setting: the message names it.
    process.stderr.write(`profile-service: ${err.message}\n`)
    process.exitCode = 2
    return
  }
  const urls = await server.start() // listens, registers, starts renewing its lease
  log({ msg: 'profile service listening', serverId: settings.id, ...urls })

  let stopping = false
  const stop = async (signal) => {
    if (stopping) return
    stopping = true
    log({ msg: 'draining', signal })
    // Hand our slices to other servers, let admitted requests finish, deregister.
    const result = await server.drain()
    await server.close()
    if (counterClient) await counterClient.close()
    log({ msg: 'stopped', ...result, profiles: profiles.size() })
  }
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
}

main().catch((err) => {
  process.stderr.write(`profile-service failed: ${err.stack}\n`)
  process.exitCode = 1
})
