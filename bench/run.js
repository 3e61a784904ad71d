#!/usr/bin/env node
'use strict'

// npm run bench: every micro-benchmark in turn. Each prints its own figures.
const { execFileSync } = require('node:child_process')
const path = require('node:path')

const BENCHES = ['lookup.js', 'strategy-round.js', 'forwarding.js', 'appserver-overhead.js', 'control-http.js', 'memory.js']
for (const file of BENCHES) {
  console.log(`\n=== bench/${file}`)
  execFileSync(process.execPath, [path.join(__dirname, file)], { stdio: 'inherit' })
}
