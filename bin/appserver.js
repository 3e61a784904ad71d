#!/usr/bin/env node
'use strict'

// Production entry point for the bundled apps: CHOPPER_APP picks compute or kv-cache;
// configuration from the environment (core/settings.js ENV.appserver, and ENV.kvCache).
const os = require('node:os')
const { Registry, collectDefaultMetrics } = require('prom-client')
const { loadApp, startApp } = require('../apps')
const { readEnv } = require('../core/settings')
const { runEntryPoint } = require('../cli/entry')

runEntryPoint('appserver', async (settings, logger) => {
  const appModule = loadApp(settings.app)
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })
  const started = await startApp(appModule, {
    id: settings.id || `${os.hostname()}-${settings.port}`,
    // No embedded stand-ins here: without CHOPPER_DDB_ENDPOINT, kv-cache talks to DynamoDB
    // in AWS_REGION through the SDK's standard chain (npm start is where dynalite is embedded).
    appOptions: settings.app === 'kv-cache' ? readEnv('kvCache') : {},
    registry,
    logger,
    controllerUrl: settings.controllerUrl,
    host: settings.host,
    port: settings.port,
    controlPort: settings.controlPort,
    advertiseHost: settings.advertiseHost,
    clusterToken: settings.clusterToken
  })
  // SIGTERM/SIGINT: drain first (slices handed off, in-flight requests
  // finished, deregistered), then close.
  return async () => {
    await started.server.drain()
    await started.close()
  }
})
