'use strict'

const { InvalidArgumentError } = require('./errors')

/**
 * Every environment variable each component's entry point reads, with its
 * default, in one visible place. The bin/ entry points read through
 * `readEnv`, and the Terraform parse test imports this table so the
 * deployment's user_data cannot drift from what the code reads.
 */

const DEFAULT_PORTS = Object.freeze({
  frontend: 8080, // public data port
  frontendControl: 8081, // assignment pushes from the controller
  controller: 7070, // control plane only
  app: 9000, // data port (front ends forward here)
  appControl: 9001 // assignment pushes, load reports
})

const int = (v) => (/^\d+$/.test(v) ? Number(v) : NaN)
const str = (v) => v
const fraction = (v, name) => {
  if (/^\d+(\.\d+)?$/.test(v) && Number(v) <= 1) return Number(v)
  throw new InvalidArgumentError(`environment variable ${name} must be a number from 0 to 1, got ${JSON.stringify(v)}`)
}
const bool = (v, name) => {
  if (v === 'true' || v === 'false') return v === 'true'
  throw new InvalidArgumentError(`environment variable ${name} must be true or false, got ${JSON.stringify(v)}`)
}
const positive = (v, name) => {
  if (/^\d+(\.\d+)?$/.test(v) && Number(v) > 0) return Number(v)
  throw new InvalidArgumentError(`environment variable ${name} must be a number > 0, got ${JSON.stringify(v)}`)
}

// The shared cluster secret that signs every control call (docs/security.md).
// Optional: unset, the component runs unauthenticated and warns at start.
const clusterToken = (v, name) => {
  if (v.length >= 16) return v
  throw new InvalidArgumentError(`environment variable ${name} must be at least 16 characters (e.g. openssl rand -base64 32), got ${v.length}`)
}
const CLUSTER_TOKEN = Object.freeze({ key: 'clusterToken', default: undefined, parse: clusterToken, optional: true })

const ENV = Object.freeze({
  controller: {
    CHOPPER_CONTROLLER_HOST: { key: 'host', default: '0.0.0.0', parse: str },
    CHOPPER_CONTROLLER_PORT: { key: 'port', default: DEFAULT_PORTS.controller, parse: int },
    CHOPPER_STRATEGY: { key: 'strategy', default: 'chopper', parse: str },
    CHOPPER_PERIOD_MS: { key: 'periodMs', default: 5000, parse: int },
    CHOPPER_LEASE_MS: { key: 'leaseMs', default: 1500, parse: int },
    CHOPPER_HANDOFF: { key: 'handoff', default: 'fenced', parse: str },
    CHOPPER_LOAD_METRIC: { key: 'loadMetric', default: 'cost', parse: str },
    CHOPPER_QUIET_BELOW: { key: 'quietBelow', default: 0.5, parse: fraction }, // 0: balance at any load
    // High availability (docs/controller-ha.md): with a state table the
    // controller persists its state in DynamoDB and competes for leadership
    // with every controller sharing the table; without one it leads alone, in memory.
    CHOPPER_STATE_TABLE: { key: 'stateTable', default: undefined, parse: str, optional: true },
    CHOPPER_STATE_ENDPOINT: { key: 'stateEndpoint', default: undefined, parse: str, optional: true }, // unset: AWS
    AWS_REGION: { key: 'region', default: 'us-west-2', parse: str, optional: true },
    CHOPPER_CONTROLLER_ID: { key: 'controllerId', default: undefined, parse: str, optional: true }, // unset: hostname-pid
    // The address members reach this controller at (the leader publishes it in its lease).
    CHOPPER_ADVERTISE_HOST: { key: 'advertiseHost', default: undefined, parse: str, optional: true },
    CHOPPER_ELECTION_LEASE_MS: { key: 'electionLeaseMs', default: undefined, parse: int, optional: true },
    CHOPPER_CLUSTER_TOKEN: CLUSTER_TOKEN,
    LOG_LEVEL: { key: 'logLevel', default: 'info', parse: str }
  },
  frontend: {
    CHOPPER_CONTROLLER_URL: { key: 'controllerUrl', default: `http://127.0.0.1:${DEFAULT_PORTS.controller}`, parse: str },
    CHOPPER_FRONTEND_ID: { key: 'id', default: undefined, parse: str },
    CHOPPER_FRONTEND_HOST: { key: 'host', default: '0.0.0.0', parse: str },
    CHOPPER_FRONTEND_PORT: { key: 'port', default: DEFAULT_PORTS.frontend, parse: int },
    CHOPPER_FRONTEND_CONTROL_PORT: { key: 'controlPort', default: DEFAULT_PORTS.frontendControl, parse: int },
    // node:cluster processes sharing the data port; 'cores' = os.availableParallelism().
    // Each worker's control port is its own (CHOPPER_FRONTEND_CONTROL_PORT with one worker, ephemeral with more).
    CHOPPER_FRONTEND_WORKERS: { key: 'workers', default: 'cores', parse: (v) => (v === 'cores' ? v : int(v)) },
    CHOPPER_ADVERTISE_HOST: { key: 'advertiseHost', default: '127.0.0.1', parse: str },
    CHOPPER_REPLICA_CHOICE: { key: 'replicaChoice', default: 'p2c', parse: str }, // validated by createFrontend
    CHOPPER_SERVER_REPORT_TTL_MS: { key: 'serverReportTtlMs', default: 250, parse: int }, // 0: ignore app servers' X-Chopper-Inflight
    CHOPPER_SERVER_REPORT_DECAY: { key: 'serverReportDecay', default: true, parse: bool }, // false: a report's others count whole until its TTL
    // optional: unset means none (every request has size 1; no LC* threshold), so AWS need not set them
    CHOPPER_REPLICA_SIZE_PARAM: { key: 'replicaSizeParam', default: undefined, parse: str, optional: true },
    CHOPPER_REPLICA_SIZE_POWER: { key: 'replicaSizePower', default: undefined, parse: positive, optional: true },
    CHOPPER_LCSTAR_THRESHOLD: { key: 'lcstarThreshold', default: undefined, parse: positive, optional: true },
    CHOPPER_CLUSTER_TOKEN: CLUSTER_TOKEN,
    LOG_LEVEL: { key: 'logLevel', default: 'info', parse: str }
  },
  appserver: {
    CHOPPER_APP: { key: 'app', default: 'compute', parse: str },
    CHOPPER_CONTROLLER_URL: { key: 'controllerUrl', default: `http://127.0.0.1:${DEFAULT_PORTS.controller}`, parse: str },
    CHOPPER_SERVER_ID: { key: 'id', default: undefined, parse: str },
    CHOPPER_APP_HOST: { key: 'host', default: '0.0.0.0', parse: str },
    CHOPPER_APP_PORT: { key: 'port', default: DEFAULT_PORTS.app, parse: int },
    CHOPPER_APP_CONTROL_PORT: { key: 'controlPort', default: DEFAULT_PORTS.appControl, parse: int },
    CHOPPER_ADVERTISE_HOST: { key: 'advertiseHost', default: '127.0.0.1', parse: str },
    CHOPPER_CLUSTER_TOKEN: CLUSTER_TOKEN,
    LOG_LEVEL: { key: 'logLevel', default: 'info', parse: str }
  },
  kvCache: {
    CHOPPER_DDB_TABLE: { key: 'table', default: 'chopper-kv', parse: str },
    CHOPPER_DDB_ENDPOINT: { key: 'dynamoEndpoint', default: undefined, parse: str },
    AWS_REGION: { key: 'region', default: 'us-west-2', parse: str },
    REDIS_URL: { key: 'redisUrl', default: undefined, parse: str },
    CHOPPER_CACHE_TTL_MS: { key: 'cacheTtlMs', default: 10000, parse: int },
    CHOPPER_MAX_VALUE_BYTES: { key: 'maxValueBytes', default: 400 * 1024, parse: int }
  }
})

/**
 * Read one component's settings from an environment object.
 * Throws InvalidArgumentError naming the variable when a value does not parse.
 * @param {'controller'|'frontend'|'appserver'|'kvCache'} component
 * @param {Record<string,string|undefined>} env
 */
function readEnv (component, env = process.env) {
  const spec = ENV[component]
  if (!spec) throw new InvalidArgumentError(`unknown component ${component}`)
  const out = {}
  for (const [name, { key, default: dflt, parse }] of Object.entries(spec)) {
    const raw = env[name]
    if (raw === undefined || raw === '') {
      if (dflt !== undefined) out[key] = dflt
      continue
    }
    const v = parse(raw, name)
    if (Number.isNaN(v)) throw new InvalidArgumentError(`environment variable ${name} must be a non-negative integer, got ${JSON.stringify(raw)}`)
    out[key] = v
  }
  return out
}

module.exports = { DEFAULT_PORTS, ENV, readEnv }
