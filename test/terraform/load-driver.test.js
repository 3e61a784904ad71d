'use strict'

// The load driver's helper, chopper-targets, as its user_data installs it,
// run against a real controller (a local cluster on port 0): it must find
// the leading controller among every controller's URL and turn its
// /v1/status into loadgen flags, one --target per front end plus --servers.

const { freePort, listen, close } = require('../../core/http')
const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')
const { startLocalCluster } = require('../../cluster/local-cluster')
const { TF_DIR, renderTemplate } = require('./terraform-config')

const run = promisify(execFile)

let cluster
let dir
const cleanups = []

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-load-driver-'))
})

afterEach(async () => {
  if (cluster) await cluster.close()
  cluster = null
  for (const fn of cleanups.splice(0).reverse()) await fn()
})

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** The script the load-driver user_data writes to /usr/local/bin/chopper-targets. */
function installedScript () {
  const text = renderTemplate(fs.readFileSync(path.join(TF_DIR, 'templates/load-driver.sh.tftpl'), 'utf8'), {
    public_url: 'http://lb.example', controller_urls: 'http://10.40.8.10:7070,http://10.40.9.11:7070', frontend_port: 8080, app: 'compute'
  })
  const m = /cat > \/usr\/local\/bin\/chopper-targets <<'SCRIPT'\n([\s\S]*?)\nSCRIPT\n/.exec(text)
  expect(m).not.toBeNull()
  const file = path.join(dir, 'chopper-targets')
  fs.writeFileSync(file, m[1] + '\n', { mode: 0o755 })
  return file
}

/** A controller that stands by: it answers /v1/status as a standby does, with no members. */
async function standby () {
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ controllerId: 'i-standby', role: 'standby', epoch: 0, servers: {}, frontends: {} }))
  })
  const port = await listen(server, 0, '127.0.0.1')
  cleanups.push(() => close(server))
  return `http://127.0.0.1:${port}`
}

function envFile (name, controllerUrls) {
  const file = path.join(dir, name)
  fs.writeFileSync(file, `TARGET_URL=http://lb.example\nCONTROLLER_URLS=${controllerUrls}\nFRONTEND_DATA_PORT=8080\nDEPLOYED_APP=compute\n`)
  return file
}

test('chopper-targets prints a --target per front end and every app server id, from the leader', async () => {
  const script = installedScript()
  cluster = await startLocalCluster({ app: 'compute', frontends: 2, servers: 2, port: 0, periodMs: 60000 })
  // A standby first, and a controller whose instance is gone: both skipped.
  const down = `http://127.0.0.1:${await freePort()}`
  const file = envFile('experiment.env', [await standby(), down, cluster.controller.url].join(','))
  const { stdout } = await run(process.execPath, [script, file], { timeout: 10000 })
  expect(stdout.trim()).toBe('--target http://127.0.0.1:8080 --target http://127.0.0.1:8080 --servers app-1,app-2')
  const leader = await run(process.execPath, [script, '--leader', file], { timeout: 10000 })
  expect(leader.stdout.trim()).toBe(cluster.controller.url)
})

test('chopper-targets fails with a message when no controller leads', async () => {
  const script = installedScript()
  // A port that was free a moment ago: that controller is down; the other stands by.
  const file = envFile('unreachable.env', [`http://127.0.0.1:${await freePort()}`, await standby()].join(','))
  const err = await run(process.execPath, [script, file], { timeout: 10000 }).then(() => null, (e) => e)
  expect(err).not.toBeNull()
  expect(err.code).toBe(1)
  expect(err.stderr).toMatch(/^chopper-targets: no controller leads: .*standby/)
})
