'use strict'

// Variables are typed, described and validated where a wrong value is
// possible; with terraform installed, terraform itself evaluates the
// validation blocks offline (variables.tf and locals.tf need no provider),
// rejecting bad values and accepting good ones.

const { APPS } = require('../../apps')
const { strategies } = require('../../controller/strategies')
const path = require('node:path')
const { TF_DIR, loadConfig, terraformBin, scratchModule } = require('./terraform-config')

let model

beforeAll(async () => {
  model = await loadConfig()
})

const listIn = (condition) => JSON.parse((/contains\((\[[^\]]*\]),/.exec(condition) || [])[1] || 'null')

test('every variable is typed and described', () => {
  for (const [name, v] of Object.entries(model.variable)) {
    expect({ name, type: typeof v.type, description: typeof v.description }).toEqual({ name, type: 'string', description: 'string' })
    expect(v.description.length).toBeGreaterThan(15)
  }
})

test('counts, app, strategy and region have validation blocks', () => {
  for (const name of ['frontend_count', 'appserver_count', 'controller_count', 'app', 'strategy', 'region', 'az_count']) {
    expect({ name, validations: (model.variable[name].validation || []).length > 0 }).toEqual({ name, validations: true })
  }
  for (const name of ['frontend_count', 'appserver_count', 'controller_count']) {
    expect(model.variable[name].validation[0].condition).toContain(`var.${name} >= 1`)
  }
})

test('the app and strategy choices are exactly the ones the code offers', () => {
  expect(listIn(model.variable.app.validation[0].condition).sort()).toEqual(Object.keys(APPS).sort())
  expect(listIn(model.variable.strategy.validation[0].condition).sort()).toEqual(Object.keys(strategies).sort())
})

test('defaults reproduce the paper\'s topology (section 6.3)', () => {
  const d = (name) => model.variable[name].default
  expect([d('frontend_count'), d('frontend_instance_type')]).toEqual([2, 'm5zn.xlarge'])
  expect([d('appserver_count'), d('appserver_instance_type')]).toEqual([3, 't3.small'])
  expect([d('load_driver_enabled'), d('load_driver_instance_type')]).toEqual([true, 'm5zn.xlarge'])
  expect([d('region'), d('app'), d('balance_period_ms')]).toEqual(['us-west-2', 'kv-cache', 5000])
  // Beyond the paper: a leader and a standby (issue 11).
  expect([d('controller_count'), d('controller_instance_type')]).toEqual([2, 't3.small'])
})

const withTerraform = terraformBin() ? describe : describe.skip

withTerraform('terraform evaluates the validations', () => {
  const SOURCE = ['-var', 'source_git_repo=https://example.com/chopper.git']
  let scratch

  beforeAll(() => {
    // An output over the locals makes plan evaluate them too.
    scratch = scratchModule('output "roles" {\n  value = local.node_roles\n}\noutput "types" {\n  value = local.instance_types\n}\n')
  })
  afterAll(() => scratch && scratch.remove())

  const plan = (args) => {
    const r = scratch.run(['plan', '-input=false', '-no-color', ...args])
    return { status: r.status, stderr: r.stderr.replace(/\s+/g, ' ') }
  }
  const v = (name, value) => ['-var', `${name}=${value}`]

  test('the defaults plus a source are accepted', () => {
    expect(plan(SOURCE)).toEqual({ status: 0, stderr: '' })
  })

  test.each([
    ['frontend_count=0', [...SOURCE, ...v('frontend_count', 0)], 'frontend_count must be a whole number between 1 and 50'],
    ['frontend_count=1.5', [...SOURCE, ...v('frontend_count', 1.5)], 'frontend_count must be a whole number'],
    ['appserver_count=0', [...SOURCE, ...v('appserver_count', 0)], 'appserver_count must be a whole number between 1 and 100'],
    ['controller_count=0', [...SOURCE, ...v('controller_count', 0)], 'controller_count must be a whole number between 1 and 3'],
    ['controller_count=1.5', [...SOURCE, ...v('controller_count', 1.5)], 'controller_count must be a whole number between 1 and 3'],
    ['app=redis', [...SOURCE, ...v('app', 'redis')], 'app must be one of kv-cache, compute'],
    ['strategy=random', [...SOURCE, ...v('strategy', 'random')], 'strategy must be one of chopper, consistent-hash, bounded-consistent-hash, neighbour-offload, slicer-weighted'],
    ['region=us-west', [...SOURCE, ...v('region', 'us-west')], 'region must look like an AWS region name'],
    ['region=US-WEST-2', [...SOURCE, ...v('region', 'US-WEST-2')], 'region must look like an AWS region name'],
    ['az_count=1', [...SOURCE, ...v('az_count', 1)], 'az_count must be a whole number between 2 and 6'],
    ['vpc_cidr=10.0.0.0/8', [...SOURCE, ...v('vpc_cidr', '10.0.0.0/8')], 'vpc_cidr must be an IPv4 CIDR block'],
    ['vpc_cidr=nonsense', [...SOURCE, ...v('vpc_cidr', 'nonsense')], 'vpc_cidr must be an IPv4 CIDR block'],
    ['no source', [], 'Set exactly one of source_git_repo and source_tarball_url'],
    ['two sources', [...SOURCE, ...v('source_tarball_url', 'https://example.com/c.tar.gz')], 'Set exactly one of source_git_repo and source_tarball_url'],
    ['git ref with a space', [...SOURCE, ...v('source_git_ref', 'main; rm')], 'source_git_ref must be a branch, tag or commit SHA'],
    ['Graviton front ends', [...SOURCE, ...v('frontend_instance_type', 'm6g.large')], 'frontend_instance_type must be an x86_64 instance type'],
    ['Graviton app servers', [...SOURCE, ...v('appserver_instance_type', 't4g.small')], 'appserver_instance_type must be an x86_64 instance type'],
    ['existing VPC without subnets', [...SOURCE, ...v('existing_vpc_id', 'vpc-0123456789abcdef0')], 'Set existing_public_subnet_ids (at least two) exactly when existing_vpc_id is set'],
    ['subnets without a VPC', [...SOURCE, ...v('existing_private_subnet_ids', '["subnet-01234567","subnet-89abcdef"]')], 'Set existing_private_subnet_ids (at least two) exactly when existing_vpc_id is set'],
    ['malformed subnet id', [...SOURCE, ...v('existing_vpc_id', 'vpc-0123456789abcdef0'), ...v('existing_public_subnet_ids', '["subnet-01234567","sn-1"]'), ...v('existing_private_subnet_ids', '["subnet-01234567","subnet-89abcdef"]')], 'Every entry of existing_public_subnet_ids must be a subnet id'],
    ['short table name', [...SOURCE, ...v('ddb_table_name', 'kv')], 'ddb_table_name must be 3-255 characters'],
    ['privileged data port', [...SOURCE, ...v('frontend_port', 80)], 'frontend_port must be a whole number between 1024 and 65535'],
    ['control port equal to data port', [...SOURCE, ...v('app_control_port', 9000)], 'app_control_port must differ from app_port'],
    ['log level', [...SOURCE, ...v('log_level', 'verbose')], 'log_level must be one of'],
    ['bad ingress CIDR', [...SOURCE, ...v('allowed_ingress_cidrs', '["nope"]')], 'allowed_ingress_cidrs must be a non-empty list of IPv4 CIDR blocks'],
    ['Node 18', [...SOURCE, ...v('node_major_version', 18)], 'node_major_version must be a whole number, 20 or later']
  ])('rejects %s', (label, args, message) => {
    const r = plan(args)
    expect(r.status).not.toBe(0)
    expect(r.stderr).toContain('Invalid value for variable')
    expect(r.stderr).toContain(message)
  })

  test.each([
    ['compute app, consistent hashing', [...SOURCE, ...v('app', 'compute'), ...v('strategy', 'consistent-hash')]],
    ['another region', [...SOURCE, ...v('region', 'eu-central-1')]],
    ['a GovCloud region', [...SOURCE, ...v('region', 'us-gov-west-1')]],
    ['a release tarball', [...v('source_tarball_url', 'https://example.com/chopper-0.1.0.tar.gz')]],
    ['an existing VPC', [...SOURCE, ...v('existing_vpc_id', 'vpc-0123456789abcdef0'), ...v('existing_public_subnet_ids', '["subnet-01234567","subnet-89abcdef"]'), ...v('existing_private_subnet_ids', '["subnet-0123456789abcdef0","subnet-0fedcba9876543210"]')]],
    ['scaled out, no load driver', [...SOURCE, ...v('frontend_count', 4), ...v('appserver_count', 12), ...v('controller_count', 3), ...v('load_driver_enabled', false), ...v('appserver_instance_type', 'c5.large')]],
    ['a single controller, no standby', [...SOURCE, ...v('controller_count', 1)]]
  ])('accepts %s', (label, args) => {
    expect(plan(args)).toEqual({ status: 0, stderr: '' })
  })

  test('terraform.tfvars.example is valid and accepted', () => {
    expect(plan([`-var-file=${path.join(TF_DIR, 'terraform.tfvars.example')}`])).toEqual({ status: 0, stderr: '' })
  })

  test('locals follow the variables: no load-driver role or type without a load driver', () => {
    const on = scratch.outputs({ source_git_repo: 'https://example.com/chopper.git' })
    expect(on.roles.sort()).toEqual(['appserver', 'controller', 'frontend', 'load-driver'])
    expect(on.types.sort()).toEqual(['m5zn.xlarge', 't3.small'])
    const off = scratch.outputs({ source_git_repo: 'https://example.com/chopper.git', load_driver_enabled: false, controller_instance_type: 'c5.large' })
    expect(off.roles.sort()).toEqual(['appserver', 'controller', 'frontend'])
    expect(off.types.sort()).toEqual(['c5.large', 'm5zn.xlarge', 't3.small'])
  })
})
