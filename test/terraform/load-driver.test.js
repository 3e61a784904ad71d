'use strict'

// The load driver's helper, chopper-targets, as its user_data installs it,
// run against a real controller (a local cluster on port 0): it must turn
// /v1/status into loadgen flags, one --target per front end plus --servers.

const { freePort } = require('../../core/http')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')
const { startLocalCluster } = require('../../cluster/local-cluster')
const { TF_DIR, renderTemplate } = require('./terraform-config')

const run = promisify(execFile)

let cluster
let dir

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-load-driver-'))
})

afterEach(async () => {
  if (cluster) await cluster.close()
  cluster = null
})

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/** The script the load-driver user_data writes to /usr/local/bin/chopper-targets. */
function installedScript () {
  const text = renderTemplate(fs.readFileSync(path.join(TF_DIR, 'templates/load-driver.sh.tftpl'), 'utf8'), {
    public_url: 'http://lb.example', controller_url: 'http://10.40.8.10:7070', frontend_port: 8080, app: 'compute'
  })
  const m = /cat > \/usr\/local\/bin\/chopper-targets <<'SCRIPT'\n([\s\S]*?)\nSCRIPT\n/.exec(text)
  expect(m).not.toBeNull()
  const file = path.join(dir, 'chopper-targets')
  fs.writeFileSync(file, m[1] + '\n', { mode: 0o755 })
  return file
}

test('chopper-targets prints a --target per front end and every app server id', async () => {
  const script = installedScript()
  cluster = await startLocalCluster({ app: 'compute', frontends: 2, servers: 2, port: 0, periodMs: 60000 })
  const envFile = path.join(dir, 'experiment.env')
  fs.writeFileSync(envFile, `TARGET_URL=http://lb.example\nCONTROLLER_STATUS_URL=${cluster.controller.url}/v1/status\nFRONTEND_DATA_PORT=8080\nDEPLOYED_APP=compute\n`)
  const { stdout } = await run(process.execPath, [script, envFile], { timeout: 10000 })
  expect(stdout.trim()).toBe('--target http://127.0.0.1:8080 --target http://127.0.0.1:8080 --servers app-1,app-2')
})

test('chopper-targets fails with a message when the controller is unreachable', async () => {
  const script = installedScript()
  const envFile = path.join(dir, 'unreachable.env')
  // A port that was free a moment ago: the controller is down.
  const port = await freePort()
  fs.writeFileSync(envFile, `CONTROLLER_STATUS_URL=http://127.0.0.1:${port}/v1/status\nFRONTEND_DATA_PORT=8080\n`)
  const err = await run(process.execPath, [script, envFile], { timeout: 10000 }).then(() => null, (e) => e)
  expect(err).not.toBeNull()
  expect(err.code).toBe(1)
  expect(err.stderr).toMatch(/^chopper-targets: /)
})
