'use strict'

module.exports = {
  ...require('./frontend'),
  ...require('../core/routing-table'),
  ...require('./cluster')
}
