#!/usr/bin/env node
'use strict'

// Production entry point; configuration from the environment (core/settings.js ENV.controller).
const { createController } = require('../controller')
const { DynamoStateStore } = require('../controller/state-store')
const { runEntryPoint } = require('../cli/entry')

runEntryPoint('controller', async (settings, logger) => {
  const { stateTable, stateEndpoint, region, advertiseHost, ...options } = settings
  // With CHOPPER_STATE_TABLE the state lives in DynamoDB and controllers sharing it elect a leader.
  const store = stateTable ? new DynamoStateStore({ table: stateTable, endpoint: stateEndpoint, region, logger }) : undefined
  if (!store) logger.warn('CHOPPER_STATE_TABLE is not set: the controller state lives in memory, a restart re-lays the keyspace, and no standby can take over')
  const controller = createController({
    ...options,
    store,
    advertiseHost: advertiseHost || (settings.host === '0.0.0.0' ? '127.0.0.1' : settings.host),
    logger
  })
  await controller.start()
  return async () => {
    await controller.close()
    if (store) store.close()
  }
})
