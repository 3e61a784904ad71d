#!/usr/bin/env node
'use strict'

// Builds this package's dist/ (cli/package-build.js): `npm pack` runs it as
// prepack, and with --clean as postpack.
const path = require('node:path')
const packageBuild = require('../../cli/package-build')

const PKG_DIR = path.resolve(__dirname, '..')

if (require.main === module) packageBuild.main(PKG_DIR)

module.exports = {
  build: () => packageBuild.build(PKG_DIR),
  clean: () => packageBuild.clean(PKG_DIR),
  collect: packageBuild.collect,
  checkDependencies: packageBuild.checkDependencies
}
