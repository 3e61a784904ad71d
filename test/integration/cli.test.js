'use strict'

const { spawn } = require('node:child_process')
const path = require('node:path')
const { call } = require('../helpers/http')
const { pollUntil } = require('../../core/poll')

const BIN = path.join(__dirname, '../../bin/cluster.js')

function run (args) {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, LOG_LEVEL: 'warn' } })
  const out = { stdout: '', stderr: '' }
  child.stdout.on('data', (d) => { out.stdout += d })
  child.stderr.on('data', (d) => { out.stderr += d })
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  return { child, out, exited }
}

describe('npm start (bin/cluster.js)', () => {
  test('boots the cluster, prints every URL, serves, and stops cleanly on SIGINT', async () => {
    const { child, out, exited } = run(['--port', '0', '--period', '200', '--servers', '2', '--frontends', '2'])
    try {
      await pollUntil(() => out.stdout.includes('ready'), { timeoutMs: 20000, what: 'cluster ready line' })
      const frontends = [...out.stdout.matchAll(/^frontend\s+(\S+)/gm)].map((m) => m[1])
      expect(frontends).toHaveLength(2)
      expect(out.stdout).toMatch(/^controller\s+http:\/\/127\.0\.0\.1:\d+/m)
      expect([...out.stdout.matchAll(/^appserver/gm)]).toHaveLength(2)
      for (const fe of frontends) {
        const r = await call(`${fe}/compute?key=hello&n=10`)
        expect(r.status).toBe(200)
        expect(r.headers['x-served-by']).toMatch(/^app-\d$/)
      }
    } finally {
      child.kill('SIGINT')
    }
    expect(await exited).toEqual({ code: 0, signal: null })
  })

  test('--controllers 2 runs a leader and a standby; the standby names the leader', async () => {
    const { child, out, exited } = run(['--port', '0', '--period', '60000', '--servers', '1', '--frontends', '1', '--controllers', '2'])
    try {
      await pollUntil(() => out.stdout.includes('ready'), { timeoutMs: 20000, what: 'cluster ready line' })
      const leader = out.stdout.match(/^controller\s+(\S+) \(leader\)/m)[1]
      const standby = out.stdout.match(/^controller\s+(\S+) \(standby\)/m)[1]
      expect((await call(`${leader}/v1/status`)).body.role).toBe('leader')
      const r = await call(`${standby}/v1/assignment`)
      expect(r.status).toBe(503)
      expect(r.headers['x-chopper-leader']).toBe(leader)
      const fe = out.stdout.match(/^frontend\s+(\S+)/m)[1]
      expect((await call(`${fe}/compute?key=hello&n=10`)).status).toBe(200)
    } finally {
      child.kill('SIGINT')
    }
    expect(await exited).toEqual({ code: 0, signal: null })
  })

  test('a bad flag gets the usage message and exit code 2', async () => {
    for (const args of [['--bogus'], ['--servers', 'many'], ['--strategy', 'random'], ['--controllers', '0'], ['--quiet-below', '2'], ['--quiet-below', 'x']]) {
      const { out, exited } = run(args)
      expect((await exited).code).toBe(2)
      expect(out.stderr).toMatch(/^error: /)
      expect(out.stderr).toMatch(/usage: npm start/)
    }
  })
})
