'use strict'

module.exports = {
  ...require('./frontend'),
  ...require('./routing-table'),
  ...require('./cluster')
}
