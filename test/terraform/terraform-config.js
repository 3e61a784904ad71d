'use strict'

/**
 * Offline model of terraform/: every .tf parsed with @cdktf/hcl2json, plus
 * the helpers the terraform tests share (reference extraction, a resolver
 * for literal and simple-reference expressions, template rendering, and
 * runners for the terraform and tflint binaries when they are installed).
 *
 * hcl2json keeps expressions as strings wrapped in "${...}"; literals stay
 * JSON values. Blocks appear as arrays (one element per block).
 */

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync, spawnSync } = require('node:child_process')
const { parse } = require('@cdktf/hcl2json')

const ROOT = path.resolve(__dirname, '..', '..')
const TF_DIR = path.join(ROOT, 'terraform')
const TEMPLATE_DIR = path.join(TF_DIR, 'templates')

const IDENT = '[A-Za-z_][A-Za-z0-9_-]*'
// Resource types of the providers the configuration uses.
const RESOURCE_TYPE = '(?:aws|random)_[a-z0-9_]+'
// (?<![\w.]) keeps `data.aws_ami.base` from also counting as resource
// `aws_ami.base`, and `module.m.aws_x.y` from counting as `aws_x.y`.
const REF_PATTERNS = {
  var: new RegExp(`(?<![\\w.])var\\.(${IDENT})`, 'g'),
  local: new RegExp(`(?<![\\w.])local\\.(${IDENT})`, 'g'),
  data: new RegExp(`(?<![\\w.])data\\.([a-z0-9_]+)\\.(${IDENT})`, 'g'),
  resource: new RegExp(`(?<![\\w.])(${RESOURCE_TYPE})\\.(${IDENT})`, 'g'),
  module: new RegExp(`(?<![\\w.])module\\.(${IDENT})\\.(${IDENT})`, 'g')
}

function addUnique (table, key, value, file) {
  if (Object.hasOwn(table, key)) throw new Error(`${key} is declared twice (second time in ${file})`)
  table[key] = value
}

/**
 * Parse every .tf of a module directory (terraform/ by default) into one
 * model. Local child modules (`source = "./..."`) are parsed too, once per
 * directory: `modules[call]` is the model of the module that call uses.
 * @returns {Promise<{ dir: string, files: object, variable: object, locals: object, resource: object, data: object, output: object, module: object, moved: object[], modules: object, terraform: object[], provider: object }>}
 */
async function loadConfig (dir = TF_DIR, cache = new Map()) {
  if (cache.has(dir)) return cache.get(dir)
  const model = { dir, files: {}, variable: {}, locals: {}, resource: {}, data: {}, output: {}, module: {}, moved: [], modules: {}, terraform: [], provider: {} }
  cache.set(dir, model)
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.tf')).sort()
  for (const file of files) {
    const json = await parse(file, fs.readFileSync(path.join(dir, file), 'utf8'))
    model.files[file] = json
    for (const [name, blocks] of Object.entries(json.variable || {})) addUnique(model.variable, name, blocks[0], file)
    for (const block of json.locals || []) {
      for (const [name, value] of Object.entries(block)) addUnique(model.locals, name, value, file)
    }
    for (const kind of ['resource', 'data']) {
      for (const [type, byName] of Object.entries(json[kind] || {})) {
        model[kind][type] ??= {}
        for (const [name, blocks] of Object.entries(byName)) addUnique(model[kind][type], name, blocks[0], `${file} (${type})`)
      }
    }
    for (const [name, blocks] of Object.entries(json.output || {})) addUnique(model.output, name, blocks[0], file)
    for (const [name, blocks] of Object.entries(json.module || {})) addUnique(model.module, name, blocks[0], file)
    for (const [name, blocks] of Object.entries(json.provider || {})) addUnique(model.provider, name, blocks[0], file)
    model.moved.push(...(json.moved || []).map((m) => ({ ...m, file })))
    model.terraform.push(...(json.terraform || []))
  }
  for (const [name, call] of Object.entries(model.module)) {
    if (/^\.\.?\//.test(call.source)) model.modules[name] = await loadConfig(path.resolve(dir, call.source), cache)
  }
  return model
}

/** Each distinct local module the configuration calls: [{ source, model, calls }]. */
function childModules (model) {
  const bySource = new Map()
  for (const [name, child] of Object.entries(model.modules)) {
    const source = model.module[name].source
    if (!bySource.has(source)) bySource.set(source, { source, model: child, calls: [] })
    bySource.get(source).calls.push(name)
  }
  return [...bySource.values()]
}

/** Every string holding an expression, with a readable location. */
function expressions (node, where = '', out = []) {
  if (typeof node === 'string') {
    if (node.includes('${')) out.push({ where, text: node })
  } else if (Array.isArray(node)) {
    node.forEach((v, i) => expressions(v, `${where}[${i}]`, out))
  } else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) expressions(v, where ? `${where}.${k}` : k, out)
  }
  return out
}

/**
 * References made anywhere in the configuration.
 * @returns {{ var: Map<string,string[]>, local: Map<string,string[]>, data: Map<string,string[]>, resource: Map<string,string[]> }}
 *   name (or `type.name`) -> locations
 */
function references (model) {
  const refs = { var: new Map(), local: new Map(), data: new Map(), resource: new Map(), module: new Map() }
  for (const [file, json] of Object.entries(model.files)) {
    // moved blocks name addresses that no longer exist: they are not references.
    const { moved, ...rest } = json
    for (const { where, text } of expressions(rest, file)) {
      for (const [kind, re] of Object.entries(REF_PATTERNS)) {
        for (const m of text.matchAll(re)) {
          const key = m.length > 2 && m[2] !== undefined ? `${m[1]}.${m[2]}` : m[1]
          if (!refs[kind].has(key)) refs[kind].set(key, [])
          refs[kind].get(key).push(where)
        }
      }
    }
  }
  return refs
}

class Unresolved {
  constructor (expr) { this.expr = expr }
  toString () { return `<${this.expr}>` }
}

/**
 * Resolve an hcl2json value as far as it is made of literals, variable
 * defaults, locals and literal resource attributes. A string template like
 * "http://${aws_instance.x[0].private_ip}:${var.port}" resolves piecewise;
 * anything else (function calls, for expressions, computed attributes)
 * becomes an Unresolved marker, so callers can insist on a concrete value.
 * @param {object} model from loadConfig
 * @param {*} value an hcl2json value
 * @param {Record<string,*>} [overrides] variable values replacing defaults
 */
function resolve (model, value, overrides = {}, depth = 0) {
  if (depth > 20) throw new Error('reference cycle while resolving')
  if (Array.isArray(value)) return value.map((v) => resolve(model, v, overrides, depth + 1))
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(model, v, overrides, depth + 1)]))
  }
  if (typeof value !== 'string' || !value.includes('${')) return value
  const single = /^\$\{([\w.[\]-]+)\}$/.exec(value)
  if (single) return resolveRef(model, single[1], overrides, depth)
  if (/\$\{[^}]*[^\w.[\]}-][^}]*\}/.test(value)) return new Unresolved(value)
  return value.replace(/\$\{([\w.[\]-]+)\}/g, (_, ref) => String(resolveRef(model, ref, overrides, depth)))
}

function resolveRef (model, ref, overrides, depth) {
  const parts = ref.replace(/\[\d+\]/g, '').split('.')
  if (parts[0] === 'var') {
    if (!Object.hasOwn(model.variable, parts[1])) throw new Error(`undeclared variable ${ref}`)
    return Object.hasOwn(overrides, parts[1]) ? overrides[parts[1]] : model.variable[parts[1]].default
  }
  if (parts[0] === 'local') {
    if (!Object.hasOwn(model.locals, parts[1])) throw new Error(`undeclared local ${ref}`)
    let v = resolve(model, model.locals[parts[1]], overrides, depth + 1)
    for (const p of parts.slice(2)) v = v && typeof v === 'object' && !(v instanceof Unresolved) ? v[p] : new Unresolved(ref)
    return v === undefined ? new Unresolved(ref) : v
  }
  if (parts[0] === 'path' && parts[1] === 'module') return TF_DIR
  if (/^(aws|random)_/.test(parts[0]) && parts.length === 3) {
    const block = model.resource[parts[0]] && model.resource[parts[0]][parts[1]]
    if (!block) throw new Error(`undeclared resource ${ref}`)
    if (Object.hasOwn(block, parts[2])) return resolve(model, block[parts[2]], overrides, depth + 1)
  }
  return new Unresolved(ref)
}

/** Placeholders a .tftpl file interpolates. Only bare identifiers are allowed, which keeps the JS renderer exact. */
function templatePlaceholders (text) {
  const stripped = text.replace(/\$\$\{/g, '').replace(/%%\{/g, '')
  if (/%\{/.test(stripped)) throw new Error('template directives (%{...}) are not supported by the offline renderer')
  const names = new Set()
  for (const m of stripped.matchAll(/\$\{([^}]*)\}/g)) {
    if (!/^[A-Za-z_]\w*$/.test(m[1])) throw new Error(`template interpolation \${${m[1]}} is not a bare identifier`)
    names.add(m[1])
  }
  return names
}

/** Render a template the way templatefile() does for bare-identifier placeholders. */
function renderTemplate (text, vars) {
  templatePlaceholders(text)
  return text.replace(/\$\$\{|%%\{|\$\{([A-Za-z_]\w*)\}/g, (m, name) => {
    if (m === '$${') return '${'
    if (m === '%%{') return '%{'
    if (!Object.hasOwn(vars, name)) throw new Error(`template variable ${name} not supplied`)
    return String(vars[name])
  })
}

/** templatefile() calls in locals: [{ local, template, varsLocal }]. */
function templateCalls (model) {
  const calls = []
  const re = /templatefile\("\$\{path\.module\}\/([^"]+)",\s*local\.(\w+)\)/g
  for (const [name, value] of Object.entries(model.locals)) {
    if (typeof value !== 'string') continue
    for (const m of value.matchAll(re)) calls.push({ local: name, template: m[1], varsLocal: m[2] })
  }
  return calls
}

function which (bin, extraDirs = []) {
  const dirs = [...extraDirs, ...(process.env.PATH || '').split(path.delimiter)]
  for (const d of dirs) {
    const p = path.join(d, bin)
    try {
      fs.accessSync(p, fs.constants.X_OK)
      return p
    } catch {}
  }
  return null
}

const terraformBin = () => which('terraform')
// Where .ci/install-tflint.sh caches the binary: $TFLINT_CACHE_DIR/bin, else .tflint-cache/bin.
const tflintBin = () => which('tflint', [
  ...(process.env.TFLINT_CACHE_DIR ? [path.join(process.env.TFLINT_CACHE_DIR, 'bin')] : []),
  path.join(ROOT, '.tflint-cache', 'bin')
])

const TF_ENV = {
  ...process.env,
  TF_CLI_CONFIG_FILE: '/dev/null', // no ~/.terraformrc warnings
  TF_IN_AUTOMATION: '1',
  CHECKPOINT_DISABLE: '1', // no version check over the network
  NO_COLOR: '1'
}

/**
 * A scratch root module holding copies of variables.tf and locals.tf (pure:
 * no providers needed) plus `extra` HCL; `run(args)` runs terraform in it.
 * Terraform itself then evaluates the validations and the locals offline.
 * `from` and `files` copy other provider-free files instead (a child
 * module's variables.tf, say).
 */
function scratchModule (extra = '', { from = TF_DIR, files = ['variables.tf', 'locals.tf'] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'chopper-tf-'))
  for (const f of files) fs.copyFileSync(path.join(from, f), path.join(dir, f))
  fs.writeFileSync(path.join(dir, 'scratch.tf'), extra)
  const run = (args) => spawnSync(terraformBin(), args, { cwd: dir, env: TF_ENV, encoding: 'utf8', timeout: 60000 })
  const init = run(['init', '-input=false', '-no-color', '-backend=false'])
  if (init.status !== 0) throw new Error(`terraform init failed: ${init.stderr}`)
  return {
    dir,
    run,
    /** `terraform apply` with these -var flags; returns the outputs' values. */
    outputs (vars = {}) {
      const flags = Object.entries(vars).flatMap(([k, v]) => ['-var', `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`])
      const apply = run(['apply', '-auto-approve', '-input=false', '-no-color', ...flags])
      if (apply.status !== 0) throw new Error(`terraform apply failed: ${apply.stderr}`)
      const out = JSON.parse(execFileSync(terraformBin(), ['output', '-json'], { cwd: dir, env: TF_ENV, encoding: 'utf8' }))
      return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, v.value]))
    },
    remove () { fs.rmSync(dir, { recursive: true, force: true }) }
  }
}

module.exports = {
  ROOT,
  TF_DIR,
  TEMPLATE_DIR,
  TF_ENV,
  RESOURCE_TYPE,
  Unresolved,
  loadConfig,
  childModules,
  expressions,
  references,
  resolve,
  templatePlaceholders,
  renderTemplate,
  templateCalls,
  terraformBin,
  tflintBin,
  scratchModule
}
