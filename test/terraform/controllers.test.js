'use strict'
/* eslint-disable no-template-curly-in-string -- @cdktf/hcl2json returns HCL expressions as "${...}" strings */

// Highly available controllers (issue 11): controller_count instances (two
// by default) spread over the private subnets, all with the same boot
// script, sharing one state table that only they may use. Members are
// configured with every controller (user-data.test.js). The boot test runs
// this for real: two controllers from the deployment's env file elect one
// leader, and the members follow the standby when the leader's instance
// dies.

const { ENV, readEnv } = require('../../core/settings')
const { loadConfig, resolve, terraformBin, scratchModule } = require('./terraform-config')
const { BOOT_VALUES, createRenderer } = require('./user-data-render')

let model
let renderer

beforeAll(async () => {
  model = await loadConfig()
  renderer = createRenderer(model)
})

test('controller_count instances, two by default, each in the next private subnet', () => {
  expect(model.variable.controller_count.default).toBe(2)
  expect(model.variable.controller_count.validation[0].condition).toMatch(/var\.controller_count >= 1 /)
  const controller = model.resource.aws_instance.controller
  expect(controller.count).toBe('${var.controller_count}')
  expect(controller.subnet_id).toBe('${element(local.private_subnet_ids, count.index)}')
  // One boot script for all: what differs per instance is read at boot.
  expect(controller.user_data).toBe('${local.controller_user_data}')
})

test('a replaced controller boots before the old one goes, once its policies exist', () => {
  const controller = model.resource.aws_instance.controller
  expect(controller.lifecycle[0].create_before_destroy).toBe(true)
  expect(controller.user_data_replace_on_change).toBe(true)
  expect(controller.depends_on).toEqual(expect.arrayContaining(['${aws_iam_role_policy.controller_state}', '${aws_iam_role_policy.cluster_token}']))
})

test('controllers get the state table\'s name, and the controller role alone may use that table', () => {
  const env = renderer.writtenEnv(renderer.userData('controller'), 'controller')
  const table = resolve(model, model.resource.aws_dynamodb_table.controller_state.name)
  expect(table).toBe('chopper-controller-state')
  expect(env).toMatchObject({
    CHOPPER_STATE_TABLE: table,
    CHOPPER_STATE_ENDPOINT: 'https://dynamodb.us-west-2.amazonaws.com',
    AWS_REGION: 'us-west-2',
    CHOPPER_CONTROLLER_ID: BOOT_VALUES.INSTANCE_ID,
    CHOPPER_ADVERTISE_HOST: BOOT_VALUES.PRIVATE_IP
  })
  // bin/controller.js reads them into the state store's options.
  for (const name of ['CHOPPER_STATE_TABLE', 'CHOPPER_STATE_ENDPOINT', 'CHOPPER_CONTROLLER_ID', 'CHOPPER_ADVERTISE_HOST']) {
    if (Object.hasOwn(ENV.controller, name)) expect({ name, read: readEnv('controller', env)[ENV.controller[name].key] }).toEqual({ name, read: env[name] })
  }
  // The table's only grant: an inline policy on the controller role.
  const grants = Object.entries(model.data.aws_iam_policy_document)
    .filter(([, d]) => JSON.stringify(d).includes('aws_dynamodb_table.controller_state'))
    .map(([name]) => name)
  expect(grants).toEqual(['controller_state'])
  const users = Object.entries(model.resource.aws_iam_role_policy).filter(([, p]) => p.policy.includes('data.aws_iam_policy_document.controller_state.')).map(([, p]) => p.role)
  expect(users).toEqual(['${aws_iam_role.node["controller"].id}'])
  // Members never learn the table.
  for (const component of ['frontend', 'appserver']) {
    expect(renderer.userData(component)).not.toContain(table)
  }
})

;(terraformBin() ? test : test.skip)('terraform names the state table after the deployment', () => {
  const scratch = scratchModule('output "table" {\n  value = local.controller_state_table_name\n}\noutput "parameter" {\n  value = local.cluster_token_parameter\n}\n')
  try {
    const out = scratch.outputs({ source_git_repo: 'https://example.com/chopper.git', name: 'exp-7' })
    expect(out).toEqual({ table: 'exp-7-controller-state', parameter: '/exp-7/cluster-token' })
  } finally {
    scratch.remove()
  }
})
