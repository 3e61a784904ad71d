'use strict'

module.exports = {
  ...require('./app-server'),
  ...require('./shard-guard'),
  ...require('./middleware')
}
