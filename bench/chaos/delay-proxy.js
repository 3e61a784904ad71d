'use strict'

const net = require('node:net')
const { createRng } = require('../../loadgen/prng')
const { listen } = require('../../core/http')

/**
 * A TCP proxy that delays every chunk, each way, by `delayMs` ± `jitterMs`
 * (uniform, seeded), never reordering a connection's bytes: a chunk leaves
 * no earlier than the one before it. The kernel here has no `tc netem`, so
 * the chaos bench puts this in the control plane's path: one process per
 * controller on a test host of its own, `proxy` (bench/chaos/net-cluster.js
 * `startDelayProxies`), and nftables DNAT on the other hosts sends their new
 * connections to a controller there.
 *
 * @param {{ host: string, port?: number, target: { host: string, port: number }, delayMs: number, jitterMs?: number, seed?: number }} options
 * @returns {Promise<{ port: number, stats(): object, close(): Promise<void> }>}
 */
async function startDelayProxy ({ host, port = 0, target, delayMs, jitterMs = 0, seed = 1 }) {
  const rng = createRng(seed)
  const sockets = new Set()
  const counts = { connections: 0, chunks: 0, bytes: 0, delayMs: 0, lateMs: 0, maxLateMs: 0 }
  const delay = () => Math.max(0, delayMs + (rng.next() * 2 - 1) * jitterMs)

  /** Pipe `from` into `to` with each chunk held back. */
  function pipeDelayed (from, to) {
    let last = 0
    from.on('data', (chunk) => {
      const d = delay()
      const at = Math.max(last, Date.now() + d)
      last = at
      counts.chunks++
      counts.bytes += chunk.length
      counts.delayMs += d
      setTimeout(() => {
        // How much later than planned it left: this process's own lag, added to the delay.
        const late = Date.now() - at
        counts.lateMs += late
        counts.maxLateMs = Math.max(counts.maxLateMs, late)
        if (!to.destroyed) to.write(chunk)
      }, at - Date.now())
    })
    from.on('end', () => setTimeout(() => to.end(), Math.max(0, last - Date.now())))
  }

  const server = net.createServer((client) => {
    counts.connections++
    const upstream = net.connect(target.port, target.host)
    for (const s of [client, upstream]) {
      sockets.add(s)
      s.on('close', () => { sockets.delete(s); client.destroy(); upstream.destroy() })
      s.on('error', () => {})
    }
    pipeDelayed(client, upstream)
    pipeDelayed(upstream, client)
  })
  const bound = await listen(server, port, host)
  return {
    port: bound,
    stats: () => ({ connections: counts.connections, chunks: counts.chunks, bytes: counts.bytes, meanDelayMs: counts.chunks ? Math.round(counts.delayMs / counts.chunks) : null, meanLateMs: counts.chunks ? Math.round(counts.lateMs / counts.chunks) : null, maxLateMs: counts.maxLateMs }),
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy()
      server.close(() => resolve())
    })
  }
}

/**
 * As a process of its own on a test host (bench/chaos/net-cluster.js):
 * `node delay-proxy.js '<options as JSON>'` prints `{"port":N}` once it
 * listens, and its stats as one JSON line when SIGTERM stops it.
 */
if (require.main === module) {
  startDelayProxy(JSON.parse(process.argv[2])).then((proxy) => {
    process.stdout.write(JSON.stringify({ port: proxy.port }) + '\n')
    process.once('SIGTERM', async () => {
      const stats = proxy.stats()
      await proxy.close()
      process.stdout.write(JSON.stringify({ stats }) + '\n', () => process.exit(0))
    })
  }, (err) => {
    process.stderr.write(`delay proxy failed: ${err.stack}\n`)
    process.exit(1)
  })
}

module.exports = { startDelayProxy }
