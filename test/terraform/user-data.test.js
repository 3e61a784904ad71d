'use strict'
/* eslint-disable no-template-curly-in-string -- @cdktf/hcl2json returns HCL expressions as "${...}" strings */

// The boot scripts against the code they start: every environment variable
// user_data sets is one the component's entry point reads (core/settings.js
// ENV), the ports are DEFAULT_PORTS, the rendered scripts are valid bash, and
// the environment files they write parse with the real readEnv. Members get
// every controller's URL; the cluster token is added at boot, never rendered.

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { DEFAULT_PORTS, ENV, readEnv } = require('../../core/settings')
const { loadApp, prepareShared } = require('../../apps')
const { silent } = require('../../core/logger')
const { ROOT, TF_DIR, loadConfig, resolve, renderTemplate, terraformBin, scratchModule } = require('./terraform-config')
const {
  COMPONENTS, SAMPLE_VARS, COMMON_SAMPLE, BOOT_VALUES, PENDING_ENV, SAMPLE_CONTROLLER_IPS, CONTROLLER_URLS_EXPR,
  sampleControllerUrls, placeholderValue, appendedAtBoot, createRenderer
} = require('./user-data-render')

const ENV_NAME = /\b(CHOPPER_[A-Z0-9_]+|REDIS_URL|AWS_REGION|LOG_LEVEL)\b/g
// Settings the code defaults to loopback or leaves unset: on AWS they must be
// set (an unset CHOPPER_DDB_ENDPOINT means an in-process dynalite).
// (Settings marked optional mean "none" when unset.)
const mustSet = (spec) => Object.entries(ENV[spec])
  .filter(([, s]) => !s.optional && (s.default === undefined || String(s.default).includes('127.0.0.1')))
  .map(([name]) => name)
// A deliberate difference from the code's default: the paper's AWS runs used kv-cache.
const DEFAULT_EXCEPTIONS = new Set(['CHOPPER_APP'])
const PORT_VARIABLES = {
  frontend_port: 'frontend',
  frontend_control_port: 'frontendControl',
  controller_port: 'controller',
  app_port: 'app',
  app_control_port: 'appControl'
}

let model
let templateOf, templateVars, userData, writtenEnv, withStandIns

beforeAll(async () => {
  model = await loadConfig()
  ;({ templateOf, templateVars, userData, writtenEnv, withStandIns } = createRenderer(model))
})

/** Names an ENV table has, plus those still being added to it (PENDING_ENV). */
const knownIn = (spec) => new Set([...Object.keys(ENV[spec]), ...(PENDING_ENV[spec] || [])])
const allowedNames = (component) => new Set(Object.values(COMPONENTS[component].envLocals).flatMap((spec) => [...knownIn(spec)]))
/** The ENV entry for a name, or undefined while it is only pending. */
const specOf = (spec, name) => Object.hasOwn(ENV[spec], name) ? ENV[spec][name] : undefined
const urlsOf = (value) => String(value).split(',')

test('port variables default to core/settings.js DEFAULT_PORTS, and every port has one', () => {
  for (const [variable, key] of Object.entries(PORT_VARIABLES)) {
    expect({ variable, default: model.variable[variable].default }).toEqual({ variable, default: DEFAULT_PORTS[key] })
  }
  expect(Object.values(PORT_VARIABLES).sort()).toEqual(Object.keys(DEFAULT_PORTS).sort())
})

test.each(Object.keys(COMPONENTS))('%s: every variable in its env maps is one its entry point reads', (component) => {
  for (const [mapName, spec] of Object.entries(COMPONENTS[component].envLocals)) {
    const map = model.locals[mapName]
    expect(map && typeof map === 'object').toBe(true)
    const unknown = Object.keys(map).filter((k) => !knownIn(spec).has(k))
    expect({ mapName, unknown }).toEqual({ mapName, unknown: [] })
  }
})

test.each(Object.keys(COMPONENTS))('%s: every variable its template names is one its entry point reads', (component) => {
  const allowed = allowedNames(component)
  const names = [...templateOf(component).text.matchAll(ENV_NAME)].map((m) => m[1])
  expect(names.filter((n) => !allowed.has(n))).toEqual([])
})

test('the common and load-driver scripts set no component variables', () => {
  for (const file of ['common.sh.tftpl', 'load-driver.sh.tftpl']) {
    const text = fs.readFileSync(path.join(TF_DIR, 'templates', file), 'utf8')
    expect({ file, names: [...text.matchAll(ENV_NAME)].map((m) => m[1]) }).toEqual({ file, names: [] })
  }
})

test.each(Object.keys(COMPONENTS))('%s: env values agree with the code\'s defaults, and loopback defaults are overridden', (component) => {
  const { text } = templateOf(component)
  const set = new Set([...Object.keys(COMPONENTS[component].envLocals).flatMap((m) => Object.keys(model.locals[m])), ...appendedAtBoot(text).map(([n]) => n)])
  for (const spec of Object.values(COMPONENTS[component].envLocals)) {
    expect({ spec, missing: mustSet(spec).filter((n) => !set.has(n)) }).toEqual({ spec, missing: [] })
  }
  for (const [mapName, spec] of Object.entries(COMPONENTS[component].envLocals)) {
    const values = resolve(withStandIns({}), model.locals[mapName], SAMPLE_VARS)
    for (const [name, value] of Object.entries(values)) {
      const dflt = specOf(spec, name)?.default
      if (DEFAULT_EXCEPTIONS.has(name) || dflt === undefined) continue
      if (String(dflt).includes('127.0.0.1')) {
        // A loopback URL default: the deployment keeps the port, not the host
        // (in each URL of a list, for the members' controllers).
        for (const u of urlsOf(value)) {
          const url = new URL(u.replace(/<[^>]+>/g, '10.40.8.10'))
          expect({ name, port: url.port }).toEqual({ name, port: new URL(dflt).port })
          expect(url.hostname).not.toBe('127.0.0.1')
        }
        continue
      }
      expect({ name, value }).toEqual({ name, value: dflt })
    }
  }
})

test('kv-cache app servers use DynamoDB in the deployment region, never a local endpoint', async () => {
  const kv = model.locals.kv_cache_env
  expect(model.locals.dynamodb_endpoint).toBe('https://dynamodb.${var.region}.${data.aws_partition.current.dns_suffix}')
  expect(kv.CHOPPER_DDB_ENDPOINT).toBe('${local.dynamodb_endpoint}')
  // With this endpoint the app server starts no stand-in DynamoDB of its own
  // (the call bin/appserver.js makes with the kv-cache settings).
  const endpoint = String(resolve(model, kv.CHOPPER_DDB_ENDPOINT)).replace(/<[^>]+>/g, placeholderValue)
  expect(endpoint).toBe('https://dynamodb.us-west-2.amazonaws.com')
  const shared = await prepareShared(loadApp('kv-cache'), { dynamoEndpoint: endpoint, logger: silent })
  try {
    expect(shared.options).toEqual({})
  } finally {
    await shared.close()
  }
  expect(kv.CHOPPER_DDB_TABLE).toBe('${aws_dynamodb_table.kv.name}')
  expect(kv.AWS_REGION).toBe('${var.region}')
  expect(resolve(model, kv.REDIS_URL)).toBe('redis://127.0.0.1:6379')
  // The Redis the script configures listens where REDIS_URL points.
  expect(templateOf('appserver').text).toMatch(/^port 6379$/m)
})

test.each([
  ['controller', {}],
  ['frontend', {}],
  ['appserver', { app: 'kv-cache' }],
  ['appserver', { app: 'compute' }]
])('%s %j: the env file the rendered script writes parses with readEnv', (component, overrides) => {
  const env = writtenEnv(userData(component, overrides), component)
  // Every component gets the token from Parameter Store at boot.
  expect(env.CHOPPER_CLUSTER_TOKEN).toBe(BOOT_VALUES.CLUSTER_TOKEN)
  if (component === 'controller') {
    const s = readEnv('controller', env)
    expect(s.port).toBe(DEFAULT_PORTS.controller)
    expect(s.host).toBe('0.0.0.0')
    // Per instance: its id in the leader lease and the address it publishes there.
    expect(env.CHOPPER_CONTROLLER_ID).toBe(BOOT_VALUES.INSTANCE_ID)
    expect(env.CHOPPER_ADVERTISE_HOST).toBe(BOOT_VALUES.PRIVATE_IP)
    return
  }
  if (component === 'frontend') {
    const s = readEnv('frontend', env)
    expect([s.port, s.controlPort]).toEqual([DEFAULT_PORTS.frontend, DEFAULT_PORTS.frontendControl])
    expect(urlsOf(s.controllerUrl).map((u) => new URL(u).port)).toEqual([String(DEFAULT_PORTS.controller), String(DEFAULT_PORTS.controller)])
    expect(s.advertiseHost).toBe('10.40.9.20')
    expect(s.id).toMatch(/^i-/)
    return
  }
  const s = readEnv('appserver', env)
  expect(s.app).toBe(overrides.app)
  expect([s.port, s.controlPort]).toEqual([DEFAULT_PORTS.app, DEFAULT_PORTS.appControl])
  expect(urlsOf(s.controllerUrl).map((u) => new URL(u).port)).toEqual([String(DEFAULT_PORTS.controller), String(DEFAULT_PORTS.controller)])
  expect(s.id).toMatch(/^i-/)
  const kv = readEnv('kvCache', env)
  if (overrides.app === 'kv-cache') {
    expect(kv).toMatchObject({
      table: ENV.kvCache.CHOPPER_DDB_TABLE.default,
      region: 'us-west-2',
      redisUrl: 'redis://127.0.0.1:6379',
      dynamoEndpoint: 'https://dynamodb.us-west-2.amazonaws.com'
    })
  } else {
    expect(Object.keys(env).filter((k) => Object.hasOwn(ENV.kvCache, k))).toEqual([])
  }
})

test.each(['controller', 'frontend', 'appserver', 'load-driver'])('%s: rendered user_data is valid bash under 16 KB', (component) => {
  const script = userData(component)
  expect(script.startsWith('#!/bin/bash\n')).toBe(true)
  expect(Buffer.byteLength(script)).toBeLessThan(16 * 1024) // EC2's user_data limit
  const r = spawnSync('bash', ['-n'], { input: script, encoding: 'utf8' })
  expect(r.stderr).toBe('')
  expect(r.status).toBe(0)
})

const shellcheck = ['/usr/bin/shellcheck', '/usr/local/bin/shellcheck'].find((p) => fs.existsSync(p))

;(shellcheck ? test.each : test.skip.each)(['controller', 'frontend', 'appserver', 'load-driver'])('%s: shellcheck finds nothing in the rendered user_data', (component) => {
  const r = spawnSync(shellcheck, ['--shell=bash', '--format=gcc', '-'], { input: userData(component), encoding: 'utf8' })
  expect(r.stdout).toBe('')
  expect(r.status).toBe(0)
})

test('every systemd service runs an entry point that exists, restarting on failure', () => {
  const common = fs.readFileSync(path.join(TF_DIR, 'templates/common.sh.tftpl'), 'utf8')
  expect(common).toMatch(/^Restart=on-failure$/m)
  expect(common).toMatch(/^EnvironmentFile=\$ENV_DIR\/\$name\.env$/m)
  expect(common).toMatch(/^ExecStart=\/usr\/bin\/node \$APP_DIR\/\$entry$/m)
  for (const component of Object.keys(COMPONENTS)) {
    const services = [...templateOf(component).text.matchAll(/^\s*install_service (\S+) (\S+)/gm)]
    expect(services.length).toBeGreaterThan(0)
    for (const [, name, entry] of services) {
      // The unit reads $ENV_DIR/<name>.env, which must be the file the template writes.
      expect(name).toBe(component)
      expect({ entry, exists: fs.existsSync(path.join(ROOT, entry)) }).toEqual({ entry, exists: true })
    }
  }
})

test('boot scripts read instance metadata with IMDSv2 tokens, failing the boot if it is unavailable', () => {
  const common = fs.readFileSync(path.join(TF_DIR, 'templates/common.sh.tftpl'), 'utf8')
  expect(common).toMatch(/curl -fsS -X PUT http:\/\/169\.254\.169\.254\/latest\/api\/token/)
  expect(common).toMatch(/X-aws-ec2-metadata-token: \$token/)
  expect(common).toMatch(/^set -Eeuo pipefail$/m)
  // Plain assignments: under set -e a failed $(...) there stops the script,
  // where inside an echo argument it would write an empty value.
  expect(common).toMatch(/^INSTANCE_ID=\$\(retry imds instance-id\)$/m)
  expect(common).toMatch(/^PRIVATE_IP=\$\(retry imds local-ipv4\)$/m)
  // Each component adds its id, its address and the token, and nothing else.
  const idName = { controller: 'CHOPPER_CONTROLLER_ID', frontend: 'CHOPPER_FRONTEND_ID', appserver: 'CHOPPER_SERVER_ID' }
  for (const component of Object.keys(COMPONENTS)) {
    const used = appendedAtBoot(templateOf(component).text)
    expect({ component, used }).toEqual({
      component,
      used: [[idName[component], 'INSTANCE_ID'], ['CHOPPER_ADVERTISE_HOST', 'PRIVATE_IP'], ['CHOPPER_CLUSTER_TOKEN', 'CLUSTER_TOKEN']]
    })
  }
})

test('members get every controller\'s URL; controllers get the state table, the region and a real endpoint', () => {
  for (const map of ['frontend_env', 'appserver_env']) {
    expect({ map, url: model.locals[map].CHOPPER_CONTROLLER_URL }).toEqual({ map, url: '${local.controller_urls}' })
  }
  // One URL per controller instance, each its private address on the controller port.
  expect(model.locals.controller_urls).toBe(CONTROLLER_URLS_EXPR)
  expect(model.resource.aws_instance.controller.count).toBe('${var.controller_count}')
  for (const count of [1, 2, 3]) {
    for (const component of ['frontend', 'appserver']) {
      const env = writtenEnv(userData(component, { controller_count: count }), component)
      const urls = urlsOf(env.CHOPPER_CONTROLLER_URL)
      expect(urls).toEqual(SAMPLE_CONTROLLER_IPS.slice(0, count).map((ip) => `http://${ip}:${DEFAULT_PORTS.controller}`))
    }
  }
  // The load driver reads the leader's status from the same list.
  expect(model.locals.load_driver_template_vars.controller_urls).toBe('${local.controller_urls}')

  const env = model.locals.controller_env
  expect(env.CHOPPER_STATE_TABLE).toBe('${aws_dynamodb_table.controller_state.name}')
  expect(env.CHOPPER_STATE_ENDPOINT).toBe('${local.dynamodb_endpoint}')
  expect(env.AWS_REGION).toBe('${var.region}')
  const written = writtenEnv(userData('controller'), 'controller')
  expect(written.CHOPPER_STATE_TABLE).toBe('chopper-controller-state')
  expect(written.CHOPPER_STATE_ENDPOINT).toBe('https://dynamodb.us-west-2.amazonaws.com')
  // Settings the code reads for the state store, once core/settings.js has
  // them, must be exactly the ones the deployment sets.
  for (const name of ['CHOPPER_STATE_TABLE', 'CHOPPER_STATE_ENDPOINT', 'CHOPPER_CONTROLLER_ID', 'CHOPPER_CLUSTER_TOKEN']) {
    if (specOf('controller', name)) expect(Object.keys(written)).toContain(name)
  }
})

const withTerraform = terraformBin() ? test : test.skip

withTerraform('terraform evaluates the controller URL list as the renderer\'s stand-in has it', () => {
  // local.controller_urls with the instances' addresses replaced by a variable.
  const expr = CONTROLLER_URLS_EXPR.slice(2, -1).replace('aws_instance.controller[*].private_ip', 'var.sample_controller_ips')
  const scratch = scratchModule(`variable "sample_controller_ips" {\n  type = list(string)\n}\noutput "urls" {\n  value = ${expr}\n}\n`)
  try {
    for (const [count, port] of [[1, 7070], [2, 7070], [3, 7171]]) {
      const out = scratch.outputs({ ...SAMPLE_VARS, controller_count: count, controller_port: port, sample_controller_ips: SAMPLE_CONTROLLER_IPS.slice(0, count) })
      expect(out.urls).toBe(sampleControllerUrls({ controller_count: count, controller_port: port }))
    }
  } finally {
    scratch.remove()
  }
})

withTerraform('terraform renders the templates exactly as the offline renderer does', () => {
  const cases = [
    ['controller', {}], ['frontend', {}], ['appserver', { app: 'kv-cache' }], ['appserver', { app: 'compute' }], ['load-driver', {}]
  ]
  const outputs = cases.map(([component], i) => {
    const file = path.join(TF_DIR, 'templates', `${component}.sh.tftpl`)
    return `output "r${i}" {\n  value = templatefile(${JSON.stringify(file)}, jsondecode(file("\${path.module}/vars${i}.json")))\n}\n`
  })
  // The common part's variables come from locals.tf itself, evaluated by terraform.
  const commonFile = path.join(TF_DIR, 'templates/common.sh.tftpl')
  outputs.push(`output "common" {\n  value = templatefile(${JSON.stringify(commonFile)}, local.common_template_vars)\n}\n`)
  outputs.push('output "common_vars" {\n  value = local.common_template_vars\n}\n')
  const scratch = scratchModule(outputs.join('\n'))
  try {
    cases.forEach(([component, overrides], i) => {
      fs.writeFileSync(path.join(scratch.dir, `vars${i}.json`), JSON.stringify(templateVars(component, overrides)))
    })
    const out = scratch.outputs(SAMPLE_VARS)
    cases.forEach(([component, overrides], i) => {
      const js = renderTemplate(templateOf(component).text, templateVars(component, overrides))
      expect(out[`r${i}`]).toBe(js)
    })
    expect(out.common_vars).toEqual(COMMON_SAMPLE)
    expect(out.common).toBe(renderTemplate(fs.readFileSync(commonFile, 'utf8'), out.common_vars))
  } finally {
    scratch.remove()
  }
})
