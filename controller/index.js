'use strict'

module.exports = {
  ...require('./controller'),
  ...require('./strategies')
}
