'use strict'

// The linters, when their binaries are installed: `terraform fmt -check`
// (works offline) and tflint with its bundled terraform ruleset, configured
// by terraform/.tflint.hcl. .ci/install-tflint.sh installs tflint and runs
// it in CI; this test repeats the run so a local `npx jest` catches the same
// findings. Each is skipped, visibly, when its binary is missing.

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { ROOT, TF_DIR, TF_ENV, terraformBin, tflintBin } = require('./terraform-config')

test('tflint is configured with the bundled terraform ruleset, every rule on', () => {
  const config = fs.readFileSync(path.join(TF_DIR, '.tflint.hcl'), 'utf8')
  expect(config).toMatch(/plugin "terraform" \{[^}]*enabled = true[^}]*preset\s+= "all"/s)
  // A `source` would make tflint download the plugin instead of using the bundled one.
  expect(config).not.toMatch(/^\s*source\s*=/m)
  const script = fs.readFileSync(path.join(ROOT, '.ci/install-tflint.sh'), 'utf8')
  expect(script).toMatch(/TFLINT_VERSION="\$\{TFLINT_VERSION:-v\d+\.\d+\.\d+\}"/)
  expect(script).toMatch(/--minimum-failure-severity=notice/)
})

;(terraformBin() ? test : test.skip)('terraform fmt -check -recursive finds nothing to reformat', () => {
  const r = spawnSync(terraformBin(), ['fmt', '-check', '-recursive', '-diff', '-no-color', TF_DIR], { env: TF_ENV, encoding: 'utf8' })
  expect(r.stdout).toBe('')
  expect(r.status).toBe(0)
})

// The root module, and each local module with the same configuration
// (tflint lints one directory at a time; a module is checked as its own).
const MODULE_DIRS = [TF_DIR, ...fs.readdirSync(path.join(TF_DIR, 'modules')).map((m) => path.join(TF_DIR, 'modules', m))]

;(tflintBin() ? test.each : test.skip.each)(MODULE_DIRS.map((d) => path.relative(ROOT, d)))('tflint reports nothing in %s', (dir) => {
  const r = spawnSync(tflintBin(), ['--chdir', path.join(ROOT, dir), '--config', path.join(TF_DIR, '.tflint.hcl'), '--format', 'compact', '--no-color', '--minimum-failure-severity=notice'], {
    env: { ...process.env, TFLINT_PLUGIN_DIR: path.join(process.env.TFLINT_CACHE_DIR || path.join(ROOT, '.tflint-cache'), 'plugins') },
    encoding: 'utf8',
    timeout: 60000
  })
  expect(r.stdout.trim()).toBe('')
  expect(r.stderr.trim()).toBe('')
  expect(r.status).toBe(0)
})
