'use strict'
/* eslint-disable no-template-curly-in-string -- @cdktf/hcl2json returns HCL expressions as "${...}" strings */

// What `terraform validate` would catch about names, checked offline (the
// provider registry is unreachable here): every variable, local, resource,
// data source, module output and template referenced is declared, and every
// declared variable, local and template is used. The root module and each
// local module it calls are checked alike; module calls pass exactly the
// module's inputs, and moved blocks lead to resources that exist.

const fs = require('node:fs')
const path = require('node:path')
const {
  TF_DIR, TEMPLATE_DIR, RESOURCE_TYPE, loadConfig, childModules, expressions, references, templateCalls, templatePlaceholders
} = require('./terraform-config')

let root
let configs

beforeAll(async () => {
  root = await loadConfig()
  configs = [['root', root], ...childModules(root).map((m) => [m.source, m.model])]
})

const declared = (model, kind) => new Set(Object.entries(model[kind]).flatMap(([type, byName]) => Object.keys(byName).map((n) => `${type}.${n}`)))
const undeclaredOf = (refs, kind, names) => [...refs[kind].entries()].filter(([k]) => !names.has(k)).map(([k, where]) => `${k} (at ${where[0]})`)
/** Run `check(model, refs)` for the root module and every local module it calls. */
const eachModule = (check) => {
  expect(configs.length).toBeGreaterThanOrEqual(2)
  for (const [name, model] of configs) {
    try {
      check(model, references(model))
    } catch (err) {
      err.message = `in ${name}: ${err.message}`
      throw err
    }
  }
}
// Arguments of a module block that are Terraform's, not the module's inputs.
const META_ARGUMENTS = new Set(['source', 'version', 'count', 'for_each', 'providers', 'depends_on'])

test('the configuration parses and has the expected shape', () => {
  expect(Object.keys(root.files)).toEqual(expect.arrayContaining(['main.tf', 'variables.tf', 'outputs.tf', 'versions.tf', 'locals.tf']))
  expect(Object.keys(root.variable).length).toBeGreaterThan(20)
  expect(Object.keys(root.resource)).toEqual(expect.arrayContaining([
    'aws_vpc', 'aws_subnet', 'aws_lb', 'aws_instance', 'aws_dynamodb_table', 'aws_iam_role', 'aws_ssm_parameter', 'random_password'
  ]))
  // The member groups are the member module's.
  expect(Object.keys(root.modules.frontend.resource).sort()).toEqual(['aws_autoscaling_group', 'aws_launch_template'])
  for (const [name, model] of configs) {
    expect({ name, files: Object.keys(model.files) }).toEqual({ name, files: expect.arrayContaining(['main.tf', 'variables.tf', 'outputs.tf', 'versions.tf']) })
  }
})

test('every var.x referenced is declared, and every declared variable is used', () => {
  eachModule((model, refs) => {
    const names = new Set(Object.keys(model.variable))
    expect(undeclaredOf(refs, 'var', names)).toEqual([])
    expect([...names].filter((n) => !refs.var.has(n))).toEqual([])
  })
})

test('every local referenced is declared, and every declared local is used', () => {
  eachModule((model, refs) => {
    const names = new Set(Object.keys(model.locals))
    expect(undeclaredOf(refs, 'local', names)).toEqual([])
    expect([...names].filter((n) => !refs.local.has(n))).toEqual([])
  })
})

test('every resource, data source and module output referenced exists', () => {
  expect(references(root).resource.size).toBeGreaterThan(20)
  eachModule((model, refs) => {
    expect(undeclaredOf(refs, 'resource', declared(model, 'resource'))).toEqual([])
    expect(undeclaredOf(refs, 'data', declared(model, 'data'))).toEqual([])
    // Data sources are only worth their API calls when something reads them.
    expect([...declared(model, 'data')].filter((d) => !refs.data.has(d))).toEqual([])
    const outputs = new Set(Object.entries(model.modules).flatMap(([call, child]) => Object.keys(child.output).map((o) => `${call}.${o}`)))
    expect(undeclaredOf(refs, 'module', outputs)).toEqual([])
  })
})

test('each module call passes only the module\'s inputs, and every input without a default', () => {
  expect(Object.keys(root.module).length).toBeGreaterThanOrEqual(2)
  for (const [call, args] of Object.entries(root.module)) {
    const child = root.modules[call]
    expect({ call, local: Boolean(child) }).toEqual({ call, local: true })
    const passed = Object.keys(args).filter((a) => !META_ARGUMENTS.has(a))
    expect({ call, unknown: passed.filter((a) => !Object.hasOwn(child.variable, a)) }).toEqual({ call, unknown: [] })
    const required = Object.entries(child.variable).filter(([, v]) => !Object.hasOwn(v, 'default')).map(([n]) => n)
    expect({ call, missing: required.filter((n) => !passed.includes(n)) }).toEqual({ call, missing: [] })
  }
})

test('moved blocks lead from addresses no longer declared to resources that exist', () => {
  expect(root.moved.length).toBeGreaterThan(0)
  for (const { from, to } of root.moved) {
    const f = new RegExp(`^\\$\\{(${RESOURCE_TYPE})\\.(\\w+)\\}$`).exec(from)
    const t = new RegExp(`^\\$\\{module\\.(\\w+)\\.(${RESOURCE_TYPE})\\.(\\w+)\\}$`).exec(to)
    expect({ from, to, parsed: Boolean(f && t) }).toEqual({ from, to, parsed: true })
    expect(root.resource[f[1]]?.[f[2]]).toBeUndefined()
    expect(root.modules[t[1]]?.resource[t[2]]?.[t[3]]).toBeDefined()
    // The same kind of resource, or Terraform refuses the move.
    expect(t[2]).toBe(f[1])
  }
})

test('count/for_each resources are indexed and singletons are not', () => {
  // `aws_instance.controller.id` on a counted resource (or `[0]` on a single
  // one) is a plan-time error that only validate would otherwise find.
  eachModule((model) => {
    const problems = []
    // depends_on names whole resources, and moved blocks name old addresses.
    const all = Object.values(model.files).flatMap(({ moved, ...json }) => expressions(json)).filter(({ where }) => !where.includes('depends_on'))
    for (const { where, text } of all) {
      for (const m of text.matchAll(new RegExp(`(?<![\\w.])(${RESOURCE_TYPE})\\.([A-Za-z_][\\w-]*)(\\[|\\.|\\b)`, 'g'))) {
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
})

test('every template exists, gets exactly the variables it interpolates, and every template is used', () => {
  const calls = templateCalls(root)
  expect(calls.length).toBeGreaterThanOrEqual(5)
  for (const { template, varsLocal } of calls) {
    const file = path.join(TF_DIR, template)
    expect(fs.existsSync(file)).toBe(true)
    const wanted = [...templatePlaceholders(fs.readFileSync(file, 'utf8'))].sort()
    const vars = root.locals[varsLocal]
    expect(vars && typeof vars === 'object').toBe(true)
    expect({ template, vars: Object.keys(vars).sort() }).toEqual({ template, vars: wanted })
  }
  const used = new Set(calls.map((c) => path.basename(c.template)))
  const files = fs.readdirSync(TEMPLATE_DIR).filter((f) => f.endsWith('.tftpl'))
  expect(files.filter((f) => !used.has(f))).toEqual([])
})

test('every output is described and the required outputs exist', () => {
  for (const name of ['public_url', 'controller_urls', 'controller_state_table_name', 'cluster_token_parameter', 'table_name']) expect(root.output).toHaveProperty(name)
  eachModule((model) => {
    for (const [name, o] of Object.entries(model.output)) expect({ name, description: typeof o.description }).toEqual({ name, description: 'string' })
  })
  expect(root.output.public_url.value).toMatch(/^http:\/\/\$\{aws_lb\.frontend\.dns_name\}$/)
  expect(root.output.table_name.value).toBe('${aws_dynamodb_table.kv.name}')
  expect(root.output.controller_state_table_name.value).toBe('${aws_dynamodb_table.controller_state.name}')
  expect(root.output.controller_urls.value).toBe('${local.controller_urls}')
})

test('the providers are pinned (aws ~> 5.0, random ~> 3.x) and terraform to 1.x, in every module', () => {
  eachModule((model) => {
    const tf = model.terraform[0]
    expect(tf.required_version).toMatch(/^>= 1\.\d+/)
    expect(tf.required_providers[0].aws).toEqual({ source: 'hashicorp/aws', version: '~> 5.0' })
  })
  expect(root.terraform[0].required_providers[0].random).toEqual({ source: 'hashicorp/random', version: expect.stringMatching(/^~> 3\.\d+$/) })
  expect(root.provider.aws.region).toBe('${var.region}')
})
