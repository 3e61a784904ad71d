'use strict'

// The DynamoDB emulator on a test host of its own (bench/chaos/net-cluster.js):
// `node net-dynalite.js <host> <port>` serves dynalite there and prints "ready".
const pino = require('pino')
const { startDynalite } = require('../../apps/kv-cache/embedded')

const [host, port] = process.argv.slice(2)
startDynalite({ host, port: Number(port), logger: pino({ level: 'warn' }) }).then(() => process.stdout.write('ready\n'), (err) => {
  process.stderr.write(`dynalite failed: ${err.stack}\n`)
  process.exit(1)
})
process.on('SIGTERM', () => process.exit(0))
