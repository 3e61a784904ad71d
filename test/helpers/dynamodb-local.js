'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn } = require('node:child_process')
const { DynamoDBClient, ListTablesCommand } = require('@aws-sdk/client-dynamodb')
const { freePort } = require('../../core/http')
const { pollUntil } = require('../../core/poll')
const { LOCAL_CREDENTIALS } = require('../../core/dynamo-client')
const { killOnExit } = require('../../apps/kv-cache/embedded')

/**
 * AWS's DynamoDB Local 2.x as a child process, for tests. The jars and
 * sqlite4java's native library come from `.ci/install-dynamodb-local.sh`,
 * which fetches them from Maven Central into a cache dir outside the clone.
 */

const MAIN_CLASS = 'com.amazonaws.services.dynamodbv2.local.main.ServerRunner'
const INSTALL_HINT = 'bash .ci/install-dynamodb-local.sh'

/** The cache dir the install script fills (DYNAMODB_LOCAL_DIR, as the script reads it). */
function dynamoDbLocalDir (env = process.env) {
  return env.DYNAMODB_LOCAL_DIR || path.join(os.homedir(), '.cache', 'chopper-dynamodb-local')
}

/**
 * Why DynamoDB Local cannot start from `dir`, or null when it can: the
 * script writes `version` last, so its presence means a complete install.
 */
function missingDynamoDbLocal (dir = dynamoDbLocalDir()) {
  const has = (sub, re) => {
    try {
      return fs.readdirSync(path.join(dir, sub)).some((f) => re.test(f))
    } catch {
      return false
    }
  }
  if (!fs.existsSync(path.join(dir, 'version')) || !has('lib', /^DynamoDBLocal-.*\.jar$/) || !has('native', /^libsqlite4java-linux-.*\.so$/)) {
    return `DynamoDB Local is not installed in ${dir}; run \`${INSTALL_HINT}\` (needs java and mvn)`
  }
  return null
}

/**
 * Whether process `pid` holds the listening socket on `port` (Linux, from
 * /proc); null where /proc cannot tell. Another server that took the port
 * between our probe and the JVM's bind would answer ListTables too.
 */
function listensOn (pid, port) {
  let inodes
  try {
    const hex = port.toString(16).toUpperCase().padStart(4, '0')
    inodes = new Set()
    for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
      let text = ''
      try { text = fs.readFileSync(file, 'utf8') } catch { continue }
      for (const line of text.split('\n').slice(1)) {
        const f = line.trim().split(/\s+/)
        // local_address is ADDR:PORT in hex; state 0A is LISTEN.
        if (f.length > 9 && f[1].endsWith(`:${hex}`) && f[3] === '0A') inodes.add(f[9])
      }
    }
    if (inodes.size === 0) return null
    for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
      const m = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (m && inodes.has(m[1])) return true
    }
    return false
  } catch {
    return null
  }
}

/** True once DynamoDB Local answers ListTables, with the fallback credentials a store would use. */
async function answers (endpoint) {
  const client = new DynamoDBClient({
    endpoint,
    region: 'us-west-2',
    credentials: { ...LOCAL_CREDENTIALS },
    maxAttempts: 1,
    requestHandler: { connectionTimeout: 500, requestTimeout: 2000, throwOnRequestTimeout: true }
  })
  try {
    await client.send(new ListTablesCommand({}))
    return true
  } catch (err) {
    // Refused connections are expected while the JVM starts; anything that
    // is an answer (a refusal of the credentials, say) is worth showing.
    if (err.$metadata && err.$metadata.httpStatusCode) throw new Error(`DynamoDB Local answered ListTables with ${err.name}: ${err.message}`, { cause: err })
    return false
  } finally {
    client.destroy()
  }
}

/**
 * Start DynamoDB Local in memory on 127.0.0.1 and a free port, and wait until
 * it answers ListTables. `-sharedDb`: without it DynamoDB Local keeps one
 * database per access key id and region, and a table that a store created
 * with the fallback credentials would be invisible to a test's own client.
 * @param {object} [options]
 * @param {string} [options.dir] the install script's cache dir
 * @param {string} [options.java] the java binary
 * @param {number} [options.timeoutMs] how long to wait for it to answer
 * @returns {Promise<{ endpoint: string, port: number, pid: number, startMs: number, close(): Promise<void> }>}
 *   startMs: from spawn to the first answer
 */
async function startDynamoDbLocal ({ dir = dynamoDbLocalDir(), java = 'java', timeoutMs = 60000 } = {}) {
  const missing = missingDynamoDbLocal(dir)
  if (missing) throw new Error(missing)
  // A free port can be taken between our probe and the JVM's bind: try again.
  for (let attempt = 1; ; attempt++) {
    const port = await freePort()
    // DynamoDB Local writes dynamodb-local-metadata.json into its working dir,
    // even in memory: a private one, removed on close.
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-dynamodb-local-'))
    const removeCwd = () => fs.rmSync(cwd, { recursive: true, force: true })
    const t0 = Date.now()
    const child = spawn(java, [
      `-Djava.library.path=${path.join(dir, 'native')}`,
      // A test server: small heap, no JIT beyond C1 (starts faster, and the
      // load is light), one GC thread.
      '-Xmx512m', '-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC',
      '-cp', path.join(dir, 'lib', '*'), MAIN_CLASS,
      // No telemetry: tests reach no network beyond this machine.
      '-inMemory', '-sharedDb', '-disableTelemetry', '-port', String(port)
    ], { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    killOnExit(child)
    let output = ''
    const keep = (d) => { output = (output + d.toString()).slice(-4000) }
    child.stdout.on('data', keep)
    child.stderr.on('data', keep)
    let exited = false
    let spawnError = null
    const exit = new Promise((resolve) => child.once('close', () => { exited = true; resolve() }))
    child.once('error', (err) => { spawnError = err })
    const endpoint = `http://127.0.0.1:${port}`
    try {
      await pollUntil(async () => exited || spawnError ? 'exited' : (await answers(endpoint)) && listensOn(child.pid, port) !== false, {
        timeoutMs,
        intervalMs: 50,
        what: `DynamoDB Local on port ${port}`
      })
    } catch (err) {
      child.kill('SIGKILL')
      await exit
      removeCwd()
      throw new Error(`DynamoDB Local did not start on port ${port}: ${err.message}; output: ${output.trim()}`, { cause: err })
    }
    if (exited || spawnError) removeCwd()
    if (spawnError) throw new Error(`could not run ${java} for DynamoDB Local: ${spawnError.message}`, { cause: spawnError })
    if (exited) {
      if (/BindException|Address already in use|EADDRINUSE/i.test(output) && attempt < 5) continue
      throw new Error(`DynamoDB Local exited on start (port ${port}): ${output.trim()}`)
    }
    return {
      endpoint,
      port,
      pid: child.pid,
      startMs: Date.now() - t0,
      async close () {
        if (!exited) {
          child.kill('SIGTERM')
          const t = setTimeout(() => child.kill('SIGKILL'), 5000)
          await exit
          clearTimeout(t)
        }
        removeCwd()
      }
    }
  }
}

module.exports = { startDynamoDbLocal, missingDynamoDbLocal, dynamoDbLocalDir, INSTALL_HINT }
