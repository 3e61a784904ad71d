'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFile } = require('node:child_process')
const { promisify } = require('node:util')

const SCRIPT = path.join(__dirname, '..', '..', 'bench', 'control-http.js')

describe('control-http bench (node bench/control-http.js)', () => {
  test('a tiny run pushes through both clients (a refused push fails it) and writes both files', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'control-http-'))
    try {
      const { stdout } = await promisify(execFile)(process.execPath, [SCRIPT, '--pushes', '20', '--targets', '3', '--slices', '8', '--rounds', '2', '--out', out], { timeout: 60000 })
      expect(stdout).toMatch(/round 2 undici CPU/)
      const json = JSON.parse(fs.readFileSync(path.join(out, 'control-http.json'), 'utf8'))
      expect(json.rounds).toHaveLength(2)
      for (const client of ['axios', 'undici']) {
        expect(json.summary[client].cpuUsPerPush).toBeGreaterThan(0)
        expect(json.summary[client].wallUsPerPush).toBeGreaterThan(0)
      }
      expect(json.axiosOverUndiciCpu).toBeCloseTo(json.summary.axios.cpuUsPerPush / json.summary.undici.cpuUsPerPush, 6)
      expect(fs.readFileSync(path.join(out, 'control-http.md'), 'utf8')).toMatch(/\| axios +\|/)
    } finally {
      fs.rmSync(out, { recursive: true, force: true })
    }
  })
})
