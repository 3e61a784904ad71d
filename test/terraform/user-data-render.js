'use strict'

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
// Per-instance values the common script reads from instance metadata, and a sample of each.
const BOOT_VALUES = { INSTANCE_ID: 'i-0123456789abcdef0', PRIVATE_IP: '10.40.9.20' }
// Sample values for what only AWS knows, standing in for unresolved references.
const placeholderValue = (ref) => ref === '<data.aws_partition.current.dns_suffix>' ? 'amazonaws.com' : '10.40.8.10'
/** `echo "NAME=$VALUE"` lines a component template appends to its env file: [name, boot variable]. */
const appendedAtBoot = (text) => [...text.matchAll(/echo "([A-Z0-9_]+)=\$([A-Z_]+)"/g)].map((m) => [m[1], m[2]])

/** @param {object} model from loadConfig */
function createRenderer (model) {
  const calls = templateCalls(model)

  function templateOf (component) {
    const call = calls.find((c) => c.template === `templates/${component}.sh.tftpl`)
    if (!call) throw new Error(`no templatefile() call renders templates/${component}.sh.tftpl`)
    return { ...call, text: fs.readFileSync(path.join(TF_DIR, call.template), 'utf8') }
  }

  /** Env file lines the way user-data.tf joins them (`for k, v in map : "k=v"`, sorted keys). */
  function envLines (mapName, overrides = {}) {
    const map = resolve(model, model.locals[mapName], { ...SAMPLE_VARS, ...overrides })
    return Object.keys(map).sort().map((k) => `${k}=${map[k]}`)
  }

  /** The vars each component template gets, with env_file built from its env maps. */
  function templateVars (component, overrides = {}) {
    const { varsLocal } = templateOf(component)
    const vars = resolve(model, model.locals[varsLocal], { ...SAMPLE_VARS, ...overrides })
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

  return { templateOf, templateVars, userData, writtenEnv }
}

module.exports = { COMPONENTS, SAMPLE_VARS, COMMON_SAMPLE, BOOT_VALUES, placeholderValue, appendedAtBoot, createRenderer }
