'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { haproxyConfig } = require('../../bench/proxies/haproxy-config')
const { nginxConfig } = require('../../bench/proxies/nginx-config')
const { missingReason } = require('../../bench/proxies/tools')

const backend = 'http://127.0.0.1:4001'

/** `test`, or a skipped test whose name says which binary is missing and how to install it. */
function testWith (binary) {
  const reason = missingReason(binary)
  return reason ? (name, fn) => test.skip(`${name} (skipped: ${reason})`, fn) : test
}

describe('haproxyConfig', () => {
  test('one thread per nbthread, reused keep-alive connections to the one backend, no logging', () => {
    const cfg = haproxyConfig({ port: 9000, backend, threads: 2 })
    expect(cfg).toMatch(/\n {2}nbthread 2\n/)
    expect(cfg).toMatch(/\n {2}option http-keep-alive\n/)
    expect(cfg).toMatch(/\n {2}http-reuse always\n/)
    expect(cfg).toMatch(/\n {2}bind 127\.0\.0\.1:9000\n/)
    expect(cfg).toMatch(/\n {2}server noop 127\.0\.0\.1:4001\n/)
    expect(cfg).not.toMatch(/^\s*(log|option httplog)\b/m)
    expect(haproxyConfig({ port: 9000, backend })).toMatch(/\n {2}nbthread 1\n/)
  })

  test('bad options are refused with an error naming the option', () => {
    expect(() => haproxyConfig({ port: 0, backend })).toThrow(/invalid port/)
    expect(() => haproxyConfig({ port: 1, backend: 'http://127.0.0.1' })).toThrow(/invalid backend/)
    expect(() => haproxyConfig({ port: 1, backend: 'http://a b:1' })).toThrow(/invalid backend/)
    expect(() => haproxyConfig({ port: 1, backend, threads: 0 })).toThrow(/invalid threads/)
    expect(() => haproxyConfig({ port: 1, backend, host: 'a;b' })).toThrow(/invalid host/)
  })

  testWith('haproxy')('haproxy -c accepts the generated configuration', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-haproxy-cfg-'))
    try {
      for (const threads of [1, 2]) {
        const file = path.join(dir, `haproxy-${threads}.cfg`)
        fs.writeFileSync(file, haproxyConfig({ port: 9000, backend, threads }))
        const r = spawnSync('haproxy', ['-c', '-f', file], { encoding: 'utf8' })
        expect({ status: r.status, out: r.stdout + r.stderr }).toEqual({ status: 0, out: expect.stringMatching(/valid/i) })
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('nginxConfig', () => {
  test('worker_processes, upstream keep-alive with HTTP/1.1 and no Connection header, no logging', () => {
    const cfg = nginxConfig({ port: 9000, backend, workers: 2, dir: '/tmp/x' })
    expect(cfg).toMatch(/^daemon off;$/m)
    expect(cfg).toMatch(/^worker_processes 2;$/m)
    expect(cfg).toMatch(/^pid \/tmp\/x\/nginx\.pid;$/m)
    expect(cfg).toMatch(/upstream noop {\n {4}server 127\.0\.0\.1:4001;\n {4}keepalive 64;/)
    expect(cfg).toMatch(/^ {6}proxy_http_version 1\.1;$/m)
    expect(cfg).toMatch(/^ {6}proxy_set_header Connection "";$/m)
    expect(cfg).toMatch(/^ {2}access_log off;$/m)
    expect(cfg).toMatch(/^ {4}listen 127\.0\.0\.1:9000;$/m)
  })

  test('bad options are refused with an error naming the option', () => {
    expect(() => nginxConfig({ port: 1, backend, dir: 'relative' })).toThrow(/invalid dir/)
    expect(() => nginxConfig({ port: 1, backend, dir: '/tmp/a;b' })).toThrow(/invalid dir/)
    expect(() => nginxConfig({ port: 1, backend, dir: '/tmp', workers: 1.5 })).toThrow(/invalid workers/)
    expect(() => nginxConfig({ port: 70000, backend, dir: '/tmp' })).toThrow(/invalid port/)
    expect(() => nginxConfig({ port: 1, backend: 'https://127.0.0.1:1', dir: '/tmp' })).toThrow(/invalid backend/)
  })

  testWith('nginx')('nginx -t accepts the generated configuration', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-nginx-cfg-'))
    try {
      for (const workers of [1, 2]) {
        const file = path.join(dir, `nginx-${workers}.conf`)
        fs.writeFileSync(file, nginxConfig({ port: 9000, backend, workers, dir }))
        // The same flags as bench/proxies/proxy-process.js: prefix and early error log in the temp dir.
        const r = spawnSync('nginx', ['-t', '-p', `${dir}/`, '-e', 'stderr', '-c', file], { encoding: 'utf8' })
        expect({ status: r.status, out: r.stderr }).toEqual({ status: 0, out: expect.stringMatching(/test is successful/) })
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
