'use strict'
/* eslint-disable no-template-curly-in-string -- @cdktf/hcl2json returns HCL expressions as "${...}" strings */

// Front ends and app servers are one module, modules/member: a launch
// template and the autoscaling group running it. The two calls differ only
// in the inputs that make a component what it is, each wired to that
// component's own group, role, script and variables; everything else is
// passed the same. moved blocks carry existing deployments over.

const fs = require('node:fs')
const path = require('node:path')
const { loadConfig, childModules, resolve, terraformBin, scratchModule } = require('./terraform-config')
const { createRenderer } = require('./user-data-render')

const MEMBERS = ['frontend', 'appserver']
// The inputs that may differ between the two calls: what makes a component.
const PER_COMPONENT = new Set([
  'name', 'component', 'description', 'instance_type', 'instance_count', 'security_group_ids', 'instance_profile_arn',
  'user_data', 'target_group_arns', 'health_check_type', 'instance_tags', 'depends_on'
])

let model
let member

beforeAll(async () => {
  model = await loadConfig()
  member = model.modules.frontend
})

test('front-end and app-server launch templates and groups come from the same module, and only from it', () => {
  expect(MEMBERS.map((m) => model.module[m].source)).toEqual(['./modules/member', './modules/member'])
  expect(childModules(model).map((m) => [m.source, m.calls.sort()])).toEqual([['./modules/member', ['appserver', 'frontend']]])
  expect(model.modules.appserver).toBe(member)
  // No launch template or group of their own in the root module.
  expect(model.resource.aws_launch_template).toBeUndefined()
  expect(model.resource.aws_autoscaling_group).toBeUndefined()
  // One template, run by the module's one group at its latest version.
  expect(Object.keys(member.resource.aws_launch_template)).toEqual(['this'])
  expect(Object.keys(member.resource.aws_autoscaling_group)).toEqual(['this'])
  expect(member.resource.aws_autoscaling_group.this.launch_template[0]).toEqual({
    id: '${aws_launch_template.this.id}',
    version: '${aws_launch_template.this.latest_version}'
  })
  expect(member.resource.aws_launch_template.this.user_data).toBe('${base64encode(var.user_data)}')
})

test('the calls differ only in what makes a component, each wired to its own pieces', () => {
  const [fe, app] = MEMBERS.map((m) => model.module[m])
  for (const key of new Set([...Object.keys(fe), ...Object.keys(app)])) {
    if (PER_COMPONENT.has(key)) continue
    expect({ key, same: fe[key] }).toEqual({ key, same: app[key] })
  }
  for (const c of MEMBERS) {
    const call = model.module[c]
    expect(call).toMatchObject({
      name: `\${var.name}-${c}`,
      component: c,
      instance_type: `\${var.${c}_instance_type}`,
      instance_count: `\${var.${c}_count}`,
      security_group_ids: [`\${aws_security_group.${c}.id}`],
      instance_profile_arn: `\${aws_iam_instance_profile.node["${c}"].arn}`,
      user_data: `\${local.${c}_user_data}`,
      subnet_ids: '${local.private_subnet_ids}',
      tags: '${local.tags}'
    })
    // Members boot after the controllers they register with and the policy that lets them read the token.
    expect(call.depends_on).toEqual(expect.arrayContaining(['${aws_instance.controller}', '${aws_iam_role_policy.cluster_token}']))
  }
  // Names as before the module existed: an existing group is moved, not replaced.
  expect(member.resource.aws_launch_template.this.name_prefix).toBe('${var.name}-')
  expect(member.resource.aws_autoscaling_group.this.name).toBe('${var.name}')
  expect(model.moved.map(({ from, to }) => [from, to]).sort()).toEqual(MEMBERS.flatMap((c) => [
    [`\${aws_autoscaling_group.${c}}`, `\${module.${c}.aws_autoscaling_group.this}`],
    [`\${aws_launch_template.${c}}`, `\${module.${c}.aws_launch_template.this}`]
  ]).sort())
  expect(model.output.frontend_asg_name.value).toBe('${module.frontend.autoscaling_group_name}')
  expect(model.output.appserver_asg_name.value).toBe('${module.appserver.autoscaling_group_name}')
})

test('instances and volumes are tagged with their component, and app servers with their app', () => {
  const [instance, volume] = member.resource.aws_launch_template.this.tag_specifications
  expect(instance).toEqual({ resource_type: 'instance', tags: '${merge(var.tags, { Name = var.name, Component = var.component }, var.instance_tags)}' })
  expect(volume).toEqual({ resource_type: 'volume', tags: '${merge(var.tags, { Name = var.name, Component = var.component })}' })
  expect(model.module.appserver.instance_tags).toEqual({ App: '${var.app}' })
  expect(model.module.frontend.instance_tags).toBeUndefined()
})

const withTerraform = terraformBin() ? test : test.skip

withTerraform('terraform accepts the inputs each call passes, and the module\'s validations reject a wrong call', () => {
  // The module's variables.tf alone: its validations need no provider.
  const scratch = scratchModule('', { from: member.dir, files: ['variables.tf'] })
  try {
    const renderer = createRenderer(model)
    const sample = { source_git_repo: 'https://example.com/chopper.git' }
    // What the root passes, with stand-ins for what only AWS knows.
    const aws = {
      ami_id: 'ami-0123456789abcdef0',
      root_device_name: '/dev/sda1',
      security_group_ids: ['sg-0123456789abcdef0'],
      instance_profile_arn: 'arn:aws:iam::123456789012:instance-profile/chopper-x',
      subnet_ids: ['subnet-01234567', 'subnet-89abcdef'],
      target_group_arns: ['arn:aws:elasticloadbalancing:us-west-2:123456789012:targetgroup/chopper-frontend/0123456789abcdef']
    }
    const inputs = (c) => {
      const call = model.module[c]
      const out = {}
      for (const [k, v] of Object.entries(call)) {
        if (['source', 'depends_on'].includes(k)) continue
        if (Object.hasOwn(aws, k)) out[k] = aws[k]
        else if (k === 'user_data') out[k] = renderer.userData(c)
        else if (k === 'tags') out[k] = { Project: 'chopper', Deployment: 'chopper' }
        else out[k] = resolve(model, v, sample)
      }
      return out
    }
    const plan = (vars) => {
      fs.writeFileSync(path.join(scratch.dir, 'inputs.tfvars.json'), JSON.stringify(vars))
      const r = scratch.run(['plan', '-input=false', '-no-color', '-var-file=inputs.tfvars.json'])
      return { status: r.status, stderr: r.stderr.replace(/\s+/g, ' ') }
    }
    for (const c of MEMBERS) expect({ c, ...plan(inputs(c)) }).toEqual({ c, status: 0, stderr: '' })
    const wrong = plan({ ...inputs('appserver'), component: 'controller' })
    expect(wrong.status).not.toBe(0)
    expect(wrong.stderr).toContain('The component must be frontend or appserver')
    const noScript = plan({ ...inputs('frontend'), user_data: 'echo hello' })
    expect(noScript.stderr).toContain('The user_data must be a bash script')
  } finally {
    scratch.remove()
  }
})
