'use strict'
/* eslint-disable no-template-curly-in-string -- @cdktf/hcl2json returns HCL expressions as "${...}" strings */

// What `terraform validate` would catch about names, checked offline (the
// provider registry is unreachable here): every variable, local, resource,
// data source and template referenced is declared, and every declared
// variable, local and template is used.

const fs = require('node:fs')
const path = require('node:path')
const { TF_DIR, TEMPLATE_DIR, loadConfig, expressions, references, templateCalls, templatePlaceholders } = require('./terraform-config')

let model
let refs

beforeAll(async () => {
  model = await loadConfig()
  refs = references(model)
})

const declared = (kind) => new Set(Object.entries(model[kind]).flatMap(([type, byName]) => Object.keys(byName).map((n) => `${type}.${n}`)))
const undeclaredOf = (kind, names) => [...refs[kind].entries()].filter(([k]) => !names.has(k)).map(([k, where]) => `${k} (at ${where[0]})`)

test('the configuration parses and has the expected shape', () => {
  expect(Object.keys(model.files)).toEqual(expect.arrayContaining(['main.tf', 'variables.tf', 'outputs.tf', 'versions.tf', 'locals.tf']))
  expect(Object.keys(model.variable).length).toBeGreaterThan(20)
  expect(Object.keys(model.resource)).toEqual(expect.arrayContaining([
    'aws_vpc', 'aws_subnet', 'aws_lb', 'aws_launch_template', 'aws_autoscaling_group', 'aws_instance', 'aws_dynamodb_table', 'aws_iam_role'
  ]))
})

test('every var.x referenced is declared, and every declared variable is used', () => {
  const names = new Set(Object.keys(model.variable))
  expect(undeclaredOf('var', names)).toEqual([])
  const unused = [...names].filter((n) => !refs.var.has(n))
  expect(unused).toEqual([])
})

test('every local referenced is declared, and every declared local is used', () => {
  const names = new Set(Object.keys(model.locals))
  expect(undeclaredOf('local', names)).toEqual([])
  expect([...names].filter((n) => !refs.local.has(n))).toEqual([])
})

test('every resource and data source referenced exists', () => {
  expect(refs.resource.size).toBeGreaterThan(20)
  expect(undeclaredOf('resource', declared('resource'))).toEqual([])
  expect(undeclaredOf('data', declared('data'))).toEqual([])
  // Data sources are only worth their API calls when something reads them.
  expect([...declared('data')].filter((d) => !refs.data.has(d))).toEqual([])
})

test('count/for_each resources are indexed and singletons are not', () => {
  // `aws_instance.controller.id` on a counted resource (or `[0]` on a single
  // one) is a plan-time error that only validate would otherwise find.
  const problems = []
  // depends_on names whole resources, so it is exempt.
  const all = Object.values(model.files).flatMap((json) => expressions(json)).filter(({ where }) => !where.includes('depends_on'))
  for (const { where, text } of all) {
    for (const m of text.matchAll(/(?<![\w.])(aws_[a-z0-9_]+)\.([A-Za-z_][\w-]*)(\[|\.|\b)/g)) {
      const block = model.resource[m[1]] && model.resource[m[1]][m[2]]
      if (!block) continue
      const multi = Object.hasOwn(block, 'count') || Object.hasOwn(block, 'for_each')
      const indexed = m[3] === '['
      // `resource[*]` splats are fine for counted resources.
      if (multi && !indexed) problems.push(`${m[1]}.${m[2]} used without an index at ${where}`)
      if (!multi && indexed) problems.push(`${m[1]}.${m[2]} indexed but has no count/for_each at ${where}`)
    }
  }
  expect(problems).toEqual([])
})

test('every template exists, gets exactly the variables it interpolates, and every template is used', () => {
  const calls = templateCalls(model)
  expect(calls.length).toBeGreaterThanOrEqual(5)
  for (const { template, varsLocal } of calls) {
    const file = path.join(TF_DIR, template)
    expect(fs.existsSync(file)).toBe(true)
    const wanted = [...templatePlaceholders(fs.readFileSync(file, 'utf8'))].sort()
    const vars = model.locals[varsLocal]
    expect(vars && typeof vars === 'object').toBe(true)
    expect({ template, vars: Object.keys(vars).sort() }).toEqual({ template, vars: wanted })
  }
  const used = new Set(calls.map((c) => path.basename(c.template)))
  const files = fs.readdirSync(TEMPLATE_DIR).filter((f) => f.endsWith('.tftpl'))
  expect(files.filter((f) => !used.has(f))).toEqual([])
})

test('every output is described and the required outputs exist', () => {
  for (const name of ['public_url', 'controller_private_address', 'table_name']) expect(model.output).toHaveProperty(name)
  for (const [name, o] of Object.entries(model.output)) expect({ name, description: typeof o.description }).toEqual({ name, description: 'string' })
  expect(model.output.public_url.value).toMatch(/^http:\/\/\$\{aws_lb\.frontend\.dns_name\}$/)
  expect(model.output.table_name.value).toBe('${aws_dynamodb_table.kv.name}')
})

test('the aws provider is pinned to ~> 5.0 and terraform to 1.x', () => {
  const tf = model.terraform[0]
  expect(tf.required_version).toMatch(/^>= 1\.\d+/)
  expect(tf.required_providers[0].aws).toEqual({ source: 'hashicorp/aws', version: '~> 5.0' })
  expect(model.provider.aws.region).toBe('${var.region}')
})
