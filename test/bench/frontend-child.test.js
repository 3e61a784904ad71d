'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { startNodeChild } = require('../../bench/proxies/node-child')
const { startBackend } = require('../../bench/proxies/contenders')
const { probe } = require('../../bench/proxies/probe')

const CHILD = path.join(__dirname, '..', '..', 'bench', 'proxies', 'frontend-child.js')

describe('startNodeChild', () => {
  let dir
  beforeEach(() => { dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-node-child-')) })
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }))

  function script (body) {
    const file = path.join(dir, `child-${Math.random().toString(36).slice(2)}.js`)
    fs.writeFileSync(file, body)
    return file
  }

  test('takes the first line that is only a port, after log lines, and stops the child', async () => {
    const file = script(`
      process.stdout.write('{"level":30,"msg":"worker listening"}\\n')
      setTimeout(() => process.stdout.write('4321\\n'), 20)
      setInterval(() => {}, 1000)
    `)
    const child = await startNodeChild(file)
    expect(child.url).toBe('http://127.0.0.1:4321')
    await child.stop()
    expect(() => process.kill(child.pid, 0)).toThrow()
  })

  test('a child that exits 2 is marked unavailable, with its message', async () => {
    const file = script('process.stderr.write("error: no cluster mode\\n"); process.exit(2)')
    await expect(startNodeChild(file)).rejects.toMatchObject({ unavailable: true, message: expect.stringMatching(/exited \(2\): error: no cluster mode/) })
  })
})

describe('frontend-child.js', () => {
  const stops = []
  afterEach(async () => { for (const stop of stops.splice(0).reverse()) await stop() })

  test.each([
    ['one process', []],
    ['--workers 2', ['--workers', '2']]
  ])('%s forwards ?key=bench to the backend once it has printed its port', async (name, extra) => {
    const backend = await startBackend()
    stops.push(backend.stop)
    const fe = await startNodeChild(CHILD, ['--port', '0', '--backend', backend.url, ...extra])
    stops.push(fe.stop)
    for (let i = 0; i < 10; i++) expect(await probe(`${fe.url}/x?key=bench`)).toBe(200)
  })

  test('a bad flag exits 2, so the bench reports the contender as not available', async () => {
    await expect(startNodeChild(CHILD, ['--backend', 'ftp://x'])).rejects.toMatchObject({ unavailable: true })
  })
})
