'use strict'

// A no-op backend for bench/forwarding.js, run as its own process so it does
// not share the front end's event loop. Prints its port, then serves "ok".
const http = require('node:http')

const server = http.createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    res.setHeader('content-type', 'text/plain')
    res.end('ok')
  })
})
server.keepAliveTimeout = 60000
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`))
process.on('SIGTERM', () => server.close(() => process.exit(0)))
