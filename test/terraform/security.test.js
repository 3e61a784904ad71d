'use strict'
/* eslint-disable no-template-curly-in-string -- @cdktf/hcl2json returns HCL expressions as "${...}" strings */

// Security posture of terraform/, checked on the parsed configuration:
// no control-plane port is reachable from a CIDR block (let alone
// 0.0.0.0/0), the load balancer reaches only the front ends' data port, SSH
// is off by default, IMDSv2 is required, and IAM grants only what the code
// calls: the DynamoDB actions the kv-cache app and the controllers' state
// store issue, each on its one table, and the cluster token parameter to the
// components that sign control calls.

const fs = require('node:fs')
const path = require('node:path')
const { DEFAULT_PORTS } = require('../../core/settings')
const { ROOT, loadConfig, childModules, resolve, terraformBin, scratchModule } = require('./terraform-config')

const CONTROL_PLANE = [DEFAULT_PORTS.controller, DEFAULT_PORTS.frontendControl, DEFAULT_PORTS.appControl]
const CIDR_KEYS = ['cidr_ipv4', 'cidr_ipv6', 'cidr_blocks', 'ipv6_cidr_blocks', 'prefix_list_id', 'prefix_list_ids']

let model

beforeAll(async () => {
  model = await loadConfig()
})

const resources = (type) => Object.entries(model.resource[type] || {})
/** Resources of `type` in the local modules the root calls, named `<module source>:<name>`. */
const moduleResources = (type) => childModules(model).flatMap(({ source, model: child }) => Object.entries(child.resource[type] || {}).map(([n, r]) => [`${source}:${n}`, r]))
const MEMBERS = ['frontend', 'appserver']
const sgOf = (expr) => (/^\$\{aws_security_group\.(\w+)\.id\}$/.exec(expr) || [])[1]

/** Every ingress rule, whatever resource style declares it, as { name, sg, from, to, cidr, source }. */
function ingressRules () {
  const rules = []
  const portOf = (v) => resolve(model, v)
  for (const [name, r] of resources('aws_vpc_security_group_ingress_rule')) {
    const all = r.ip_protocol === '-1'
    rules.push({
      name,
      sg: sgOf(r.security_group_id),
      from: all ? 0 : portOf(r.from_port),
      to: all ? 65535 : portOf(r.to_port),
      cidr: CIDR_KEYS.some((k) => Object.hasOwn(r, k)),
      source: r.referenced_security_group_id ? sgOf(r.referenced_security_group_id) : null,
      rule: r
    })
  }
  for (const [name, r] of resources('aws_security_group_rule')) {
    if (r.type !== 'ingress') continue
    rules.push({ name, sg: sgOf(r.security_group_id), from: portOf(r.from_port), to: portOf(r.to_port), cidr: CIDR_KEYS.some((k) => Object.hasOwn(r, k)), source: r.source_security_group_id ? sgOf(r.source_security_group_id) : null, rule: r })
  }
  for (const [name, sg] of resources('aws_security_group')) {
    for (const r of sg.ingress || []) {
      rules.push({ name: `${name} (inline)`, sg: name, from: portOf(r.from_port), to: portOf(r.to_port), cidr: CIDR_KEYS.some((k) => Object.hasOwn(r, k)), source: null, rule: r })
    }
  }
  return rules
}

test('every ingress rule resolves to concrete ports on a known security group', () => {
  const rules = ingressRules()
  expect(rules.length).toBeGreaterThanOrEqual(10)
  for (const r of rules) {
    expect({ name: r.name, sg: typeof r.sg, from: typeof r.from, to: typeof r.to }).toEqual({ name: r.name, sg: 'string', from: 'number', to: 'number' })
    expect(model.resource.aws_security_group).toHaveProperty(r.sg)
    if (r.source) expect(model.resource.aws_security_group).toHaveProperty(r.source)
    // A rule is either address-based or group-based, never neither.
    expect({ name: r.name, kind: r.cidr || r.source !== null }).toEqual({ name: r.name, kind: true })
  }
})

test('no control-plane or app data port is open to any CIDR block (0.0.0.0/0 included)', () => {
  const exposed = ingressRules()
    .filter((r) => r.cidr)
    .filter((r) => [...CONTROL_PLANE, DEFAULT_PORTS.app, DEFAULT_PORTS.frontend].some((p) => p >= r.from && p <= r.to))
    .map((r) => `${r.name}: ${r.from}-${r.to}`)
  expect(exposed).toEqual([])
  // The only address-based ingress: HTTP to the load balancer, SSH to the load driver.
  const cidrRules = ingressRules().filter((r) => r.cidr).map((r) => `${r.sg}:${r.from}-${r.to}`).sort()
  expect(cidrRules).toEqual(['lb:80-80', 'load_driver:22-22'])
})

test('each security group admits exactly the expected ports from the expected groups', () => {
  const admitted = ingressRules().filter((r) => !r.cidr).map((r) => `${r.sg}:${r.from}<-${r.source}`).sort()
  expect(admitted).toEqual([
    `appserver:${DEFAULT_PORTS.app}<-frontend`,
    `appserver:${DEFAULT_PORTS.appControl}<-controller`,
    `controller:${DEFAULT_PORTS.controller}<-appserver`,
    `controller:${DEFAULT_PORTS.controller}<-frontend`,
    `controller:${DEFAULT_PORTS.controller}<-load_driver`,
    `frontend:${DEFAULT_PORTS.frontend}<-lb`,
    `frontend:${DEFAULT_PORTS.frontend}<-load_driver`,
    `frontend:${DEFAULT_PORTS.frontendControl}<-controller`
  ].sort())
  for (const r of ingressRules()) expect({ name: r.name, from: r.from }).toEqual({ name: r.name, from: r.to })
})

test('the load balancer listens on 80 and sends only to the front ends\' data port, health-checking /healthz', () => {
  const egress = resources('aws_vpc_security_group_egress_rule').filter(([, r]) => sgOf(r.security_group_id) === 'lb')
  expect(egress.map(([, r]) => [sgOf(r.referenced_security_group_id), resolve(model, r.from_port), resolve(model, r.to_port), r.cidr_ipv4]))
    .toEqual([['frontend', DEFAULT_PORTS.frontend, DEFAULT_PORTS.frontend, undefined]])
  const lb = model.resource.aws_lb.frontend
  expect(lb.internal).toBe(false)
  expect(lb.security_groups).toEqual(['${aws_security_group.lb.id}'])
  const listeners = resources('aws_lb_listener').map(([, l]) => l)
  expect(listeners.map((l) => l.port)).toEqual([80])
  expect(listeners[0].default_action[0].target_group_arn).toBe('${aws_lb_target_group.frontend.arn}')
  const tg = model.resource.aws_lb_target_group.frontend
  expect(resolve(model, tg.port)).toBe(DEFAULT_PORTS.frontend)
  expect(tg.health_check[0]).toMatchObject({ protocol: 'HTTP', path: '/healthz', port: 'traffic-port' })
  // Front ends join the target group; app servers join none.
  expect(model.module.frontend.target_group_arns).toEqual(['${aws_lb_target_group.frontend.arn}'])
  expect(model.module.frontend.health_check_type).toBe('ELB')
  expect(model.module.appserver.target_group_arns).toBeUndefined()
  expect(model.modules.appserver.variable.target_group_arns.default).toEqual([])
  expect(moduleResources('aws_autoscaling_group').map(([, g]) => g.target_group_arns)).toEqual(['${var.target_group_arns}'])
  // The front ends' /healthz really is on the data port.
  expect(fs.readFileSync(path.join(ROOT, 'frontend/frontend.js'), 'utf8')).toMatch(/reserved\.get\('\/healthz'/)
})

test('front ends, app servers and controllers live in private subnets; only the balancer and load driver are public', () => {
  for (const name of MEMBERS) expect({ name, subnets: model.module[name].subnet_ids }).toEqual({ name, subnets: '${local.private_subnet_ids}' })
  expect(moduleResources('aws_autoscaling_group').map(([, g]) => g.vpc_zone_identifier)).toEqual(['${var.subnet_ids}'])
  expect(model.resource.aws_instance.controller.subnet_id).toMatch(/local\.private_subnet_ids/)
  expect(model.resource.aws_instance.controller.associate_public_ip_address).toBeUndefined()
  expect(model.resource.aws_lb.frontend.subnets).toBe('${local.public_subnet_ids}')
  expect(model.resource.aws_instance.load_driver.subnet_id).toMatch(/local\.public_subnet_ids/)
  for (const [name, lt] of [...resources('aws_launch_template'), ...moduleResources('aws_launch_template')]) {
    expect({ name, public: (lt.network_interfaces || []).some((n) => n.associate_public_ip_address === true) }).toEqual({ name, public: false })
  }
})

test('every launch template and instance requires IMDSv2 and encrypts its root volume', () => {
  // One launch template (the member module's, used by front ends and app
  // servers) and two instances (controllers, load driver).
  const launchers = [...resources('aws_launch_template'), ...moduleResources('aws_launch_template'), ...resources('aws_instance')]
  expect(launchers.map(([name]) => name).sort()).toEqual(['./modules/member:this', 'controller', 'load_driver'])
  for (const [name, r] of launchers) {
    expect({ name, tokens: r.metadata_options && r.metadata_options[0].http_tokens }).toEqual({ name, tokens: 'required' })
    const volume = r.root_block_device ? r.root_block_device[0] : r.block_device_mappings[0].ebs[0]
    expect({ name, encrypted: volume.encrypted }).toEqual({ name, encrypted: true })
  }
})

/**
 * Source files that `entry` reaches through relative require() calls, within
 * `dirs` (relative to the repository): the code as it runs in production.
 * Scripts beside it (a local benchmark, say) are not part of it.
 */
function runtimeSources (entry, dirs) {
  const roots = dirs.map((d) => path.join(ROOT, d) + path.sep)
  const seen = new Map()
  const visit = (file) => {
    if (seen.has(file) || !roots.some((r) => file.startsWith(r))) return
    const text = fs.readFileSync(file, 'utf8')
    seen.set(file, text)
    for (const m of text.matchAll(/require\('(\.{1,2}\/[^']+)'\)/g)) {
      const target = path.resolve(path.dirname(file), m[1])
      visit(fs.existsSync(`${target}.js`) ? `${target}.js` : path.join(target, 'index.js'))
    }
  }
  visit(path.join(ROOT, entry))
  expect(seen.size).toBeGreaterThan(3)
  return [...seen.values()]
}

/** The DynamoDB commands some sources send (new XCommand(...)), as IAM actions, minus CreateTable: Terraform creates the tables. */
function dynamoActions (sources) {
  const used = new Set()
  for (const text of sources) {
    if (!text.includes('@aws-sdk/client-dynamodb')) continue
    for (const m of text.matchAll(/new (\w+)Command\(/g)) used.add(`dynamodb:${m[1]}`)
  }
  expect(used.has('dynamodb:GetItem')).toBe(true)
  used.delete('dynamodb:CreateTable')
  return [...used].sort()
}

/** The one statement of a policy document, checked to be what every document here is: one statement, one resource. */
function onlyStatement (docName) {
  const doc = model.data.aws_iam_policy_document[docName]
  expect({ docName, statements: doc.statement.length }).toEqual({ docName, statements: 1 })
  return doc.statement[0]
}

test('IAM: kv-cache app servers may issue exactly the DynamoDB actions the app sends, on the kv table only', () => {
  const actions = resolve(model, model.locals.kv_cache_dynamodb_actions)
  expect([...actions].sort()).toEqual(dynamoActions(runtimeSources('apps/kv-cache/index.js', ['apps/kv-cache', 'core'])))
  const statement = onlyStatement('appserver_dynamodb')
  expect(statement.actions).toBe('${local.kv_cache_dynamodb_actions}')
  expect(statement.resources).toEqual(['${aws_dynamodb_table.kv.arn}'])
  expect(statement.effect ?? 'Allow').toBe('Allow')
  const policy = model.resource.aws_iam_role_policy.appserver_dynamodb
  expect(policy.role).toBe('${aws_iam_role.node["appserver"].id}')
  expect(policy.count).toBe('${local.kv_cache ? 1 : 0}')
  expect(policy.policy).toBe('${data.aws_iam_policy_document.appserver_dynamodb.json}')
})

test('IAM: controllers may issue exactly the DynamoDB actions their state store sends, on the state table only', () => {
  // bin/controller.js and everything it runs: the controller, its state
  // store and leader election, the shared core.
  const actions = resolve(model, model.locals.controller_state_dynamodb_actions)
  expect([...actions].sort()).toEqual(dynamoActions(runtimeSources('bin/controller.js', ['bin', 'cli', 'controller', 'core'])))
  const statement = onlyStatement('controller_state')
  expect(statement.actions).toBe('${local.controller_state_dynamodb_actions}')
  expect(statement.resources).toEqual(['${aws_dynamodb_table.controller_state.arn}'])
  expect(statement.effect ?? 'Allow').toBe('Allow')
  const policy = model.resource.aws_iam_role_policy.controller_state
  expect(policy.role).toBe('${aws_iam_role.node["controller"].id}')
  expect(policy.count).toBeUndefined()
  expect(policy.policy).toBe('${data.aws_iam_policy_document.controller_state.json}')
})

test('IAM: the cluster token is readable by controllers, front ends and app servers only', () => {
  const read = onlyStatement('cluster_token_read')
  expect(read).toMatchObject({ actions: ['ssm:GetParameter'], resources: ['${aws_ssm_parameter.cluster_token.arn}'] })
  expect(read.effect ?? 'Allow').toBe('Allow')
  const policy = model.resource.aws_iam_role_policy.cluster_token
  expect(policy).toMatchObject({ for_each: '${local.cluster_token_roles}', role: '${aws_iam_role.node[each.key].id}', policy: '${data.aws_iam_policy_document.cluster_token_read.json}' })
  expect(model.locals.cluster_token_roles).toBe('${toset(["controller", "frontend", "appserver"])}')
  // AmazonSSMManagedInstanceCore allows ssm:GetParameter(s) on every
  // parameter, and aws/ssm decrypts for the whole account: the load driver,
  // which signs nothing, is denied the token explicitly.
  const deny = onlyStatement('cluster_token_deny')
  expect(deny).toMatchObject({ effect: 'Deny', resources: ['${aws_ssm_parameter.cluster_token.arn}'] })
  expect([...deny.actions].sort()).toEqual(['ssm:GetParameter', 'ssm:GetParameterHistory', 'ssm:GetParameters'])
  expect(model.resource.aws_iam_role_policy.load_driver_no_cluster_token).toMatchObject({
    count: '${local.load_driver_count}',
    role: '${aws_iam_role.node["load-driver"].id}',
    policy: '${data.aws_iam_policy_document.cluster_token_deny.json}'
  })
})

test('IAM: SSM Session Manager for every role, no other managed policy, and no wildcard anywhere', () => {
  expect(resources('aws_iam_role_policy').map(([n]) => n).sort()).toEqual(['appserver_dynamodb', 'cluster_token', 'controller_state', 'load_driver_no_cluster_token'])
  expect(model.resource.aws_iam_policy).toBeUndefined()
  // Managed policies: Session Manager only.
  const attachments = resources('aws_iam_role_policy_attachment')
  expect(attachments.map(([, a]) => a.policy_arn)).toEqual(['arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore'])
  // No wildcard action or resource anywhere in a policy document.
  for (const [name, d] of Object.entries(model.data.aws_iam_policy_document)) {
    for (const s of d.statement) {
      expect({ name, wildcard: JSON.stringify([s.actions, s.resources ?? []]).includes('*') }).toEqual({ name, wildcard: false })
    }
  }
})

/** The hash key a store creates its table with (its CreateTable call): [name, type]. */
/** The hash key a store passes to core/dynamo-client.js's ensureTable, and the attribute type that creates it with. */
function storeKey (file) {
  const store = fs.readFileSync(path.join(ROOT, file), 'utf8')
  const key = /ensureTable\(this\.client, \{[^}]*hashKey: '([^']+)'/.exec(store)
  const shared = fs.readFileSync(path.join(ROOT, 'core/dynamo-client.js'), 'utf8')
  const type = /AttributeDefinitions: \[\{ AttributeName: hashKey, AttributeType: '(\w)' \}\]/.exec(shared)
  expect({ file, found: Boolean(key && type) }).toEqual({ file, found: true })
  expect(shared).toMatch(/KeySchema: \[\{ AttributeName: hashKey, KeyType: 'HASH' \}\]/) // and no sort key
  return [key[1], type[1]]
}

test.each([
  ['kv', 'apps/kv-cache/dynamo-store.js', '${var.ddb_table_name}'],
  ['controller_state', 'controller/state-store.js', '${local.controller_state_table_name}']
])('the %s table is on-demand with the key schema %s uses, and no sort key', (name, file, tableName) => {
  const [hash, type] = storeKey(file)
  const table = model.resource.aws_dynamodb_table[name]
  expect(table).toMatchObject({ name: tableName, billing_mode: 'PAY_PER_REQUEST', hash_key: hash })
  expect(table.attribute).toEqual([{ name: hash, type }])
  expect(table.range_key).toBeUndefined()
})

test('the network spans at least two zones with public and private subnets, or uses an existing VPC', () => {
  expect(model.variable.az_count.default).toBeGreaterThanOrEqual(2)
  expect(model.variable.az_count.validation[0].condition).toMatch(/var\.az_count >= 2/)
  for (const tier of ['public', 'private']) {
    expect(model.resource.aws_subnet[tier].count).toBe('${local.create_vpc ? length(local.azs) : 0}')
  }
  expect(model.locals.private_subnet_ids).toBe('${local.create_vpc ? aws_subnet.private[*].id : var.existing_private_subnet_ids}')
  expect(model.locals.public_subnet_ids).toBe('${local.create_vpc ? aws_subnet.public[*].id : var.existing_public_subnet_ids}')
  expect(model.locals.vpc_id).toBe('${local.create_vpc ? aws_vpc.this[0].id : var.existing_vpc_id}')
  // Private subnets leave through NAT; public ones through the internet gateway.
  expect(model.resource.aws_route.private_nat.nat_gateway_id).toMatch(/aws_nat_gateway\.this/)
  expect(model.resource.aws_route.public_internet.gateway_id).toMatch(/aws_internet_gateway\.this/)
})

const withTerraform = terraformBin() ? test : test.skip

withTerraform('terraform evaluates SSH as off by default, and on only with a key and source ranges', () => {
  const scratch = scratchModule('output "ssh" {\n  value = local.ssh_ingress_cidrs\n}\n')
  try {
    const base = { source_git_repo: 'https://example.com/chopper.git' }
    expect(scratch.outputs(base).ssh).toEqual([])
    expect(scratch.outputs({ ...base, ssh_cidr_blocks: ['198.51.100.0/24'] }).ssh).toEqual([])
    expect(scratch.outputs({ ...base, ssh_key_name: 'ops', ssh_cidr_blocks: ['198.51.100.0/24'] }).ssh).toEqual(['198.51.100.0/24'])
  } finally {
    scratch.remove()
  }
  expect(model.resource.aws_vpc_security_group_ingress_rule.load_driver_ssh.for_each).toBe('${toset(local.ssh_ingress_cidrs)}')
  expect(model.resource.aws_instance.load_driver.key_name).toBe('${var.ssh_key_name}')
  for (const [name, lt] of moduleResources('aws_launch_template')) expect({ name, key: lt.key_name }).toEqual({ name, key: undefined })
  expect(model.resource.aws_instance.controller.key_name).toBeUndefined()
})
