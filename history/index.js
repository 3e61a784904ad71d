'use strict'

const { checkLinearizability, defaults } = require('./linearizability')
const { HistoryRecorder, uniqueValue } = require('./recorder')

module.exports = { checkLinearizability, linearizabilityDefaults: defaults, HistoryRecorder, uniqueValue }
