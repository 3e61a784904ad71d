#!/usr/bin/env node
'use strict'

const os = require('node:os')
const pino = require('pino')
const { Registry, collectDefaultMetrics } = require('prom-client')
const { createAppServer } = require('../appserver-lib')
const { loadApp } = require('../apps')
const { readEnv } = require('../core/settings')
const { onShutdown } = require('../cli/args')

// Production entry point for the bundled apps: CHOPPER_APP picks compute or
// kv-cache; everything else comes from core/settings.js ENV.appserver (and ENV.kvCache).
async function main () {
  let settings, appSettings, appModule
  try {
    settings = readEnv('appserver')
    appModule = loadApp(settings.app)
    appSettings = settings.app === 'kv-cache' ? readEnv('kvCache') : {}
  } catch (err) {
    process.stderr.write(`error: ${err.message}\n`)
    process.exit(2)
  }
  const logger = pino({ level: settings.logLevel })
  const id = settings.id || `${os.hostname()}-${settings.port}`
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  // No embedded stand-ins here: without CHOPPER_DDB_ENDPOINT, kv-cache talks to DynamoDB
  // in AWS_REGION through the SDK's standard chain (npm start is where dynalite is embedded).
  const instance = await appModule.create({ ...appSettings, serverId: id, registry, logger })
  const server = createAppServer({
    id,
    app: instance.app,
    onAcquire: instance.onAcquire,
    onRelease: instance.onRelease,
    registry,
    controllerUrl: settings.controllerUrl,
    host: settings.host,
    port: settings.port,
    controlPort: settings.controlPort,
    advertiseHost: settings.advertiseHost,
    logger
  })
  await server.start()
  onShutdown(async () => {
    await server.close()
    if (instance.close) await instance.close()
  }, logger)
}

main().catch((err) => {
  process.stderr.write(`error: ${err.code ? err.code + ': ' : ''}${err.message}\n`)
  process.exit(1)
})
