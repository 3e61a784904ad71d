'use strict'
/* eslint-disable no-template-curly-in-string -- HCL expressions as @cdktf/hcl2json returns them */

/**
 * Renders the boot scripts terraform/ would hand to each instance, offline:
 * the component templates get the variables user-data.tf gives them, with
 * each env_file built from the env maps in user-data.tf (resolved to
 * variable defaults) and sample values standing in for what only AWS knows
 * (instance addresses, the load balancer's name). Shared by the user_data
 * and boot tests.
 */

const fs = require('node:fs')
const path = require('node:path')
const { TF_DIR, Unresolved, resolve, renderTemplate, templateCalls } = require('./terraform-config')

// Which env maps (locals in user-data.tf) feed which ENV table, per component.
const COMPONENTS = {
  controller: { envLocals: { controller_env: 'controller' }, entry: 'bin/controller.js' },
  frontend: { envLocals: { frontend_env: 'frontend' }, entry: 'bin/frontend.js' },
  appserver: { envLocals: { appserver_env: 'appserver', kv_cache_env: 'kvCache' }, entry: 'bin/appserver.js' }
}
const SAMPLE_VARS = { source_git_repo: 'https://example.com/chopper.git' }
// What locals.tf's common_template_vars evaluates to for SAMPLE_VARS; a
// terraform-backed test checks that terraform agrees.
const COMMON_SAMPLE = { node_major: 20, git_repo: SAMPLE_VARS.source_git_repo, git_ref: 'main', tarball_url: '' }
// Per-instance values the scripts read at boot (instance metadata, and the
// cluster token from Parameter Store), and a sample of each.
const BOOT_VALUES = { INSTANCE_ID: 'i-0123456789abcdef0', PRIVATE_IP: '10.40.9.20', CLUSTER_TOKEN: 'SampleClusterToken0123456789abcdefghijklmnopqrstu' }

// Settings the controller high-availability work (issue 11) adds to
// core/settings.js ENV, per ENV table; some have landed, others (the cluster
// token) not yet. The deployment sets them all. A name not in ENV is
// accepted because it is listed here; once it is in ENV, every check
// applies to it as to any other name.
const PENDING_ENV = Object.freeze({
  controller: ['CHOPPER_STATE_TABLE', 'CHOPPER_STATE_ENDPOINT', 'AWS_REGION', 'CHOPPER_CONTROLLER_ID', 'CHOPPER_ADVERTISE_HOST', 'CHOPPER_CLUSTER_TOKEN'],
  frontend: ['CHOPPER_CLUSTER_TOKEN'],
  appserver: ['CHOPPER_CLUSTER_TOKEN']
})

// Controllers' addresses are known only once AWS launched them, and
// local.controller_urls is a for expression, which the resolver does not
// evaluate: the renderer stands in these addresses, one per controller. A
// test pins the expression and has terraform evaluate it to the same string.
const SAMPLE_CONTROLLER_IPS = ['10.40.8.10', '10.40.9.11', '10.40.8.12']
const CONTROLLER_URLS_EXPR = '${join(",", [for ip in aws_instance.controller[*].private_ip : "http://${ip}:${var.controller_port}"])}'
/** What local.controller_urls evaluates to with the sample addresses. */
const sampleControllerUrls = ({ controller_count: count, controller_port: port }) =>
  SAMPLE_CONTROLLER_IPS.slice(0, count).map((ip) => `http://${ip}:${port}`).join(',')
// Sample values for what only AWS knows, standing in for unresolved references.
const placeholderValue = (ref) => ref === '<data.aws_partition.current.dns_suffix>' ? 'amazonaws.com' : '10.40.8.10'
/** `echo "NAME=$VALUE"` lines a component template appends to its env file: [name, boot variable]. */
const appendedAtBoot = (text) => [...text.matchAll(/echo "([A-Z0-9_]+)=\$([A-Z_]+)"/g)].map((m) => [m[1], m[2]])

/** @param {object} model from loadConfig */
function createRenderer (model) {
  const calls = templateCalls(model)
  if (model.locals.controller_urls !== CONTROLLER_URLS_EXPR) {
    throw new Error(`local.controller_urls changed (${model.locals.controller_urls}): update the renderer's stand-in for it`)
  }

  /** The model with stand-ins for what only AWS knows, for these variable values. */
  function withStandIns (overrides) {
    const value = (name) => Object.hasOwn(overrides, name) ? overrides[name] : model.variable[name].default
    const locals = { ...model.locals, controller_urls: sampleControllerUrls({ controller_count: value('controller_count'), controller_port: value('controller_port') }) }
    return { ...model, locals }
  }

  function templateOf (component) {
    const call = calls.find((c) => c.template === `templates/${component}.sh.tftpl`)
    if (!call) throw new Error(`no templatefile() call renders templates/${component}.sh.tftpl`)
    return { ...call, text: fs.readFileSync(path.join(TF_DIR, call.template), 'utf8') }
  }

  /** Env file lines the way user-data.tf joins them (`for k, v in map : "k=v"`, sorted keys). */
  function envLines (mapName, overrides = {}) {
    const map = resolve(withStandIns(overrides), model.locals[mapName], { ...SAMPLE_VARS, ...overrides })
    return Object.keys(map).sort().map((k) => `${k}=${map[k]}`)
  }

  /** The vars each component template gets, with env_file built from its env maps. */
  function templateVars (component, overrides = {}) {
    const { varsLocal } = templateOf(component)
    const vars = resolve(withStandIns(overrides), model.locals[varsLocal], { ...SAMPLE_VARS, ...overrides })
    if (COMPONENTS[component]) {
      const expr = model.locals[varsLocal].env_file
      const lines = []
      for (const mapName of Object.keys(COMPONENTS[component].envLocals)) {
        if (!expr.includes(`local.${mapName}`)) throw new Error(`${varsLocal}.env_file does not join local.${mapName}`)
        const conditional = new RegExp(`local\\.${mapName}\\s*:[^\\]]*\\bif local\\.kv_cache`).test(expr)
        const app = overrides.app ?? model.variable.app.default
        if (!conditional || app === 'kv-cache') lines.push(...envLines(mapName, overrides))
      }
      vars.env_file = lines.join('\n')
    }
    for (const [k, v] of Object.entries(vars)) {
      if (v instanceof Unresolved) vars[k] = v.toString()
    }
    return vars
  }

  /** The whole user_data of a component: common part, then its own. */
  function userData (component, overrides = {}) {
    const common = renderTemplate(fs.readFileSync(path.join(TF_DIR, 'templates/common.sh.tftpl'), 'utf8'), COMMON_SAMPLE)
    return [common, renderTemplate(templateOf(component).text, templateVars(component, overrides))].join('\n')
  }

  /** The env file a rendered script writes: its quoted heredoc plus the lines appended from instance metadata. */
  function writtenEnv (script, component) {
    const m = new RegExp(`cat > "\\$ENV_DIR/${component}\\.env" <<'(\\w+)'\\n([\\s\\S]*?)\\n\\1\\n`).exec(script)
    if (!m) throw new Error(`the ${component} script does not write $ENV_DIR/${component}.env from a quoted heredoc`)
    const env = {}
    for (const line of m[2].split('\n')) {
      const eq = line.indexOf('=')
      env[line.slice(0, eq)] = line.slice(eq + 1).replace(/<[^>]+>/g, placeholderValue)
    }
    for (const [name, from] of appendedAtBoot(script)) env[name] = BOOT_VALUES[from]
    return env
  }

  return { templateOf, templateVars, userData, writtenEnv, withStandIns }
}

module.exports = {
  COMPONENTS,
  SAMPLE_VARS,
  COMMON_SAMPLE,
  BOOT_VALUES,
  PENDING_ENV,
  SAMPLE_CONTROLLER_IPS,
  CONTROLLER_URLS_EXPR,
  sampleControllerUrls,
  placeholderValue,
  appendedAtBoot,
  createRenderer
}
