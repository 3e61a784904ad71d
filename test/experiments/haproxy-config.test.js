'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { haproxyConfig, BALANCE } = require('../../bench/experiments/haproxy-config')
const { startHaproxy, haproxyVersion } = require('../../bench/experiments/haproxy-process')
const { call } = require('../helpers/http')
const { createServer } = require('node:http')
const { listen, close } = require('../../core/http')

const servers = [{ id: 'app-1', url: 'http://127.0.0.1:4001' }, { id: 'app-2', url: 'http://127.0.0.1:4002' }]

describe('haproxyConfig', () => {
  test('each contender gets its balancing lines and every server', () => {
    const ch = haproxyConfig({ balance: 'haproxy-ch', port: 9000, servers })
    expect(ch).toMatch(/\n {2}balance url_param key\n {2}hash-type consistent\n/)
    expect(ch).not.toMatch(/hash-balance-factor/)
    expect(ch).toMatch(/bind 127\.0\.0\.1:9000\n/)
    expect(ch).toMatch(/server app-1 127\.0\.0\.1:4001\n {2}server app-2 127\.0\.0\.1:4002\n/)
    expect(haproxyConfig({ balance: 'haproxy-bounded', port: 9000, servers })).toMatch(/hash-type consistent\n {2}hash-balance-factor 125\n/)
    const r2 = haproxyConfig({ balance: 'haproxy-random2', port: 9000, servers })
    expect(r2).toMatch(/balance random\(2\)/)
    expect(r2).not.toMatch(/url_param|hash-type/)
  })

  test('bad options are refused with an error naming the option', () => {
    expect(() => haproxyConfig({ balance: 'roundrobin', port: 1, servers })).toThrow(/invalid balance/)
    expect(() => haproxyConfig({ port: 0, servers })).toThrow(/invalid port/)
    expect(() => haproxyConfig({ port: 1, servers: [] })).toThrow(/invalid servers/)
    expect(() => haproxyConfig({ port: 1, servers: [{ id: 'a b', url: 'http://127.0.0.1:1' }] })).toThrow(/servers\[0\]\.id/)
    expect(() => haproxyConfig({ port: 1, servers: [{ id: 'a', url: 'http://127.0.0.1' }] })).toThrow(/servers\[0\]\.url/)
  })

  test('HAProxy 2.6 accepts every generated configuration (haproxy -c)', () => {
    expect(haproxyVersion()).toMatch(/HAProxy version 2\.\d/)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'haproxy-cfg-test-'))
    try {
      for (const balance of Object.keys(BALANCE)) {
        const file = path.join(dir, `${balance}.cfg`)
        fs.writeFileSync(file, haproxyConfig({ balance, port: 9000, servers, statsPort: 9001 }))
        expect(execFileSync('haproxy', ['-c', '-f', file], { encoding: 'utf8' })).toMatch(/valid/i)
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('startHaproxy', () => {
  const backends = []
  afterEach(async () => { for (const s of backends.splice(0)) await close(s) })

  test('serves through HAProxy with url_param affinity, then stops', async () => {
    const ids = ['app-1', 'app-2', 'app-3']
    const targets = []
    for (const id of ids) {
      const s = createServer((req, res) => { res.setHeader('X-Served-By', id); res.end('ok') })
      backends.push(s)
      targets.push({ id, url: `http://127.0.0.1:${await listen(s, 0, '127.0.0.1')}` })
    }
    const hp = await startHaproxy({ balance: 'haproxy-ch', servers: targets })
    try {
      // The same key always lands on the same server; different keys spread.
      const seen = new Map()
      for (let i = 0; i < 30; i++) {
        const key = `key-${i % 10}`
        const r = await call(`${hp.url}/kv?key=${key}`)
        expect(r.status).toBe(200)
        const by = r.headers['x-served-by']
        if (seen.has(key)) expect(by).toBe(seen.get(key))
        seen.set(key, by)
      }
      expect(new Set(seen.values()).size).toBeGreaterThan(1)
    } finally {
      await hp.stop()
    }
    await expect(call(`${hp.url}/kv?key=x`)).rejects.toThrow()
  })
})
