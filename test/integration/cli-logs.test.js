'use strict'

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { Writable } = require('node:stream')
const { pollUntil } = require('../../core/poll')
const { createCliLogger } = require('../../cli/logger')
const { alive } = require('../helpers/process')

const ROOT = path.join(__dirname, '../..')
const ARGS = ['--port', '0', '--servers', '1', '--frontends', '1', '--period', '200']
// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g
// What bin/cluster.js prints itself next to the log lines ("frontend   http://...",
// "ready; Ctrl-C to stop"): they start with a lower-case word, log lines with "{" or "[".
const PRINTED = /^[a-z][\w-]*[\s;]/

/** The environment without any log settings of the machine running the tests. */
function cleanEnv (extra = {}) {
  const env = { ...process.env, ...extra }
  for (const k of ['LOG_LEVEL', 'LOG_FORMAT', 'NO_COLOR', 'FORCE_COLOR']) if (!(k in extra)) delete env[k]
  return env
}

const running = []

/**
 * `npm start` as a child: with stdout piped, or (`pty: true`) on a
 * pseudo-terminal made by util-linux `script`, as in a terminal. `pid` is the
 * node process itself (`exec` replaces script's shell with it).
 */
async function start (args, { pty = false, env = {} } = {}) {
  const command = [process.execPath, path.join(ROOT, 'bin/cluster.js'), ...args]
  const child = pty
    // A terminal has a TERM (CI may have none): pino-pretty colours only where it is set and not "dumb".
    ? spawn('script', ['-qfec', 'exec ' + command.map(shellQuote).join(' '), '/dev/null'], { cwd: ROOT, env: cleanEnv({ TERM: 'xterm', ...env }) })
    : spawn(command[0], command.slice(1), { cwd: ROOT, env: cleanEnv(env) })
  const out = { stdout: '', stderr: '' }
  child.stdout.on('data', (d) => { out.stdout += d })
  child.stderr.on('data', (d) => { out.stderr += d })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  const run = { child, out, exited, pid: child.pid }
  running.push(run)
  await pollUntil(() => out.stdout.includes('ready; Ctrl-C to stop') || child.exitCode !== null, { timeoutMs: 30000, what: 'the cluster ready line' })
  if (!out.stdout.includes('ready')) throw new Error(`bin/cluster.js exited before it was ready:\n${out.stdout}\n${out.stderr}`)
  if (pty) run.pid = Number(fs.readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/)[0])
  return run
}

afterEach(async () => {
  for (const { child, pid, exited } of running.splice(0)) {
    if (alive(pid)) process.kill(pid, 'SIGKILL')
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    await exited
  }
})

function shellQuote (s) {
  return `'${String(s).replace(/'/g, "'\\''")}'`
}

function refused (url) {
  const { hostname, port } = new URL(url)
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname)
    socket.once('connect', () => { socket.destroy(); resolve(false) })
    socket.once('error', (err) => resolve(err.code === 'ECONNREFUSED'))
  })
}

function urlsIn (text) {
  return [...text.matchAll(/^(?:frontend|controller)\s+(http:\/\/\S+)/gm)].map((m) => m[1])
}

/**
 * Non-empty lines without colours. On a pseudo-terminal stderr shares the
 * terminal with stdout, so Node's own warnings ("(node:123) ...") are dropped.
 */
function lines (text) {
  return text.replace(ANSI, '').split(/\r?\n/).filter((l) => l.trim() !== '' && !/^\((node:\d+|Use `node)/.test(l))
}

function isJson (line) {
  try {
    return typeof JSON.parse(line) === 'object'
  } catch {
    return false
  }
}

/** Stop as an operator does and check the process and every port are gone. */
async function stopAndCheck (run, stop) {
  stop()
  expect(await run.exited).toEqual({ code: 0, signal: null })
  await pollUntil(() => !alive(run.pid), { timeoutMs: 5000, what: `pid ${run.pid} to be gone` })
  const urls = urlsIn(run.out.stdout.replace(/\r/g, ''))
  expect(urls.length).toBeGreaterThanOrEqual(2)
  for (const url of urls) expect(await refused(url)).toBe(true)
}

describe('npm start logs', () => {
  test('piped: JSON lines exactly as pino writes them, and SIGINT exits 0', async () => {
    const run = await start(ARGS, { env: { LOG_LEVEL: 'info' } })
    await stopAndCheck(run, () => run.child.kill('SIGINT'))
    const all = lines(run.out.stdout)
    const logs = all.filter((l) => !PRINTED.test(l))
    expect(logs.length).toBeGreaterThan(3)
    for (const line of logs) {
      const entry = JSON.parse(line)
      expect(entry).toEqual(expect.objectContaining({ level: expect.any(Number), time: expect.any(Number), pid: run.pid, hostname: expect.any(String), msg: expect.any(String) }))
    }
    const entries = logs.map((l) => JSON.parse(l))
    expect(entries).toContainEqual(expect.objectContaining({ level: 30, component: 'controller', msg: 'controller listening' }))
    expect(entries).toContainEqual(expect.objectContaining({ component: 'frontend', frontendId: 'fe-1', msg: 'front end listening' }))
    // Logged on SIGINT, right before process.exit: it was flushed.
    expect(entries).toContainEqual(expect.objectContaining({ signal: 'SIGINT', msg: 'shutting down' }))
  })

  test('on a terminal: readable lines through pino-pretty, and Ctrl-C exits 0 with nothing left running', async () => {
    const run = await start([...ARGS, '--log-level', 'info'], { pty: true })
    // ^C typed on the pseudo-terminal: its line discipline sends SIGINT to node.
    await stopAndCheck(run, () => run.child.stdin.write('\x03'))
    const raw = run.out.stdout
    expect(raw).toMatch(ANSI) // colours on a terminal
    const logs = lines(raw).map((l) => l.replace(/^\^C/, '')).filter((l) => !PRINTED.test(l))
    expect(logs.length).toBeGreaterThan(3)
    for (const line of logs) expect(isJson(line)).toBe(false)
    const text = logs.join('\n')
    expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \[controller\] controller listening \{"url":"http:/m)
    expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \[appserver app-1\] app server listening/m)
    expect(text).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \[frontend fe-1\] front end listening/m)
    expect(text).toMatch(/INFO: shutting down \{"signal":"SIGINT"\}/)
    expect(text).not.toMatch(/"(pid|hostname|component|serverId|frontendId)"/)
  })

  test('--log-format and LOG_FORMAT override what the output is', async () => {
    const pretty = await start([...ARGS, '--log-format', 'pretty'])
    await stopAndCheck(pretty, () => pretty.child.kill('SIGINT'))
    const prettyLogs = lines(pretty.out.stdout).filter((l) => !PRINTED.test(l))
    expect(prettyLogs.some(isJson)).toBe(false)
    expect(prettyLogs.join('\n')).toMatch(/INFO: \[controller\] controller listening/)
    expect(pretty.out.stdout).not.toMatch(ANSI) // colour only on a terminal

    const json = await start(ARGS, { pty: true, env: { LOG_FORMAT: 'json' } })
    await stopAndCheck(json, () => json.child.stdin.write('\x03'))
    const jsonLogs = lines(json.out.stdout).map((l) => l.replace(/^\^C/, '')).filter((l) => !PRINTED.test(l))
    expect(jsonLogs.length).toBeGreaterThan(3)
    for (const line of jsonLogs) expect([line, isJson(line)]).toEqual([line, true]) // names the line that is not JSON
  })

  test('a bad log format or level gets the usage message and exit code 2', async () => {
    for (const [args, env] of [[['--log-format', 'fancy'], {}], [[], { LOG_FORMAT: 'fancy' }], [['--log-level', 'loud'], {}]]) {
      const child = spawn(process.execPath, [path.join(ROOT, 'bin/cluster.js'), '--port', '0', ...args], { cwd: ROOT, env: cleanEnv(env) })
      let stderr = ''
      child.stderr.on('data', (d) => { stderr += d })
      const { code } = await new Promise((resolve) => child.on('exit', (c) => resolve({ code: c })))
      expect(code).toBe(2)
      expect(stderr).toMatch(/^error: .*(log-format|log format|log level)/)
      expect(stderr).toMatch(/usage: npm start/)
    }
  })
})

describe('createCliLogger', () => {
  function capture () {
    const chunks = []
    const stream = new Writable({ write (c, e, cb) { chunks.push(String(c)); cb() } })
    stream.text = () => chunks.join('')
    return stream
  }

  test('picks pretty exactly when the output is a terminal, unless told', () => {
    const cases = [[{ isTTY: true }, 'pretty'], [{ isTTY: false }, 'json'], [{ isTTY: true, format: 'json' }, 'json'], [{ isTTY: false, format: 'pretty' }, 'pretty']]
    for (const [options, expected] of cases) {
      const destination = capture()
      createCliLogger({ ...options, colorize: false, destination }).child({ component: 'controller' }).info({ generation: 7 }, 'new assignment')
      const out = destination.text()
      if (expected === 'json') expect(JSON.parse(out)).toEqual(expect.objectContaining({ level: 30, component: 'controller', generation: 7, msg: 'new assignment' }))
      else expect(out).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \[controller\] new assignment \{"generation":7\}\n$/)
    }
  })

  test('pretty output strips control characters from messages', () => {
    const destination = capture()
    createCliLogger({ format: 'pretty', colorize: false, destination }).child({ component: 'kv-cache', serverId: 'app-2' }).warn('key \u001b[2Jwiped')
    expect(destination.text()).toMatch(/WARN: \[kv-cache app-2\] key \[2Jwiped\n$/)
  })

  test('names a bad option and what it expected', () => {
    expect(() => createCliLogger({ format: 'xml' })).toThrow(/invalid log format: expected one of pretty, json, got "xml"/)
    expect(() => createCliLogger({ level: 'loud' })).toThrow(/invalid log level: expected one of .*info.*, got "loud"/)
  })
})
