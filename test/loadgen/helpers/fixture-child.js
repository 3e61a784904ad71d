'use strict'

// Child-process side of startFixtureProcess: a fixture server in its own
// process (and core), so that timing tests measure the driver, not a server
// sharing the test's event loop (jest's --detectOpenHandles hooks slow that loop a lot).
const { startFixture } = require('./fixture-server')

process.on('message', async (msg) => {
  if (msg.type === 'start') {
    const { stallAtMs, stallMs, delayMs } = msg.options
    let first = null
    const behave = ({ t }) => {
      if (first === null) first = t
      if (stallAtMs !== undefined) {
        const start = first + stallAtMs
        if (t >= start && t < start + stallMs) return { delayMs: start + stallMs - t }
      }
      if (delayMs) return { delayMs }
    }
    const fixture = await startFixture({ behave })
    process.on('message', async (m) => {
      if (m.type === 'arrivals') process.send({ type: 'arrivals', arrivals: fixture.arrivals })
      if (m.type === 'close') {
        await fixture.close()
        process.disconnect()
      }
    })
    process.send({ type: 'listening', url: fixture.url })
  }
})
