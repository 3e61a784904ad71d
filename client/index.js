'use strict'

const { createClient, ChopperClient, defaults } = require('./client')
const { readCredential } = require('../core/request-signing')

module.exports = { createClient, ChopperClient, defaults, readCredential }
