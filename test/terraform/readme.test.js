'use strict'

// terraform/README.md is a procedure people follow: every variable, output,
// file and port it names must exist and be the real one.

const fs = require('node:fs')
const path = require('node:path')
const { DEFAULT_PORTS } = require('../../core/settings')
const { ROOT, TF_DIR, loadConfig } = require('./terraform-config')

let model
let readme

beforeAll(async () => {
  model = await loadConfig()
  readme = fs.readFileSync(path.join(TF_DIR, 'README.md'), 'utf8')
})

test('every variable the README names is declared', () => {
  const named = new Set([
    ...[...readme.matchAll(/-var ([a-z_]+)=/g)].map((m) => m[1]),
    ...[...readme.matchAll(/`([a-z][a-z0-9_]+)`/g)].map((m) => m[1]).filter((n) => n.includes('_') && !n.startsWith('chopper_'))
  ])
  // Resource types count too (`random_password`), as the README names resources.
  const known = new Set([...Object.keys(model.variable), ...Object.keys(model.output), ...Object.keys(model.resource)])
  expect([...named].filter((n) => !known.has(n))).toEqual([])
  expect(named.size).toBeGreaterThan(15)
})

test('every output the README reads exists', () => {
  const outputs = [...readme.matchAll(/terraform output (?:-raw |-json )?([a-z_]+)/g)].map((m) => m[1])
  expect(outputs.length).toBeGreaterThanOrEqual(3)
  expect(outputs.filter((o) => !Object.hasOwn(model.output, o))).toEqual([])
})

test('every repository file the README points to exists', () => {
  const files = [...readme.matchAll(/\b((?:loadgen|wrk2-scripts|core|apps|controller|docs)\/[\w./-]+\.(?:js|lua|yaml|json|md))\b/g)].map((m) => m[1])
  const specs = [...readme.matchAll(/`((?:kv|compute)-\d+keys-[\w{},-]+)`/g)].map((m) => m[1])
  const expanded = specs.flatMap((s) => {
    const brace = /^(.*)\{([^}]+)\}$/.exec(s)
    return brace ? brace[2].split(',').map((x) => `${brace[1]}${x}`) : [s]
  }).map((s) => `loadgen/examples/${s}.yaml`)
  expect(files.length).toBeGreaterThanOrEqual(3)
  expect(expanded.length).toBeGreaterThanOrEqual(5)
  expect([...files, ...expanded].filter((f) => !fs.existsSync(path.join(ROOT, f)))).toEqual([])
})

test('the README\'s port table is DEFAULT_PORTS', () => {
  expect(readme).toContain(`| controller ${DEFAULT_PORTS.controller} |`)
  expect(readme).toContain(`| front end ${DEFAULT_PORTS.frontendControl} |`)
  expect(readme).toContain(`| app server ${DEFAULT_PORTS.app} |`)
  expect(readme).toContain(`| app server ${DEFAULT_PORTS.appControl} |`)
  expect(readme).toContain(`front ends' data port (${DEFAULT_PORTS.frontend})`)
})
